"""Serving under load: open-loop Poisson arrivals through ``submit_one``.

The logic of ``benchmarks/bench_load.py``. Every scheme sees the same arrival
times (seeded by the load) and the same straggler process
(:class:`~gencc.runtime.faults.WorkerStragglers`: worker n's j-th task gets
the same delay whatever scheme sent it), so ratios within one run compare
schemes, not draws.

Straggler processes (``STRAGGLERS``), with ``base`` the typical task time in
seconds (an injected sleep standing in for a heavier f than the workload's):

- ``none``: ``base`` (+ up to 5% jitter) per task;
- ``slow-nodes``: the same, and 5% of tasks 10x slow;
- ``pareto``: Pareto task times, ``base * (1 + Lomax(3))`` (mean 1.5 ``base``);
- ``cpu-hog``: ``none``'s delays, and a real busy-loop process pinned to the
  core of worker 0 (worker 0 pinned there too) for at most ``hog_seconds``
  (local backend only: Ray's actors are not pinned).

``cpu=True`` (:func:`worker_stragglers`) spends ``base`` as CPU work instead
of a sleep (:attr:`~gencc.runtime.faults.TaskFault.work`): a hog then slows
the worker sharing its core, as it would a real f, and the redundant tasks of
a scheme cost real core time on a machine's few cores. Only ``none`` and
``cpu-hog`` have a CPU form (their straggler is the machine itself).

Every loop is bounded in count (``n_requests``) and time (``run_limit``);
every request ends answered, with an explicit error, or is counted lost.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np

from .. import stragglers as st
from ..runtime import AdaptiveDeadline, CodedExecutor, HedgedExecutor, WorkerStragglers

__all__ = ["STRAGGLERS", "SCHEMES", "arrival_times", "straggler_model", "worker_stragglers", "LoadRun", "run_open_loop",
           "measure_capacity", "make_executor", "summarize", "latency_quantile", "error_kind", "CpuHog"]

STRAGGLERS = ("none", "slow-nodes", "pareto", "cpu-hog")
SCHEMES = ("uncoded", "replication", "hedged", "gcc-sys", "gcc-sys-direct", "gcc-sys-any", "gcc-sys-direct-any", "gcc",
           "gcc-cal", "bacc", "letcc", "parm")

# The coded schemes' gather: decode at the adaptive deadline with whatever arrived (at least the trusted
# floor): deadline = clip(1.0 * p90 of the last 512 task latencies, 0.5 base, 10 base) (see make_executor).
# 1.0 had the lowest median p99.9 of the grid {0.75, 1, 1.25} among the settings that keep 96% agreement
# with f, over 4 seeds of 2000 requests (gcc-sys-direct-any, 1.25x workers, 50% load: 122 ms against 129
# at 1.25 with pull placement, 124 against 134 pinned; 0.75: 112 ms, but 14% of answers decoded from K - 1
# returns and 88% agreement; results/bench_load_serving). HEDGE_Q: HedgedExecutor's default, a backup after
# the p95 (Dean and Barroso); the benchmark also runs 0.8, which had the shorter tail there at 2 and 3
# copies, and compares with hedging's best setting.
DEADLINE_Q, DEADLINE_FACTOR = 0.9, 1.0
HEDGE_Q = 0.95


def arrival_times(rate: float, n: int, seed: int) -> np.ndarray:
    """Poisson arrivals: ``n`` times (seconds from 0) with mean gap ``1 / rate``."""
    rng = np.random.default_rng([seed, 7])
    return np.cumsum(rng.exponential(1.0 / rate, size=n))


def straggler_model(kind: str, base: float) -> st.LatencyModel:
    """The per-task delay distribution of a straggler process (see the module notes)."""
    if kind in ("none", "cpu-hog"):
        return st.SlowNodes(base=base, fraction=0.0, jitter=0.05)
    if kind == "slow-nodes":
        return st.SlowNodes(base=base, fraction=0.05, slowdown=10.0, jitter=0.05)
    if kind == "pareto":
        return st.Pareto(scale=base, shape=3.0)
    if kind.startswith("trace:"):  # a recorded trace, replayed as it was (base is not used)
        return st.TraceStragglers.load(kind[len("trace:"):])
    raise ValueError(f"stragglers must be one of {STRAGGLERS} or 'trace:<file>', got {kind!r}")


def worker_stragglers(kind: str, base: float, n_workers: int, seed: int, *, cpu: bool = False) -> WorkerStragglers:
    """The straggler process ``kind`` on ``n_workers`` workers, seeded.

    Parameters
    ----------
    kind : str
        One of ``STRAGGLERS``.
    base : float
        Typical task time, seconds.
    n_workers, seed : int
    cpu : bool
        Spend ``base`` as CPU work (a busy loop on the worker) rather than a
        sleep; only for ``"none"`` and ``"cpu-hog"``.

    Returns
    -------
    WorkerStragglers
    """
    if not cpu:
        return WorkerStragglers(straggler_model(kind, base), n_workers, seed=seed)
    if kind not in ("none", "cpu-hog"):
        raise ValueError(f"stragglers must be 'none' or 'cpu-hog' when the task time is CPU work (cpu=True), "
                         f"got {kind!r}")
    return WorkerStragglers(None, n_workers, seed=seed, work=base)


class CpuHog:
    """A busy-loop process sharing one core with one worker, for at most ``seconds``."""

    def __init__(self, pid: int, seconds: float):
        self.pid, self.seconds, self.proc = pid, seconds, None

    def __enter__(self):
        core = {0}
        try:
            os.sched_setaffinity(self.pid, core)
        except (OSError, AttributeError):
            return self
        code = ("import os, time; os.sched_setaffinity(0, {0}); end = time.monotonic() + %r\n"
                "while time.monotonic() < end: pass" % self.seconds)
        self.proc = subprocess.Popen([sys.executable, "-c", code])
        return self

    def __exit__(self, *exc):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        try:
            os.sched_setaffinity(self.pid, set(range(os.cpu_count() or 1)))
        except (OSError, AttributeError):
            pass


@dataclass
class LoadRun:
    """One scheme at one offered load: per request, when it arrived and ended and how."""

    latencies: np.ndarray  # seconds from the scheduled arrival to the answer (NaN unless answered)
    answered: np.ndarray  # bool
    errors: int
    lost: int
    outputs: np.ndarray  # (n, *out_shape), NaN where not answered
    duration_s: float  # first arrival to last answer
    said_exact: np.ndarray  # bool (n,): the future's info called the answer exact
    said_untrusted: np.ndarray  # bool (n,): ... decoded from fewer than the trusted returns
    error_reasons: dict | None = None  # error_kind -> count


def run_open_loop(ex, X: np.ndarray, times: np.ndarray, *, run_limit: float) -> LoadRun:
    """Submit ``X[i]`` through ``ex.submit_one`` at ``times[i]`` (open loop) and wait for every answer.

    Parameters
    ----------
    ex : CodedExecutor or HedgedExecutor
    X : ndarray, shape (n, *in_shape)
    times : ndarray, shape (n,)
        Arrival times, seconds from the start.
    run_limit : float
        Seconds after the last arrival to wait for answers; a request still
        pending then is counted lost.
    """
    n = len(X)
    done_at = np.full(n, np.nan)  # when each future was completed (its ``completed_at``)
    futs: list[Future | None] = [None] * n
    errors = 0

    start = time.monotonic() + 0.05
    for i in range(n):
        delay = start + times[i] - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        try:
            fut = ex.submit_one(X[i])
        except Exception:  # an explicit error at submission
            errors += 1
            continue
        futs[i] = fut
    end = time.monotonic() + run_limit
    outputs, answered = None, np.zeros(n, dtype=bool)
    said_exact, said_untrusted = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    lost = 0
    reasons: dict = {}
    for i, fut in enumerate(futs):
        if fut is None:
            continue
        try:
            y = fut.result(timeout=max(0.0, end - time.monotonic()))
        except TimeoutError:
            lost += 1
            continue
        except Exception as exc:
            errors += 1
            done_at[i] = fut.completed_at
            why = error_kind(exc)
            reasons[why] = reasons.get(why, 0) + 1
            continue
        y = np.asarray(y, dtype=np.float64)
        if outputs is None:
            outputs = np.full((n, *y.shape), np.nan)
        outputs[i] = y
        answered[i] = True
        done_at[i] = fut.completed_at
        said_exact[i], said_untrusted[i] = fut.info.exact, not fut.info.trusted
    lat = np.where(answered, done_at - (start + times), np.nan)
    last = np.nanmax(done_at) if answered.any() else time.monotonic()
    return LoadRun(lat, answered, errors, lost, outputs if outputs is not None else np.full((n, 0), np.nan),
                   float(last - start), said_exact, said_untrusted, reasons)


def measure_capacity(model, K: int, micro_batch: int, base: float, X, *, backend="local", backend_options=None,
                     batches: int = 40, cpu: bool = False) -> float:
    """Inputs per second that uncoded on K workers serves with full micro-batches and no stragglers
    (``cpu``: each task's ``base`` spent as CPU work, see :func:`worker_stragglers`)."""
    from ..schemes import Uncoded

    faults = worker_stragglers("none", base, K, 12345, cpu=cpu)
    with CodedExecutor(model, Uncoded(K), backend, micro_batch=micro_batch, faults=faults, max_in_flight=4,
                       backend_options=backend_options) as ex:
        size = K * micro_batch
        rows = np.resize(np.arange(len(X)), size * batches)
        list(ex.map(X[rows[:size * 4]]))  # warm up
        t0 = time.monotonic()
        list(ex.map(X[rows]))
        return size * batches / (time.monotonic() - t0)


def make_executor(name, model, K, N, micro_batch, base, window, faults, *, backend="local", backend_options=None,
                  scheme=None, timeout=30.0, deadline_factor=DEADLINE_FACTOR, hedge_q=HEDGE_Q, hedge_copies=2,
                  placement="pinned"):
    """The executor serving scheme ``name`` on N workers (uncoded: on K).

    ``deadline_factor``: the coded schemes' adaptive deadline is ``deadline_factor`` x the
    p90 of recent task latencies (clipped to [0.5, 10] x ``base``); ``hedge_q``: hedged
    requests send a backup after the ``hedge_q``-quantile of recent latencies, up to
    ``hedge_copies`` copies in all; ``placement``: where tasks go, ``"pinned"`` (queued on their
    worker at once) or ``"pull"`` (held at the master until a worker is idle), for every
    scheme alike."""
    from ..schemes import BACC, GCC, Replication, Uncoded
    from ..workloads.parity import parm_for_workload

    if name not in SCHEMES + ("uncoded-clean",):
        raise ValueError(f"name must be one of {SCHEMES + ('uncoded-clean',)}, got {name!r}")
    opts = dict(micro_batch=micro_batch, batch_window=window, faults=faults, timeout=timeout,
                backend_options=backend_options, max_in_flight=1_000_000, placement=placement)
    if name == "hedged":
        delay = AdaptiveDeadline(q=hedge_q, factor=1.0, floor=0.0, cap=timeout)
        return HedgedExecutor(model, N, backend, micro_batch=micro_batch, batch_window=window, faults=faults,
                              timeout=timeout, backend_options=backend_options, hedge_delay=delay,
                              max_copies=hedge_copies, placement=placement)
    deadline = AdaptiveDeadline(q=DEADLINE_Q, factor=deadline_factor, floor=0.5 * base, cap=10.0 * base)
    if name in ("uncoded", "uncoded-clean"):
        return CodedExecutor(model, Uncoded(K), backend, **opts)
    if name == "replication":
        return CodedExecutor(model, Replication(K, N), backend, **opts)
    if scheme is None:
        if name.startswith("gcc-sys"):  # gcc-sys and its variants (below)
            scheme = GCC(K, N, worker_points="systematic")
        else:
            scheme = {"gcc": lambda: GCC(K, N), "bacc": lambda: BACC(K, N),
                      "parm": lambda: parm_for_workload(model.name, K)}[name]()
    # -any: decode at the deadline from as few as K - 1 returns (GCC's any-subset decode) instead of
    # waiting for the K-th: the late inputs get a less accurate answer, sooner; -direct: send each
    # systematic task as soon as its input's rows are in, not when the batch closes. Past the deadline
    # with fewer than the floor: wait for it (decode as soon as it is reached)
    n_min = max(scheme.min_returns, K - 1) if name.endswith("-any") else None
    return CodedExecutor(model, scheme, backend, deadline=deadline, on_insufficient="wait", n_min=n_min,
                         direct_dispatch="-direct" in name, **opts)


def error_kind(exc: BaseException) -> str:
    """An error's type and message with its numbers (batch, input) as ``#``: errors of one kind count together."""
    return f"{type(exc).__name__}: {re.sub(r'[0-9]+', '#', str(exc))[:120]}"


def latency_quantile(latencies: np.ndarray, answered: np.ndarray, p: float) -> float:
    """The p-th percentile of every request's latency, a failed or lost request counting as infinitely late.

    With every request answered this is ``np.percentile(latencies, p)``; a
    tail quantile over the answered requests alone would hide the requests
    that got no answer, so it is infinite once more than about (100 - p)% of
    them failed. NaN for an empty run.
    """
    lat = np.sort(np.where(answered, latencies, np.inf))
    if lat.size == 0:
        return float("nan")
    h = (lat.size - 1) * p / 100.0
    lo, hi = int(np.floor(h)), int(np.ceil(h))
    if not np.isfinite(lat[hi]):
        return float("inf")
    return float(lat[lo] + (h - lo) * (lat[hi] - lat[lo]))


def summarize(run: LoadRun, truth: np.ndarray, offered: float) -> dict:
    """Throughput, latency quantiles, answer quality and the request count of one run.

    The latency quantiles are over every request, a failed or lost one
    counting as infinitely late (:func:`latency_quantile`); ``max_ms`` is
    over the answered ones."""
    n = len(run.answered)
    lat = run.latencies[run.answered]
    q = lambda p: latency_quantile(run.latencies, run.answered, p)  # noqa: E731
    est = run.outputs.reshape(n, -1) if run.outputs.size else np.full((n, truth.shape[1]), np.nan)
    ok = run.answered
    agrees = est[ok].argmax(1) == truth[ok].argmax(1)
    agree = float(np.mean(agrees)) if ok.any() else float("nan")
    rel = np.abs(est[ok] - truth[ok]).max(axis=1) / np.maximum(np.abs(truth[ok]).max(axis=1), 1e-12)
    exact = float(np.mean(rel < 1e-5)) if ok.any() else float("nan")
    decoded = rel >= 1e-5  # answered, not f's own output: a decode (or a corrupted answer)
    return {"offered_rps": offered, "throughput_rps": float(ok.sum() / max(run.duration_s, 1e-9)),
            "p50_ms": 1e3 * q(50), "p99_ms": 1e3 * q(99), "p999_ms": 1e3 * q(99.9),
            "max_ms": 1e3 * float(lat.max()) if lat.size else float("nan"),
            "agreement": agree, "exact": exact,
            # the quality of the answers that are not exact, on their own: the tail a code cuts is theirs
            "decoded_agreement": float(np.mean(agrees[decoded])) if decoded.any() else float("nan"),
            # what the futures' info said: answers called exact, those of them that are not (must be 0),
            # and answers decoded from fewer than the scheme's trusted returns
            "said_exact": float(np.mean(run.said_exact[ok])) if ok.any() else float("nan"),
            "said_exact_wrong": int(np.sum(run.said_exact[ok] & (rel >= 1e-5))),
            "untrusted": float(np.mean(run.said_untrusted[ok])) if ok.any() else float("nan"),
            "requests": n, "answered": int(ok.sum()), "errors": run.errors,
            "lost": run.lost, "error_reasons": run.error_reasons or {}, "unaccounted": n - int(ok.sum()) - run.errors - run.lost}
