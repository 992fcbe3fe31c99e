"""Straggler, fault and Byzantine injection for experiments, shared by every backend.

The master draws each task's fault from a seeded plan and ships it with the
task, so a run is reproducible and both backends inject the same faults.
Faults of the first kinds (``FAULT_KINDS``) end in erasures; Byzantine ones
(``BYZANTINE_KINDS``, the attacks of :mod:`gencc.byzantine`) in finite,
plausible, wrong outputs that reach the decoder.
"""

from __future__ import annotations

import numbers
import os
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from .._validation import check_probability
from ..byzantine import ATTACKS, OutputScale, make_attack
from ..errors import InjectedError
from ..stragglers import LatencyModel

__all__ = ["Faults", "WorkerStragglers", "TaskFault", "FAULT_KINDS", "BYZANTINE_KINDS", "InjectedError",
           "run_faulty", "apply_output_fault", "burn_cpu"]

FAULT_KINDS = ("crash", "hang", "error", "nan", "wrong_shape")
# Byzantine outputs: the attacks of gencc.byzantine, by the names of gencc.byzantine.ATTACKS
BYZANTINE_KINDS = tuple(ATTACKS)  # sign-flip, scale, random, bias, copy, colluding


@dataclass(frozen=True)
class TaskFault:
    """What to do to one task: sleep ``delay`` seconds first, then ``kind``
    (None: compute normally).

    ``work`` is seconds of CPU time the worker spends (busy, on its own
    thread's clock; see :func:`burn_cpu`) before computing f: a stand-in for
    a heavier f whose time, unlike a sleep's, stretches when the worker's
    core is shared (the load benchmark's CPU hog).

    ``params`` carries what a Byzantine kind needs, drawn by the master
    (see :class:`Faults`): ``"attack"`` (the attack's own parameters),
    ``"output_scale"``, ``"output_range"``, ``"point"`` (the slot's beta),
    ``"seed"`` (this task's) and ``"shared_seed"`` (the batch's, common to
    every colluder); None otherwise."""

    delay: float = 0.0
    kind: str | None = None
    params: dict | None = None
    work: float = 0.0


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
    byzantine : dict of str -> float, optional
        Probability, per task, of each Byzantine output, by kind (names of
        ``BYZANTINE_KINDS``); with the probabilities above they sum to at most 1.
    workers : dict of int -> str, optional
        Fixed faults for given workers on every task: a kind from ``FAULT_KINDS``
        or ``BYZANTINE_KINDS``, or ``"slow"`` (``slow_delay`` extra seconds).
    slow_delay : float
        Delay of a ``"slow"`` worker.
    attack_params : dict of str -> dict, optional
        Parameters of a Byzantine kind's model, by kind: ``{"scale": {"factor":
        -4.0}, "bias": {"multiple": 2.0}, "colluding": {"amplitude": 1.5,
        "frequency": 2.0}}`` (defaults: those of :mod:`gencc.byzantine`).
    output_scale : float or array_like, default 1.0
        The unit of the ``"bias"`` and ``"colluding"`` lies, in f's units: set it
        to the spread (standard deviation) of f's outputs, a number or one per
        output coordinate (shape out_shape). :mod:`gencc.byzantine` reads it
        from the honest outputs of the batch; a real worker sees only its own.
    output_range : (float, float), optional
        Where ``"random"`` draws each output coordinate; default: between the
        least and largest entry of the worker's own honest output.
    points : array_like, shape (N,), optional
        The workers' points beta (``scheme.beta``): needed by ``"colluding"``.
    seed : int

    Notes
    -----
    The Byzantine kinds, as the worker applies them to its honest output y
    (the math of :meth:`gencc.byzantine.ByzantineModel.lie`, with
    ``OutputScale(std=output_scale, low, high=output_range)``):

    * ``"sign-flip"``: ``-y``; ``"scale"``: ``factor * y``;
    * ``"random"``: uniform in ``output_range``, per coordinate;
    * ``"bias"``: ``y + multiple * output_scale``;
    * ``"copy"``: a right answer to another input, as a stale result cache or
      a replayed response gives: the worker returns the honest output of its
      *previous* task (in the same worker process or thread), or zeros (an
      unwritten buffer) on its first task or when the shapes differ;
    * ``"colluding"``: ``y + g(beta_n) * output_scale * d``, the curve of
      :class:`~gencc.byzantine.ColludingSmooth`: its phase and direction d
      come from the batch's shared seed, so every colluder of a batch adds
      the same smooth curve of its point and their values stay mutually
      consistent.

    Every lie is finite, so it reaches the decoder (no erasure).
    """

    latency: LatencyModel | None = None
    latency_scale: float = 1.0
    crash: float = 0.0
    hang: float = 0.0
    error: float = 0.0
    nan: float = 0.0
    wrong_shape: float = 0.0
    byzantine: dict = field(default_factory=dict)
    workers: dict = field(default_factory=dict)
    slow_delay: float = 1.0
    attack_params: dict = field(default_factory=dict)
    output_scale: object = 1.0
    output_range: tuple | None = None
    points: object = None
    seed: int = 0

    def __post_init__(self):
        for kind in FAULT_KINDS:
            check_probability(getattr(self, kind), kind, closed=True)
        if not isinstance(self.byzantine, dict):
            raise TypeError(f"byzantine must be a dict of kind -> probability, got {self.byzantine!r}")
        for kind, prob in self.byzantine.items():
            if kind not in BYZANTINE_KINDS:
                raise ValueError(f"byzantine keys must be among {BYZANTINE_KINDS}, got {kind!r}")
            check_probability(prob, f"byzantine[{kind!r}]", closed=True)
        total = sum(getattr(self, k) for k in FAULT_KINDS) + sum(self.byzantine.values())
        if total > 1 + 1e-12:
            raise ValueError(f"the per-task fault probabilities (crash, hang, error, nan, wrong_shape and "
                             f"byzantine) must sum to at most 1, got {total:g}")
        if not isinstance(self.workers, dict):
            raise TypeError(f"workers must be a dict of worker -> kind, got {self.workers!r}")
        for w, kind in self.workers.items():
            if kind not in (*FAULT_KINDS, *BYZANTINE_KINDS, "slow"):
                raise ValueError(f"workers[{w}] must be one of {(*FAULT_KINDS, *BYZANTINE_KINDS, 'slow')}, "
                                 f"got {kind!r}")
        if not isinstance(self.attack_params, dict):
            raise TypeError(f"attack_params must be a dict of kind -> parameters, got {self.attack_params!r}")
        for kind, params in self.attack_params.items():
            if kind not in BYZANTINE_KINDS:
                raise ValueError(f"attack_params keys must be among {BYZANTINE_KINDS}, got {kind!r}")
            if not isinstance(params, dict):
                raise TypeError(f"attack_params[{kind!r}] must be a dict of parameters, got {params!r}")
            make_attack(kind, 0, **params)  # the attack's own checks, naming the parameter
        scale = np.asarray(self.output_scale, dtype=np.float64) if _numeric(self.output_scale) else None
        if scale is None or scale.size == 0 or not np.all(np.isfinite(scale)) or np.any(scale <= 0):
            raise ValueError(f"output_scale must be a finite number > 0 or an array of them (f's output spread), "
                             f"got {self.output_scale!r}")
        if self.output_range is not None:
            r = self.output_range
            if (not isinstance(r, (tuple, list)) or len(r) != 2 or not all(_numeric(v) for v in r)
                    or not all(np.isfinite(v) for v in r) or not r[0] < r[1]):
                raise ValueError(f"output_range must be a pair (low, high) of finite numbers with low < high, "
                                 f"got {r!r}")
        used = {k for k, p in self.byzantine.items() if p > 0} | set(self.workers.values())
        if self.points is not None:
            pts = np.asarray(self.points, dtype=np.float64)
            if pts.ndim != 1 or not np.all(np.isfinite(pts)):
                raise ValueError(f"points must be a 1-D array of finite numbers (scheme.beta), got {self.points!r}")
        elif "colluding" in used:
            raise ValueError("the colluding attack needs points=scheme.beta (each colluder adds the same curve "
                             "of its point)")

    def plan(self, batch_index: int, n_workers: int) -> list[TaskFault]:
        """Faults of the N tasks of one batch (deterministic in seed and batch)."""
        rng = np.random.default_rng([self.seed, batch_index])
        delays = np.zeros(n_workers)
        if self.latency is not None:
            delays = self.latency_scale * np.asarray(self.latency.sample(n_workers, rng), dtype=np.float64)
        kinds = (*FAULT_KINDS, *BYZANTINE_KINDS)
        probs = np.array([getattr(self, k) for k in FAULT_KINDS] + [self.byzantine.get(k, 0.0) for k in BYZANTINE_KINDS])
        u = rng.random(n_workers)
        cum = np.cumsum(probs)
        picked = []
        for n in range(n_workers):
            pick = int(np.searchsorted(cum, u[n], side="right"))
            kind = kinds[pick] if pick < len(kinds) else None
            delay = float(delays[n])
            fixed = self.workers.get(n)
            if fixed == "slow":
                delay += self.slow_delay
            elif fixed is not None:
                kind = fixed
            picked.append((delay, kind))
        byz = [kind in BYZANTINE_KINDS for _, kind in picked]
        if not any(byz):
            return [TaskFault(delay, kind) for delay, kind in picked]
        # drawn after the kinds, so a plan without Byzantine faults is the one it always was
        seeds = rng.integers(2**63, size=n_workers)
        shared = int(rng.integers(2**63))
        if "colluding" in {kind for _, kind in picked} and len(self.points) != n_workers:
            raise ValueError(f"points must hold one point per worker ({n_workers}), got {len(self.points)}")
        return [TaskFault(delay, kind, self._params(kind, n, int(seeds[n]), shared) if bad else None)
                for n, ((delay, kind), bad) in enumerate(zip(picked, byz))]

    def _params(self, kind, n, seed, shared) -> dict:
        """What the worker needs to lie as ``kind`` on slot n."""
        scale = np.asarray(self.output_scale, dtype=np.float64)
        return {"attack": dict(self.attack_params.get(kind, {})),
                "output_scale": float(scale) if scale.ndim == 0 else scale.tolist(),
                "output_range": None if self.output_range is None else tuple(map(float, self.output_range)),
                "point": None if self.points is None else float(np.asarray(self.points, dtype=np.float64)[n]),
                "seed": seed, "shared_seed": shared}


class WorkerStragglers:
    """A straggler process per worker: the j-th task worker n runs is delayed by
    a draw seeded by (seed, n, j), whatever scheme sent it.

    Every scheme run with the same object settings (a fresh one per run) on
    the same number of workers sees the same delays on each worker's task
    sequence: the load benchmark's common straggler process.

    Parameters
    ----------
    latency : LatencyModel or None
        Delay of one task, seconds (e.g. ``SlowNodes(base, fraction=0.05, slowdown=10)``, or a
        recorded trace, :class:`gencc.stragglers.TraceStragglers`, replayed per worker in task
        order); None: no delay.
    n_workers : int
    seed : int
    work : float
        Seconds of CPU time every task spends before f (:attr:`TaskFault.work`).
    """

    def __init__(self, latency: LatencyModel | None, n_workers: int, seed: int = 0, work: float = 0.0):
        if not (isinstance(work, numbers.Real) and np.isfinite(work) and work >= 0):
            raise ValueError(f"work must be a finite number of seconds >= 0, got {work!r}")
        self.latency, self.n_workers, self.seed, self.work = latency, int(n_workers), int(seed), float(work)
        self._count = [0] * self.n_workers
        self._lock = threading.Lock()

    def task_fault(self, worker: int) -> TaskFault:
        """The next task of ``worker``: its delay and CPU work."""
        with self._lock:
            j = self._count[worker]
            self._count[worker] += 1
        if self.latency is None:
            return TaskFault(0.0, work=self.work)
        if hasattr(self.latency, "task_latency"):  # a recorded trace: replayed per worker, in order
            return TaskFault(self.latency.task_latency(worker, j, self.seed), work=self.work)
        rng = np.random.default_rng([self.seed, worker, j])
        return TaskFault(float(self.latency.sample(1, rng)[0]), work=self.work)

    def plan(self, batch_index: int, n_workers: int) -> list[TaskFault]:
        """The N tasks of a coded batch, slot n on worker n (the :class:`Faults` interface)."""
        return [self.task_fault(n) for n in range(n_workers)]

    def __repr__(self):
        work = f", work={self.work:g}" if self.work else ""
        return f"WorkerStragglers({self.latency!r}, n_workers={self.n_workers}, seed={self.seed}{work})"


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
        f's output, corrupted for ``"nan"``, ``"wrong_shape"`` and the
        Byzantine kinds.

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
    if fault.work:
        burn_cpu(fault.work)
    y = compute()
    if fault.kind == "copy":
        return _replay(y)
    _LAST.output = y
    return apply_output_fault(y, fault.kind, fault.params)


_BURN = np.full((48, 48), 1.0 / 48)


def burn_cpu(seconds: float) -> int:
    """Keep this thread busy until its CPU clock has advanced ``seconds``.

    The work is small matrix products, which release the GIL (as a torch
    model's kernels do), so threads-backend workers burn in parallel. Time
    the thread waits for a core does not count: on a shared core the burn
    takes longer in wall time, as a real computation would.

    Returns
    -------
    int
        The number of products computed.
    """
    end = time.thread_time() + seconds
    a, n = _BURN, 0
    while time.thread_time() < end:
        a = a @ _BURN
        n += 1
    return n


# The honest output of the last task this worker (process or thread) computed:
# what a "copy" (stale) worker answers with.
_LAST = threading.local()


def _replay(y):
    prev = getattr(_LAST, "output", None)
    _LAST.output = y
    if prev is None or np.shape(prev) != np.shape(y):
        return np.zeros(np.shape(y))
    return np.array(prev, dtype=np.float64, copy=True)


def _numeric(v) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, numbers.Real):
        return True
    try:
        return np.asarray(v).dtype.kind in "iuf"
    except (TypeError, ValueError):
        return False


def apply_output_fault(y: np.ndarray, kind: str | None, params: dict | None = None) -> np.ndarray:
    """Corrupt a computed output as the fault says (nan, wrong_shape, a Byzantine
    kind other than ``"copy"``, which :func:`run_faulty` answers from the
    worker's previous task). ``params``: the :class:`TaskFault`'s."""
    if kind in BYZANTINE_KINDS and kind != "copy":
        return _lie(y, kind, params or {})
    if kind == "nan":
        y = np.array(y, dtype=np.float64, copy=True)
        y.reshape(-1)[0] = np.nan
        return y
    if kind == "wrong_shape":
        return np.asarray(y).reshape(-1)[:-1] if np.asarray(y).size > 1 else np.zeros(2)
    return y


def _lie(y, kind, params) -> np.ndarray:
    """A Byzantine worker's answer: :meth:`gencc.byzantine.ByzantineModel.lie` on its
    own output as one row, scaled by the plan's ``output_scale`` and ``output_range``."""
    y = np.asarray(y, dtype=np.float64)
    row = y.reshape(1, -1)
    try:
        std = np.broadcast_to(np.asarray(params.get("output_scale", 1.0), dtype=np.float64), y.shape).reshape(-1)
    except ValueError:
        raise ValueError(f"output_scale of shape {np.shape(params.get('output_scale'))} does not fit the "
                         f"output shape {y.shape}") from None
    low, high = params.get("output_range") or ((row.min(), row.max()) if row.size else (0.0, 0.0))
    scale = OutputScale(std, np.full(row.shape[1], float(low)), np.full(row.shape[1], float(high)))
    model = make_attack(kind, 0, **params.get("attack", {}))
    point = params.get("point")
    # colluders draw the curve's phase and direction from the batch's shared seed: the same curve for all
    rng = np.random.default_rng(params.get("shared_seed" if kind == "colluding" else "seed", 0))
    out = model.lie(row, scale, None if point is None else np.array([point]), rng)
    return out.reshape(y.shape)
