"""The contract between the executor and a pool of workers.

A backend only moves tasks and events; every decision (what to send where,
when a worker is hung, when to restart it, when a batch is done) is the
executor's.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..events import Event, Task

__all__ = ["Backend"]


@runtime_checkable
class Backend(Protocol):
    """What :class:`~gencc.runtime.CodedExecutor` needs from a pool of N workers.

    Rules every implementation keeps:

    - :meth:`submit`, :meth:`cancel` and :meth:`restart` never block on a
      worker: the executor calls them while holding its lock, and a worker
      that stopped reading (hung, SIGSTOP) must not stall it.
    - Each accepted task ends in one event naming it (result, error or
      cancelled) or in a :class:`~gencc.runtime.events.WorkerDied` of its
      worker; a worker runs its tasks in the order it received them.
    - A backend never restarts a worker by itself: it reports
      ``WorkerDied`` once and waits for :meth:`restart`. Events of a worker's
      earlier incarnation are dropped, never reported after a restart.
    - Every listening socket is on 127.0.0.1 unless the user points the
      backend at a cluster.

    Attributes
    ----------
    name : str
    n_workers : int
    pids : list of int or None
        Process id of each worker, where known.
    """

    name: str
    n_workers: int

    def start(self) -> None:
        """Start every worker and return once each has built the model.
        On failure (or interruption) nothing started is left running."""

    def submit(self, worker: int, task: Task) -> bool:
        """Queue ``task`` for ``worker``; False if the worker cannot take it."""

    def cancel(self, worker: int, batch: int) -> None:
        """Ask ``worker`` to drop its tasks of ``batch`` (each still ends in an event)."""

    def poll(self, timeout: float) -> list[Event]:
        """Events that arrived, waiting up to ``timeout`` seconds for the first."""

    def restart(self, worker: int) -> None:
        """Kill ``worker`` if alive and start a fresh one in its place."""

    def shutdown(self) -> None:
        """Stop every worker; nothing the backend started is left running."""
