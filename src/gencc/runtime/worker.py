"""Worker-side code of the local backend: build the model once, then serve tasks."""

from __future__ import annotations

import os
import time
import traceback

import numpy as np

from .faults import apply_output_fault

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


def compute(f, x: np.ndarray) -> np.ndarray:
    """Run f on a single coded input (as a batch of one)."""
    return np.asarray(f(x[None]), dtype=np.float64)[0]


def worker_main(conn, factory, worker_id: int, threads: int | None):
    """Process entry point: ("task", batch, slot, x, fault) in; ("result"|"error", ...) out."""
    set_threads(threads)
    try:
        f = build_model(factory)
    except BaseException:  # report and stop: the executor fails construction with this text
        conn.send(("init_error", worker_id, traceback.format_exc()))
        return
    conn.send(("ready", worker_id, os.getpid()))
    queue, cancelled = [], set()
    parent = os.getppid()

    def drain(block_s: float) -> bool:
        """Read pending messages; False once told to stop or orphaned."""
        deadline = time.monotonic() + block_s
        while True:
            left = max(0.0, deadline - time.monotonic())
            if not conn.poll(left):
                return os.getppid() == parent
            msg = conn.recv()
            if msg[0] == "stop":
                return False
            if msg[0] == "cancel":
                cancelled.add(msg[1])
                if len(cancelled) > 4096:  # batch ids only grow: forget the oldest
                    for old in sorted(cancelled)[:2048]:
                        cancelled.discard(old)
                queue[:] = [t for t in queue if t[1] != msg[1]]
            else:
                queue.append(msg)
            deadline = time.monotonic()  # got one: keep draining without blocking

    while drain(0.0 if queue else 0.5):
        if not queue:
            continue
        _, batch, slot, x, fault = queue.pop(0)
        start = time.monotonic()
        # an injected delay is a sleep that a cancellation of this batch interrupts
        stop = False
        while time.monotonic() - start < fault.delay and batch not in cancelled:
            if not drain(min(0.02, fault.delay - (time.monotonic() - start))):
                stop = True
                break
        if stop:
            break
        if batch in cancelled:
            continue
        if fault.kind == "crash":
            os._exit(17)
        if fault.kind == "hang":
            while os.getppid() == parent:
                time.sleep(0.5)
            return
        try:
            if fault.kind == "error":
                raise RuntimeError(f"injected fault in worker {worker_id}")
            y = apply_output_fault(compute(f, x), fault.kind)
            conn.send(("result", worker_id, batch, slot, y, time.monotonic() - start))
        except Exception as exc:  # an erasure for the master, not the end of this worker
            conn.send(("error", worker_id, batch, slot, f"{type(exc).__name__}: {exc}", time.monotonic() - start))
