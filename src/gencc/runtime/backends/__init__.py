"""Pools of workers behind one contract (:class:`Backend`, in :mod:`.base`): worker processes
behind non-blocking pipes and one ``select`` (:mod:`.local`, with shared-memory arenas for large
tasks, :mod:`.shared`, and the worker's own loop, :mod:`.worker`), worker threads
(:mod:`.threads`) and Ray actors on loopback (:mod:`.ray`). The executor imports a backend only
when it is asked for, so Ray is needed only for ``backend="ray"``."""

from .base import Backend

__all__ = ["Backend"]
