"""Chaos soak: a stream of inputs through ``map`` under every fault at once, and an account of each input.

Faults come from inside (the seeded :class:`~gencc.runtime.Faults` plan: crash,
hang, error, NaN, wrong shape), from outside (SIGKILL and SIGSTOP sent to
random worker processes while the stream runs) and from the caller (a bad
input now and then). The soak counts inputs in, answers out and explicit
errors, so that any lost input shows, and checks that nothing outlives the
executor.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field

import numpy as np

from ..errors import InvalidInputError, MissingOutputsError
from ..runtime import CodedExecutor, Faults

__all__ = ["ChaosReport", "chaos_soak", "process_alive"]


@dataclass
class ChaosReport:
    """What happened to every input of a soak.

    Attributes
    ----------
    inputs, answers, errors : int
        Inputs given to ``map``; plain answers; explicit errors (by type in
        ``error_types``). ``lost = inputs - answers - errors`` must be 0.
    bad_inputs, bad_inputs_rejected : int
        Inputs the soak spoiled on purpose, and how many of them got an
        :class:`~gencc.errors.InvalidInputError` of their own.
    disagreements : int
        Answers whose argmax (or, for regression, relative error above 10%)
        differs from f's on the same input.
    healthy_disagreement_rate : float
        The same rate for the scheme decoding from ``n_wait`` random returns
        in-process, with no fault: what the code does when all is well.
    same_returns_disagreement_rate : float
        The same again, with returned sets as large as the run's answered
        batches had (``returned_counts``): what the code does from that many
        workers. Above it, the runtime itself would be at fault.
    fewest_returns, trusted_returns : int
        Fewest usable results any answered batch was decoded from, and the
        scheme's documented minimum.
    signals : dict
        Signals sent from outside, by name.
    stats : dict
        The executor's counters (crashes, hangs, erasures, failed batches).
    seconds, bound_s : float
        Wall time of the stream and the bound it had to finish within.
    finished : bool
        The stream ended within ``bound_s``.
    pids_seen, pids_left : int
        Worker processes seen during the run, and those alive after shutdown.
    rss_mb : list of float
        The master's resident memory, sampled along the stream.
    """

    backend: str
    scheme: str
    inputs: int = 0
    answers: int = 0
    errors: int = 0
    lost: int = 0
    error_types: dict = field(default_factory=dict)
    bad_inputs: int = 0
    bad_inputs_rejected: int = 0
    disagreements: int = 0
    disagreement_rate: float = float("nan")
    healthy_disagreement_rate: float = float("nan")
    same_returns_disagreement_rate: float = float("nan")
    returned_counts: dict = field(default_factory=dict)
    fewest_returns: int = 0
    trusted_returns: int = 0
    signals: dict = field(default_factory=dict)
    stats: dict = field(default_factory=dict)
    seconds: float = 0.0
    bound_s: float = 0.0
    finished: bool = False
    pids_seen: int = 0
    pids_left: int = 0
    rss_mb: list = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


def process_alive(pid: int) -> bool:
    """True if ``pid`` runs and is not a zombie."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def _rss_mb() -> float:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError):
        return float("nan")


def _disagrees(y, ref, task) -> bool:
    if task == "classification":
        return int(np.argmax(y)) != int(np.argmax(ref))
    return float(np.linalg.norm(y - ref)) > 0.1 * max(float(np.linalg.norm(ref)), 1e-12)


def _healthy_rate(scheme, f, X, counts, task, rng) -> float:
    """Disagreement of in-process decodes from random returned sets whose sizes
    are drawn from ``counts`` (size -> weight), with no fault at all."""
    K, N = scheme.n_inputs, scheme.n_workers
    sizes = np.array(sorted(counts), dtype=np.int64)
    if sizes.size == 0:
        return float("nan")
    weights = np.array([counts[n] for n in sizes], dtype=np.float64)
    wrong = total = 0
    for start in range(0, X.shape[0] - K + 1, K):
        batch = X[start:start + K]
        returned = np.sort(rng.choice(N, size=int(rng.choice(sizes, p=weights / weights.sum())), replace=False))
        try:
            est, answered = scheme.decode(f(scheme.encode(batch))[returned], returned), range(K)
        except MissingOutputsError as exc:  # replication: inputs with no copy are not answers
            est, answered = exc.partial, [k for k in range(K) if k not in set(exc.missing.tolist())]
        ref = f(batch)
        wrong += sum(_disagrees(est[k], ref[k], task) for k in answered)
        total += len(answered)
    return wrong / max(total, 1)


def _refilled(stream):
    """The inputs of ``stream`` through one reused buffer per shape (a bad input keeps its own)."""
    buffers = {}
    for x in stream:
        buf = buffers.get(x.shape)
        if buf is None:
            buf = buffers[x.shape] = np.empty(x.shape)
        buf[...] = x
        yield buf


def chaos_soak(model, f, scheme, X, *, task="classification", backend="local", n_inputs=10_000, n_wait=None,
               deadline=0.5, timeout=10.0, hang_timeout=1.0, faults=None, signal_every=2.0,
               bad_input_rate=0.002, seed=0, bound_s=None, progress=False, backend_options=None,
               refill=True) -> ChaosReport:
    """Stream ``n_inputs`` inputs through ``CodedExecutor.map`` under every fault and account for each.

    Parameters
    ----------
    model : factory, torch module or "module:attr"
        What the workers build.
    f : callable
        The same function in this process: the reference for disagreements.
    scheme : CodingScheme
    X : ndarray, shape (n, *in_shape)
        Inputs, cycled through to reach ``n_inputs``.
    task : {"classification", "regression"}
        How an answer is compared with f's.
    backend : {"local", "ray"}
    n_wait, deadline, timeout, hang_timeout
        Passed to :class:`~gencc.runtime.CodedExecutor` (``n_wait`` defaults
        to N - N // 4).
    faults : Faults, optional
        Faults from inside; default a mix of every kind (per task: crash 0.2%,
        hang 0.2%, error 0.5%, NaN 0.5%, wrong shape 0.5%) and 5% slow tasks.
    signal_every : float
        Mean seconds between outside signals (SIGKILL or SIGSTOP of a random
        worker, half each); 0 sends none.
    bad_input_rate : float
        Share of inputs replaced by a NaN input or one of another shape.
    seed : int
    bound_s : float, optional
        The stream must finish within this many seconds (default: 60 s plus
        50 ms per input, several times what a healthy run takes on 2 cores);
        past it the report says ``finished=False``.
    progress : bool
    backend_options : dict, optional
    refill : bool
        Feed the stream as a camera or file reader would: one buffer, refilled
        with each input as ``map`` asks for the next (an answer computed on
        another input's data then counts as a disagreement). False: a list
        of separate arrays.

    Returns
    -------
    ChaosReport
    """
    from ..stragglers import SlowNodes

    rng = np.random.default_rng(seed)
    K, N = scheme.n_inputs, scheme.n_workers
    n_wait = N - N // 4 if n_wait is None else n_wait
    X = np.asarray(X, dtype=np.float64)
    idx = np.arange(n_inputs) % X.shape[0]
    bad = rng.random(n_inputs) < bad_input_rate
    stream = []
    for i in range(n_inputs):
        x = X[idx[i]]
        if bad[i]:
            x = x.reshape(-1)[:-1] if rng.random() < 0.5 else np.where(np.arange(x.size) == 0, np.nan,
                                                                        x.reshape(-1)).reshape(x.shape)
        stream.append(x)
    if faults is None:
        faults = Faults(latency=SlowNodes(base=0.002, fraction=0.05, slowdown=20), crash=0.002, hang=0.002,
                        error=0.005, nan=0.005, wrong_shape=0.005, seed=seed)
    bound_s = 60.0 + 0.05 * n_inputs if bound_s is None else bound_s
    report = ChaosReport(backend=backend, scheme=repr(scheme), inputs=n_inputs, bad_inputs=int(bad.sum()),
                         bound_s=bound_s, trusted_returns=scheme.trusted_returns)
    sample = X[: min(X.shape[0], 400 * K)]
    report.healthy_disagreement_rate = _healthy_rate(scheme, f, sample, {n_wait: 1}, task,
                                                     np.random.default_rng(seed))
    refs = f(X)
    seen, signals = set(), Counter()
    stop = threading.Event()

    with CodedExecutor(model, scheme, backend, n_wait=n_wait, deadline=deadline, timeout=timeout,
                       hang_timeout=hang_timeout, faults=faults, backend_options=backend_options) as ex:
        seen.update(p for p in ex.backend.pids if p)

        def saboteur():
            srng = np.random.default_rng([seed, 1])
            while signal_every and not stop.wait(srng.exponential(signal_every)):
                pids = [p for p in ex.backend.pids if p]
                seen.update(pids)
                if not pids:
                    continue
                sig = signal.SIGKILL if srng.random() < 0.5 else signal.SIGSTOP
                try:
                    os.kill(int(srng.choice(pids)), sig)
                    signals[sig.name] += 1
                except ProcessLookupError:
                    pass

        thread = threading.Thread(target=saboteur, name="gencc-chaos", daemon=True)
        thread.start()
        t0 = time.monotonic()
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=n_inputs, desc=f"chaos {backend}", unit="input")
        errors = Counter()
        try:
            for i, y in enumerate(ex.map(_refilled(stream) if refill else stream, return_exceptions=True,
                                         timeout=bound_s)):
                if isinstance(y, BaseException):
                    errors[type(y).__name__] += 1
                    report.bad_inputs_rejected += int(bad[i] and isinstance(y, InvalidInputError))
                else:
                    report.answers += 1
                    report.disagreements += int(_disagrees(y, refs[idx[i]], task))
                if i % max(1, n_inputs // 50) == 0:
                    report.rss_mb.append(round(_rss_mb(), 1))
                    seen.update(p for p in ex.backend.pids if p)
                if bar is not None:
                    bar.update(1)
            report.finished = True
        except TimeoutError:
            report.finished = False
        finally:
            stop.set()
            thread.join(timeout=5)
            if bar is not None:
                bar.close()
        report.seconds = time.monotonic() - t0
        seen.update(p for p in ex.backend.pids if p)
        seen.update(getattr(ex.backend, "pid_history", ()))
        report.stats = dict(ex.stats)
        report.fewest_returns = min(ex.returned_counts) if ex.returned_counts else 0
        report.returned_counts = {int(n): int(c) for n, c in sorted(ex.returned_counts.items())}
    report.same_returns_disagreement_rate = _healthy_rate(scheme, f, sample, report.returned_counts, task,
                                                          np.random.default_rng(seed))
    report.errors = sum(errors.values())
    report.error_types = dict(errors)
    report.lost = report.inputs - report.answers - report.errors
    report.disagreement_rate = report.disagreements / max(report.answers, 1)
    report.signals = dict(signals)
    deadline_t = time.monotonic() + 15
    while any(process_alive(p) for p in seen) and time.monotonic() < deadline_t:
        time.sleep(0.1)
    report.pids_seen = len(seen)
    report.pids_left = sum(process_alive(p) for p in seen)
    return report
