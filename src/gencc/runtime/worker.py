"""Worker-side code of the local backend: build the model once, then serve tasks."""

from __future__ import annotations

import os
import time
import traceback

import numpy as np

from .events import TaskCancelled, TaskError, TaskResult
from .faults import run_faulty
from .shared import ArenaView, SharedSlice

__all__ = ["worker_main", "build_model", "compute", "set_threads"]


def build_model(factory):
    """The callable f from a factory: a zero-argument callable, a torch module
    or an importable ``"module:attribute"`` path to either."""
    if isinstance(factory, str):
        import importlib

        mod, _, attr = factory.partition(":")
        if not attr:
            raise ValueError(f"model path must look like 'package.module:factory', got {factory!r}")
        factory = getattr(importlib.import_module(mod), attr)
    try:
        import torch

        if isinstance(factory, torch.nn.Module):
            return _TorchFunction(factory)
    except ImportError:  # pragma: no cover - torch is optional
        pass
    model = factory()
    if not callable(model):
        raise TypeError(f"the model factory must return a callable f(X), got {type(model).__name__}")
    return model


class _TorchFunction:
    """Wrap a torch module as a vectorised float64 numpy function."""

    def __init__(self, module):
        import torch

        self.module = module.eval()
        self.dtype = next(module.parameters()).dtype if any(True for _ in module.parameters()) else torch.float32
        self.torch = torch

    def __call__(self, X):
        with self.torch.no_grad():
            out = self.module(self.torch.as_tensor(np.asarray(X), dtype=self.dtype))
        return out.double().numpy()


def set_threads(threads: int | None):
    """Limit a worker's compute threads (OpenMP and torch)."""
    if not threads:
        return
    os.environ["OMP_NUM_THREADS"] = str(threads)
    try:
        import torch

        torch.set_num_threads(threads)
    except ImportError:  # pragma: no cover
        pass


def compute(f, x: np.ndarray, stacked: bool = False) -> np.ndarray:
    """Run f on one task's coded inputs.

    Parameters
    ----------
    f : callable
        The vectorised model.
    x : ndarray, shape (B, *in_shape) if ``stacked``, else in_shape
        The task's B coded inputs (micro-batching), or its one coded input.
    stacked : bool

    Returns
    -------
    ndarray, shape (B, *out_shape) if ``stacked``, else out_shape; float64
    """
    if stacked:
        return np.asarray(f(x), dtype=np.float64)
    return np.asarray(f(x[None]), dtype=np.float64)[0]


def worker_main(tasks_in, events_out, factory, worker_id: int, threads: int | None):
    """Process entry point of a local worker.

    Reads ``("task", Task)``, ``("cancel", batch)``, ``("arena", name)`` (the
    shared memory that later tasks' :class:`~gencc.runtime.shared.SharedSlice`
    inputs refer to) and ``("stop",)`` from ``tasks_in``; writes
    ``("ready", pid)`` once the model is built, then one TaskResult,
    TaskError or TaskCancelled per task to ``events_out``, in task order. Exits when told to stop or when the master is gone.
    """
    set_threads(threads)
    try:
        f = build_model(factory)
    except BaseException:  # report and stop: the executor fails construction with this text
        events_out.send(("init_error", traceback.format_exc()))
        return
    events_out.send(("ready", os.getpid()))
    queue, cancelled = [], set()
    parent = os.getppid()
    arena = None  # this process's view of the master's shared memory, once it sends one

    def orphaned() -> bool:
        return os.getppid() != parent

    def cancel(batch):
        cancelled.add(batch)
        if len(cancelled) > 4096:  # batch ids only grow: forget the oldest
            for old in sorted(cancelled)[:2048]:
                cancelled.discard(old)
        for task in [t for t in queue if t.batch == batch]:
            queue.remove(task)
            events_out.send(TaskCancelled(worker_id, task.batch, task.slot))

    def drain(block_s: float) -> bool:
        """Read pending messages; False once told to stop or orphaned."""
        nonlocal arena
        deadline = time.monotonic() + block_s
        while True:
            if not tasks_in.poll(max(0.0, deadline - time.monotonic())):
                return not orphaned()
            try:
                msg = tasks_in.recv()
            except (EOFError, OSError):
                return False
            if msg[0] == "stop":
                return False
            if msg[0] == "cancel":
                cancel(msg[1])
            elif msg[0] == "arena":
                arena = ArenaView(msg[1])
            else:
                queue.append(msg[1])
            deadline = time.monotonic()  # got one: keep draining without blocking

    while drain(0.0 if queue else 0.5):
        if not queue:
            continue
        task = queue.pop(0)
        start = time.monotonic()
        # an injected delay is a sleep that a cancellation of this batch interrupts
        while time.monotonic() - start < task.fault.delay and task.batch not in cancelled:
            if not drain(min(0.02, task.fault.delay - (time.monotonic() - start))):
                return
        if task.batch in cancelled:
            events_out.send(TaskCancelled(worker_id, task.batch, task.slot))
            continue
        try:
            x = arena.array(task.x) if isinstance(task.x, SharedSlice) else task.x
            y = run_faulty(lambda: compute(f, x, task.stacked), task.fault, orphaned=orphaned)
            events_out.send(TaskResult(worker_id, task.batch, task.slot, y, time.monotonic() - start))
        except Exception as exc:  # an erasure for the master, not the end of this worker
            events_out.send(TaskError(worker_id, task.batch, task.slot, f"{type(exc).__name__}: {exc}",
                                      time.monotonic() - start))
