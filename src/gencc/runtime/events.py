"""What crosses between the executor and a backend: tasks out, events in.

Every task a backend accepts ends in exactly one event that names it:
:class:`TaskResult`, :class:`TaskError` or :class:`TaskCancelled`, unless the
worker dies first (:class:`WorkerDied`), after which the executor forgets all
the worker's tasks. The executor counts on this to know, at every moment,
which task each worker is busy with.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .faults import TaskFault

__all__ = ["Task", "TaskResult", "TaskError", "TaskCancelled", "WorkerReady", "WorkerDied", "Event"]


@dataclass(frozen=True)
class Task:
    """The coded inputs of one batch for one worker.

    Attributes
    ----------
    batch : int
        Index of the batch it belongs to.
    slot : int
        Which coded input of the batch (the worker index it was encoded for;
        differs from the worker that runs it after a re-dispatch).
    x : ndarray, shape (B, *in_shape) if ``stacked``, else in_shape
        The task's coded inputs: B of them under micro-batching (the worker
        runs f on them in one call and answers shape (B, *out_shape)), else
        one (the worker answers shape out_shape).
    fault : TaskFault
        Injected fault (experiments); ``TaskFault()`` is none.
    stacked : bool
        Whether ``x`` holds B coded inputs along its first axis.
    """

    batch: int
    slot: int
    x: np.ndarray
    fault: TaskFault = TaskFault()
    stacked: bool = False


@dataclass(frozen=True)
class TaskResult:
    """Worker ``worker`` computed ``output`` for (batch, slot) in ``seconds``."""

    worker: int
    batch: int
    slot: int
    output: object
    seconds: float


@dataclass(frozen=True)
class TaskError:
    """The task raised on the worker; ``message`` says what."""

    worker: int
    batch: int
    slot: int
    message: str
    seconds: float = 0.0


@dataclass(frozen=True)
class TaskCancelled:
    """The worker dropped the task because its batch was cancelled."""

    worker: int
    batch: int
    slot: int


@dataclass(frozen=True)
class WorkerReady:
    """A restarted worker has built its model and starts on its tasks."""

    worker: int


@dataclass(frozen=True)
class WorkerDied:
    """The worker's process or actor is gone; its unfinished tasks are lost."""

    worker: int
    why: str


Event = TaskResult | TaskError | TaskCancelled | WorkerReady | WorkerDied
