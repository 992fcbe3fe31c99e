"""Straggler and fault injection for experiments, shared by every backend.

The master draws each task's fault from a seeded plan and ships it with the
task, so a run is reproducible and both backends inject the same faults.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from .._validation import check_probability
from ..errors import InjectedError
from ..stragglers import LatencyModel

__all__ = ["Faults", "WorkerStragglers", "TaskFault", "FAULT_KINDS", "InjectedError", "run_faulty", "apply_output_fault"]

FAULT_KINDS = ("crash", "hang", "error", "nan", "wrong_shape")


@dataclass(frozen=True)
class TaskFault:
    """What to do to one task: sleep ``delay`` seconds first, then ``kind``
    (None: compute normally)."""

    delay: float = 0.0
    kind: str | None = None


@dataclass
class Faults:
    """Per-task fault plan.

    Parameters
    ----------
    latency : LatencyModel, optional
        Injected delay per task, in seconds (e.g. ``ShiftedExponential(0.0, 20.0)``).
    latency_scale : float
        Multiplies every sampled latency (handy to turn a model in "units" into seconds).
    crash, hang, error, nan, wrong_shape : float
        Probability, per task, that the worker crashes (its process dies), hangs
        (never answers), raises, returns NaN, or returns the wrong shape.
    workers : dict of int -> str, optional
        Fixed faults for given workers on every task: a kind from ``FAULT_KINDS``
        or ``"slow"`` (``slow_delay`` extra seconds).
    slow_delay : float
        Delay of a ``"slow"`` worker.
    seed : int
    """

    latency: LatencyModel | None = None
    latency_scale: float = 1.0
    crash: float = 0.0
    hang: float = 0.0
    error: float = 0.0
    nan: float = 0.0
    wrong_shape: float = 0.0
    workers: dict = field(default_factory=dict)
    slow_delay: float = 1.0
    seed: int = 0

    def __post_init__(self):
        for kind in FAULT_KINDS:
            check_probability(getattr(self, kind), kind, closed=True)
        for w, kind in self.workers.items():
            if kind not in (*FAULT_KINDS, "slow"):
                raise ValueError(f"workers[{w}] must be one of {(*FAULT_KINDS, 'slow')}, got {kind!r}")

    def plan(self, batch_index: int, n_workers: int) -> list[TaskFault]:
        """Faults of the N tasks of one batch (deterministic in seed and batch)."""
        rng = np.random.default_rng([self.seed, batch_index])
        delays = np.zeros(n_workers)
        if self.latency is not None:
            delays = self.latency_scale * np.asarray(self.latency.sample(n_workers, rng), dtype=np.float64)
        probs = np.array([getattr(self, k) for k in FAULT_KINDS])
        u = rng.random(n_workers)
        cum = np.cumsum(probs)
        out = []
        for n in range(n_workers):
            pick = int(np.searchsorted(cum, u[n], side="right"))
            kind = FAULT_KINDS[pick] if pick < len(FAULT_KINDS) else None
            delay = float(delays[n])
            fixed = self.workers.get(n)
            if fixed == "slow":
                delay += self.slow_delay
            elif fixed is not None:
                kind = fixed
            out.append(TaskFault(delay, kind))
        return out


class WorkerStragglers:
    """A straggler process per worker: the j-th task worker n runs is delayed by
    a draw seeded by (seed, n, j), whatever scheme sent it.

    Every scheme run with the same object settings (a fresh one per run) on
    the same number of workers sees the same delays on each worker's task
    sequence: the load benchmark's common straggler process.

    Parameters
    ----------
    latency : LatencyModel
        Delay of one task, seconds (e.g. ``SlowNodes(base, fraction=0.05, slowdown=10)``).
    n_workers : int
    seed : int
    """

    def __init__(self, latency: LatencyModel, n_workers: int, seed: int = 0):
        self.latency, self.n_workers, self.seed = latency, int(n_workers), int(seed)
        self._count = [0] * self.n_workers
        self._lock = threading.Lock()

    def task_fault(self, worker: int) -> TaskFault:
        """The next task of ``worker``: its delay."""
        with self._lock:
            j = self._count[worker]
            self._count[worker] += 1
        rng = np.random.default_rng([self.seed, worker, j])
        return TaskFault(float(self.latency.sample(1, rng)[0]))

    def plan(self, batch_index: int, n_workers: int) -> list[TaskFault]:
        """The N tasks of a coded batch, slot n on worker n (the :class:`Faults` interface)."""
        return [self.task_fault(n) for n in range(n_workers)]

    def __repr__(self):
        return f"WorkerStragglers({self.latency!r}, n_workers={self.n_workers}, seed={self.seed})"


CRASH_EXIT_CODE = 17


def run_faulty(compute, fault: TaskFault, *, orphaned=lambda: False, exit=os._exit):
    """Compute one task as an injected fault says (after its delay): the one
    routine both backends' workers run.

    Parameters
    ----------
    compute : callable
        ``compute()`` returns f of the task's coded input.
    fault : TaskFault
    orphaned : callable
        True once the master is gone (or, for a thread, once it was
        abandoned): a hung worker then exits.
    exit : callable
        ``exit(code)`` ends the worker: ``os._exit`` for a process; the
        threads backend passes one that raises, ending only its thread.

    Returns
    -------
    ndarray
        f's output, corrupted for ``"nan"`` and ``"wrong_shape"``.

    Notes
    -----
    ``"crash"`` ends the process at once; ``"hang"`` blocks the worker's only
    thread, so, like a real hang (or SIGSTOP), it stops reading its tasks and
    answers nothing until the master kills it; ``"error"`` raises
    :class:`InjectedError`.
    """
    if fault.kind == "crash":
        exit(CRASH_EXIT_CODE)
    if fault.kind == "hang":
        while not orphaned():
            time.sleep(0.05)
        exit(0)
    if fault.kind == "error":
        raise InjectedError("injected error")
    return apply_output_fault(compute(), fault.kind)


def apply_output_fault(y: np.ndarray, kind: str | None) -> np.ndarray:
    """Corrupt a computed output as the fault says (nan, wrong_shape)."""
    if kind == "nan":
        y = np.array(y, dtype=np.float64, copy=True)
        y.reshape(-1)[0] = np.nan
        return y
    if kind == "wrong_shape":
        return np.asarray(y).reshape(-1)[:-1] if np.asarray(y).size > 1 else np.zeros(2)
    return y
