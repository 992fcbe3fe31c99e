"""Self-calibration: score decoder configurations on the ground truth a systematic code gives for free.

A systematic worker k < K computes f(x_k) itself. When it returns, the master
knows input k's exact answer, and can ask every candidate decoder what it
*would* have answered had worker k been missing — under a hole shaped like
the stragglers it actually sees. Summed over batches, that is the error each
configuration makes on the live workload, measured on f itself; the
per-decode selector (``GCC()``, ``criterion="auto"``) sees one batch's returned
outputs only.

:class:`SelfCalibration` holds the candidates and a sliding window of those
measurements; :func:`calibration_tests` (which returned workers to drop) and
:func:`choose` (when to switch) are the policy, pure functions. The class
knows nothing of processes: :class:`gencc.runtime.CodedExecutor` feeds it
decoded batches from a background thread (``self_calibrate=True``).
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque

import numpy as np

from .._validation import check_choice, check_int
from .base import CodingScheme

__all__ = ["SelfCalibration", "SELF_CALIBRATION_CONFIGS", "calibration_tests", "choose"]

# Fixed decoders scored beside the scheme as configured: (kernel, scale, lam_dec). A spread of the
# calibration grid's kernels at an interpolating and a smoothing ridge: 13 decodes per test.
SELF_CALIBRATION_CONFIGS = (
    [("sobolev2", 1.0, lam) for lam in (0.0, 1e-5, 1e-3)]
    + [(k, sc, 0.0) for k in ("matern32", "matern52") for sc in (0.2, 0.5, 1.0, 2.0)]
    + [("matern12", 0.5, 0.0), ("matern12", 2.0, 0.0)]
)
# Errors below this MSE relative to the outputs' mean square count as exact (as in the selector
# bench): log-ratios of round-off say nothing of a decoder.
_EXACT_NMSE = 1e-12


def calibration_tests(returned, history, ranks, n_inputs: int, n_keep: int, rng, n_tests: int = 2,
                      placement: str = "near") -> list:
    """Which returned workers to drop to test the decoders on a known answer.

    Parameters
    ----------
    returned : sequence of int
        Workers whose outputs arrived (any order).
    history : sequence of sequence of int
        Recent straggler sets (the workers missing from recent batches); the
        tests copy their shapes. Empty: each test drops one systematic worker.
    ranks : ndarray, shape (N,)
        Each worker's rank in the order of its point beta_n: a shape is
        shifted along the points, not along worker ids.
    n_inputs : int
        K; workers 0..K-1 are systematic.
    n_keep : int
        Fewest returns a test may decode from (the scheme's trusted number).
    rng : numpy.random.Generator
    n_tests : int
    placement : {"near", "anywhere"}, default "near"
        ``"near"``: the shape is shifted by 1 to its own span, so that the
        copy overlaps or abuts the place where those stragglers were (their
        union is a hole of about the size the decoder meets); where no such
        shift covers a returned systematic worker, or without history, it is
        placed ``"anywhere"``: one of its points onto a random returned
        systematic worker.

    Returns
    -------
    list of (kept, targets)
        ``kept``: sorted int64 array of the returned workers the test decodes
        from; ``targets``: the systematic workers it dropped, whose outputs are
        the exact answers f(x_k) its decode is scored against. Empty when no
        systematic worker returned or the returns leave no room.
    """
    F = np.unique(np.asarray(returned, dtype=np.int64))
    room = F.size - n_keep
    sys_returned = F[F < n_inputs]
    if room < 1 or sys_returned.size == 0:
        return []
    N = ranks.size
    by_rank = np.argsort(ranks)
    in_F = np.zeros(N, dtype=bool)
    in_F[F] = True
    tests = []
    for _ in range(n_tests):
        shape = [] if not len(history) else list(history[int(rng.integers(len(history)))])
        target, moved = None, None
        if shape and placement == "near":
            shape_ranks = np.sort(ranks[np.asarray(shape, dtype=np.int64)])
            span = int(shape_ranks[-1] - shape_ranks[0]) + 1
            for _ in range(8):  # a shift that overlaps or abuts the shape's own place and covers a target
                s = int(rng.integers(1, span + 1)) * (1 if rng.random() < 0.5 else -1)
                cand = shape_ranks + s
                cand = cand[(cand >= 0) & (cand < N)]
                hit = by_rank[cand]
                hit = hit[in_F[hit] & (hit < n_inputs)]
                if hit.size:
                    target, moved = int(rng.choice(hit)), cand
                    break
        if target is None:  # anywhere: one of the shape's points onto a random returned systematic worker
            target = int(rng.choice(sys_returned))
            shape_ranks = (np.sort(ranks[np.asarray(shape, dtype=np.int64)]) if shape
                           else np.array([ranks[target]]))
            anchor = int(shape_ranks[int(rng.integers(shape_ranks.size))])
            moved = shape_ranks + (int(ranks[target]) - anchor)
            moved = moved[(moved >= 0) & (moved < N)]
        dropped = by_rank[moved]
        dropped = dropped[in_F[dropped]]
        if dropped.size > room:  # keep the part of the shape nearest the target
            order = np.argsort(np.abs(ranks[dropped] - ranks[target]), kind="stable")
            dropped = dropped[order[:room]]
        keep = np.ones(N, dtype=bool)
        keep[dropped] = False
        kept = F[keep[F]]
        targets = np.sort(dropped[dropped < n_inputs])
        tests.append((kept, targets))
    return tests


def choose(scores: np.ndarray, current: int, *, margin: float = 1.1, z: float = 2.0,
           min_trials: int = 8, average: str = "geometric") -> int:
    """The configuration to decode with, given paired log-errors.

    Parameters
    ----------
    scores : ndarray, shape (n_trials, n_configs)
        ``scores[t, c]``: log of configuration c's MSE on test t (the same
        test, so the comparison is paired).
    current : int
        The configuration in use.
    margin : float
        Switch only to one whose geometric-mean MSE is below the current's
        divided by ``margin``...
    z : float
        ...and whose paired mean log-ratio is below 0 by ``z`` standard errors.
    min_trials : int
    average : {"geometric", "arithmetic"}
        Compare mean log-MSEs (``margin`` and ``z`` apply to the paired
        log-ratios), or mean MSEs (to the paired differences of MSE divided
        by the current's mean: a candidate must cut the mean MSE by a share
        ``1 - 1/margin``).

    Returns
    -------
    int
        ``current`` unless another configuration is better with confidence.
    """
    n = scores.shape[0]
    if n < max(min_trials, 2):
        return current
    if average == "geometric":
        d, threshold = scores - scores[:, [current]], -math.log(margin)
    else:
        E = np.exp(np.minimum(scores, 700.0))
        d, threshold = (E - E[:, [current]]) / max(float(E[:, current].mean()), 1e-300), 1 / margin - 1
    mean = d.mean(axis=0)
    se = d.std(axis=0, ddof=1) / math.sqrt(n)
    best = int(np.argmin(mean))
    if best != current and mean[best] < threshold and mean[best] + z * se[best] < 0:
        return best
    return current


class SelfCalibration:
    """Choose a systematic scheme's decoder by its measured error on live traffic.

    Parameters
    ----------
    scheme : CodingScheme
        A systematic scheme (``worker_points="systematic"``) whose decoder
        parameters ``kernel``, ``scale`` and ``lam_dec`` can vary (GCC, LeTCC).
        It is the first candidate and the starting choice.
    configs : sequence of (kernel, scale, lam_dec) or dict, optional
        Further decoders scored beside it (they share its encoder). Default
        ``SELF_CALIBRATION_CONFIGS``: 12 fixed decoders.
    window : int, default 128
        Tests remembered (64 batches at two tests a batch): older ones are
        forgotten, so the choice follows a workload that drifts.
    min_trials : int, default 12
    margin : float, default 1.1
    z : float, default 2.0
        The switching rule of :func:`choose`: a candidate must be 1.1x
        better in geometric mean and 2 standard errors below the current
        decoder. Chosen with the window on 40 streams drawn with seed 77123
        (48 batches each, scored on the second half) among window 64/128,
        z 2/3, margin 1.1/1.25: over never switching, p90 1.02x and max 1.41x
        (window 64 reached 2.4x); over the best candidate in hindsight, p90
        2.1x where never switching gives 3.1x. The stricter z 3, margin 1.25
        harmed less (max 1.37x) but, on a drifting stream, stayed 7x above
        the best fixed decoder where this rule reached 1.07x.
    tests_per_batch : int, default 2
    placement : {"near", "anywhere"}, default "near"
        Where a test puts the copy of a straggler shape (:func:`calibration_tests`).
    seed : int, default 0

    Attributes
    ----------
    candidates : list of CodingScheme
    current : int
        Index of the configuration in use.
    decoder : CodingScheme
        ``candidates[current]``.

    Notes
    -----
    A test (see :func:`calibration_tests`) takes a batch's returned set F,
    moves the shape of a recently observed straggler set onto a returned
    systematic worker k, drops the returned workers it covers, and decodes
    from the rest with every candidate; each candidate's score is the log of
    its MSE at the dropped systematic workers, relative to the batch's mean
    square output (floored at 1e-12, where round-off begins). The decode
    being scored is the one the master makes for a missing systematic worker,
    under a hole of the shape it sees, on the inputs it serves; it has one
    more hole (the observed one stays missing), so the errors are somewhat
    pessimistic for all candidates alike. :func:`choose` switches when a
    candidate's paired mean log-ratio against the current choice is below
    ``-log(margin)`` and ``z`` standard errors below 0 over the window.

    Known limits: the ground truth is only at systematic workers, so a
    non-systematic code cannot be self-calibrated (f(x_k) is never
    observed); a batch with fewer than ``trusted + 1`` returns gives no test;
    a straggler shape never seen is never tested. Measured on streams drawn
    fresh from a seed (``gencc bench selfcal``; figures in
    ``docs/guide/self-calibration.md``), it gains most where the default
    selection is far from the best fixed decoder and can lose where a K of
    2-4 leaves few systematic workers to test on.

    Examples
    --------
    >>> import numpy as np
    >>> from gencc import GCC, SelfCalibration
    >>> scheme = GCC(4, 10, worker_points="systematic")
    >>> cal = SelfCalibration(scheme)
    >>> X = np.random.default_rng(0).uniform(-1, 1, size=(4, 2))
    >>> Y = np.tanh(scheme.encode(X))  # (N, 2): every worker's output
    >>> returned = [0, 1, 2, 5, 6, 7, 8, 9]  # workers 3 and 4 straggled
    >>> cal.observe(Y[returned][:, None, :], returned)  # a batch of B = 1: tests made
    2
    >>> cal.decoder is scheme  # too few tests to switch yet
    True
    """

    def __init__(self, scheme: CodingScheme, configs=None, *, window: int = 128, min_trials: int = 12,
                 margin: float = 1.1, z: float = 2.0, tests_per_batch: int = 2, placement: str = "near",
                 average: str = "geometric", seed: int = 0):
        if not isinstance(scheme, CodingScheme):
            raise TypeError(f"scheme must be a gencc CodingScheme, got {type(scheme).__name__}")
        if not scheme.systematic:
            raise ValueError("self-calibration needs a systematic scheme (worker_points='systematic'): "
                             "only a systematic worker's output is an input's exact answer f(x_k)")
        params = scheme.get_params()
        if not {"kernel", "scale", "lam_dec"} <= set(params):
            raise ValueError(f"self-calibration varies kernel, scale and lam_dec; {type(scheme).__name__} "
                             "has no such decoder parameters")
        if not (isinstance(margin, (int, float)) and margin >= 1):
            raise ValueError(f"margin must be a number >= 1, got {margin!r}")
        if not (isinstance(z, (int, float)) and z >= 0):
            raise ValueError(f"z must be a number >= 0, got {z!r}")
        self.candidates = [scheme]
        self.labels = ["as configured: " + _label(params)]
        for entry in SELF_CALIBRATION_CONFIGS if configs is None else configs:
            cfg = dict(entry) if isinstance(entry, dict) else dict(zip(("kernel", "scale", "lam_dec"), entry))
            unknown = set(cfg) - {"kernel", "scale", "lam_dec"}
            if unknown:
                raise ValueError(f"configs may set only kernel, scale and lam_dec, got {sorted(unknown)}")
            self.candidates.append(scheme.with_params(**cfg))
            self.labels.append(_label({**params, **cfg}))
        self.window = check_int(window, "window", minimum=2)
        self.min_trials = check_int(min_trials, "min_trials", minimum=2)
        self.tests_per_batch = check_int(tests_per_batch, "tests_per_batch", minimum=1)
        self.margin, self.z = float(margin), float(z)
        self.placement = check_choice(placement, "placement", ("near", "anywhere"))
        self.average = check_choice(average, "average", ("geometric", "arithmetic"))
        self.current = 0
        self.switches = []  # (batches observed, tests seen, from, to, geometric-mean MSE ratio)
        self.batches_observed = 0
        self.tests_seen = 0
        self.busy_seconds = 0.0
        self._scores = deque(maxlen=self.window)
        self._history = deque(maxlen=32)
        self._rng = np.random.default_rng(seed)
        self._ranks = np.argsort(np.argsort(scheme.beta))
        self._lock = threading.Lock()

    @property
    def decoder(self) -> CodingScheme:
        return self.candidates[self.current]

    def observe(self, Y, returned) -> int:
        """Score every candidate on one decoded batch; returns the tests it made.

        Parameters
        ----------
        Y : array_like, shape (len(returned), B, *out_shape)
            The returned workers' outputs for a batch of B micro-batched
            inputs (one column, chosen at random, is tested).
        returned : sequence of int
        """
        t0 = time.thread_time()
        scheme = self.candidates[0]
        returned = np.asarray(returned, dtype=np.int64)
        Y = np.asarray(Y, dtype=np.float64)
        if Y.ndim < 2 or Y.shape[0] != returned.size:
            raise ValueError(f"Y must have shape (len(returned), B, *out_shape), got {Y.shape} "
                             f"for {returned.size} returned workers")
        col = Y[:, int(self._rng.integers(Y.shape[1]))].reshape(returned.size, -1)  # (|F|, m)
        row = {int(s): i for i, s in enumerate(returned)}
        missing = sorted(set(range(scheme.n_workers)) - set(row))
        if missing:  # the batch's own stragglers are the likeliest shape of the next ones
            self._history.append(missing)
        tests = calibration_tests(returned, list(self._history), self._ranks, scheme.n_inputs,
                                  scheme.trusted_returns, self._rng, self.tests_per_batch, self.placement)
        scale = max(float(np.mean(col ** 2)), np.finfo(float).tiny)
        made = 0
        for kept, targets in tests:
            Yk = col[[row[int(s)] for s in kept]]
            truth = col[[row[int(t)] for t in targets]]
            scores = np.empty(len(self.candidates))
            for c, cand in enumerate(self.candidates):
                try:
                    est = cand.decode(Yk, kept)[targets]
                    mse = float(np.mean((est - truth) ** 2)) / scale
                except (ValueError, np.linalg.LinAlgError):
                    mse = np.inf
                if not mse <= 1e300:  # a candidate that cannot decode (inf, NaN) never wins
                    mse = 1e300
                scores[c] = math.log(max(mse, _EXACT_NMSE))
            made += 1
            with self._lock:
                self._scores.append(scores)
        with self._lock:
            self.batches_observed += 1
            self.tests_seen += made
            if made:
                S = np.array(self._scores)
                new = choose(S, self.current, margin=self.margin, z=self.z, min_trials=self.min_trials,
                             average=self.average)
                if new != self.current:
                    ratio = float(np.exp(np.mean(S[:, new] - S[:, self.current])))
                    self.switches.append({"batches": self.batches_observed, "tests": self.tests_seen,
                                          "from": self.labels[self.current], "to": self.labels[new],
                                          "mse_ratio": ratio})
                    self.current = new
            self.busy_seconds += time.thread_time() - t0
        return made

    def report(self) -> dict:
        """What was measured and chosen.

        Returns
        -------
        dict
            ``current`` (label of the decoder in use), ``batches_observed``,
            ``tests`` (in the window / seen in all), ``busy_seconds`` (CPU
            time spent scoring), ``switches`` and ``candidates``: per
            configuration its label, its geometric-mean MSE over the current
            choice's on the window's tests (paired) and that ratio's
            two-standard-error interval, best first.
        """
        with self._lock:
            S = np.array(self._scores)
            out = {"current": self.labels[self.current], "batches_observed": self.batches_observed,
                   "tests_in_window": int(S.shape[0]), "tests_seen": self.tests_seen,
                   "busy_seconds": self.busy_seconds, "switches": list(self.switches)}
            rows = []
            for c, label in enumerate(self.labels):
                if S.shape[0]:
                    d = S[:, c] - S[:, self.current]
                    se = float(d.std(ddof=1) / math.sqrt(d.size)) if d.size > 1 else math.inf
                    m = float(d.mean())
                    rows.append({"decoder": label, "in_use": c == self.current, "mse_ratio": math.exp(m),
                                 "low": math.exp(m - 2 * se), "high": math.exp(min(m + 2 * se, 700.0))})
                else:
                    rows.append({"decoder": label, "in_use": c == self.current, "mse_ratio": math.nan,
                                 "low": math.nan, "high": math.nan})
            out["candidates"] = sorted(rows, key=lambda r: (math.isnan(r["mse_ratio"]), r["mse_ratio"]))
        return out


def _label(p: dict) -> str:
    kernel = p["kernel"] if isinstance(p["kernel"], str) else type(p["kernel"]).__name__
    if kernel == "auto":
        return f"auto ({p.get('criterion', 'gap')})"
    lam = p["lam_dec"]
    return f"{kernel}@{p['scale']:g}, lam {lam if isinstance(lam, str) else format(lam, 'g')}"
