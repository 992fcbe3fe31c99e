"""Worker-side code of the local backend: build the model once, then serve tasks."""

from __future__ import annotations

import ctypes
import os
import select
import signal
import sys
import threading
import time
import traceback

import numpy as np

from ..events import TaskCancelled, TaskError, TaskResult
from ..faults import run_faulty
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
    torch = sys.modules.get("torch")  # a torch module as factory has imported torch: no import for others
    if torch is not None and isinstance(factory, torch.nn.Module):
        return _TorchFunction(factory)
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
    """Limit a worker's compute threads (OpenMP and torch).

    Torch is told only if it is imported already (importing it costs about
    1.5 s of a worker's start for models that never use it); torch imported
    later reads ``OMP_NUM_THREADS``, and callers call this again after
    building the model."""
    if not threads:
        return
    os.environ["OMP_NUM_THREADS"] = str(threads)
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "set_num_threads"):
        torch.set_num_threads(threads)


def compute(f, x: np.ndarray, stacked: bool = False, *, copy_input: bool = False,
            copy_output: bool = False) -> np.ndarray:
    """Run f on one task's coded inputs.

    Parameters
    ----------
    f : callable
        The vectorised model.
    x : ndarray, shape (B, *in_shape) if ``stacked``, else in_shape
        The task's B coded inputs (micro-batching), or its one coded input.
    stacked : bool
    copy_input : bool
        Give f a copy of x: where x is shared with the master (threads) or
        read-only (Ray's object store), so that f may modify its input.
    copy_output : bool
        Copy f's output: where it reaches the master by reference (threads),
        so that an f reusing one output buffer changes no answer given.

    Returns
    -------
    ndarray, shape (B, *out_shape) if ``stacked``, else out_shape; float64
    """
    x = np.array(x) if copy_input else x
    y = f(x if stacked else x[None])
    y = np.array(y, dtype=np.float64) if copy_output else np.asarray(y, dtype=np.float64)
    return y if stacked else y[0]


def die_with_parent(master: int | None) -> bool:
    """Ask Linux to SIGKILL this process when its parent dies (``prctl(PR_SET_PDEATHSIG)``),
    if that parent is a forkserver (not the master itself).

    A local worker's parent is the forkserver: killed, it takes its workers
    with it, even one inside a long f, and the master restarts them through
    a fresh one. (Each child of a forkserver holds a copy of the pipe whose
    end tells the forkserver that the master is gone, so the forkserver
    outlives the master while any worker runs: the master's death is
    :func:`watch_master`'s.) Not under "fork" or "spawn": there the parent is
    the master, and the death signal would follow the master *thread* that
    started the worker, not the process. Returns whether the request was
    made; the process exits at once if its parent died meanwhile."""
    parent = os.getppid()
    if not sys.platform.startswith("linux") or parent == master:
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        armed = libc.prctl(1, int(signal.SIGKILL), 0, 0, 0) == 0  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - no libc prctl
        return False
    if armed and os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)
    return armed


def watch_master(master: int) -> threading.Thread:
    """Start a daemon thread that SIGKILLs this process's group as soon as process ``master`` ends.

    It waits on a pidfd (Linux >= 5.3: woken by the exit itself, no polling),
    else checks every 0.2 s. A worker busy inside f therefore ends with the
    master however the master ends (SIGKILL, OOM kill), where the task loop
    alone would notice only after f returned; so do the processes f started
    (the worker leads its own process group, :func:`worker_main`)."""
    def watch():
        try:
            try:
                fd = os.pidfd_open(master)
            except ProcessLookupError:
                return  # gone already
            except (AttributeError, OSError):  # no pidfd here: poll
                while _alive(master):
                    time.sleep(0.2)
                return
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            while not poller.poll(1000) and _alive(master):  # the pidfd wakes it; the check bounds each wait
                pass
        finally:
            _kill_group()

    thread = threading.Thread(target=watch, name="gencc-master-watch", daemon=True)
    thread.start()
    return thread


def _kill_group():
    try:
        if os.getpgid(0) == os.getpid():  # the leader of its own group: f's children with it
            os.killpg(0, signal.SIGKILL)
    except OSError:
        pass
    os.kill(os.getpid(), signal.SIGKILL)


def _alive(pid: int | None) -> bool:
    if pid is None:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - a pid reused by another user's process
        return False
    return True


def worker_main(tasks_in, events_out, factory, worker_id: int, threads: int | None, master: int | None = None):
    """Process entry point of a local worker.

    Reads ``("task", Task)``, ``("cancel", batch)``, ``("arena", name)`` (the
    shared memory that later tasks' :class:`~gencc.runtime.backends.shared.SharedSlice`
    inputs refer to) and ``("stop",)`` from ``tasks_in``; writes
    ``("ready", pid)`` once the model is built, then one TaskResult,
    TaskError or TaskCancelled per task to ``events_out``, in task order. Exits when told to stop or when the master is gone.

    The worker dies with its parent, the forkserver (:func:`die_with_parent`),
    and with the master, pid ``master`` (:func:`watch_master`), wherever it is.
    It leads a process group of its own, so that the master's kill of it and
    its watch take any process f started along (``os.killpg``).
    """
    die_with_parent(master)
    parent = os.getppid()
    try:
        os.setpgid(0, 0)
    except OSError:  # pragma: no cover - not permitted here: the worker alone is killed
        pass
    if master is not None:
        watch_master(master)
    set_threads(threads)
    try:
        f = build_model(factory)
    except BaseException:  # report and stop: the executor fails construction with this text
        events_out.send(("init_error", traceback.format_exc()))
        return
    set_threads(threads)  # torch, if the model imported it
    events_out.send(("ready", os.getpid()))
    queue, cancelled = [], set()
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
