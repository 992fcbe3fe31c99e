"""The accuracy harness: how close are decoded outputs to f(x_k)?"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from ._validation import check_batch, check_int, rng_from
from .errors import InsufficientReturnsError, MissingOutputsError
from .schemes.base import CodingScheme
from .stragglers import StragglerModel

__all__ = ["evaluate", "Evaluation", "Summary", "apply_batch", "apply_workers", "cosine_similarity", "TASKS"]

TASKS = ("regression", "classification", "embedding")
# what an adversary scores per input left with no answer: far above any error
# yet small enough that the scarcity score below still adds to it
_LOST_INPUT = 1e12


@dataclass
class Summary:
    """Mean, standard deviation and confidence interval of one metric."""

    mean: float
    std: float
    ci_low: float
    ci_high: float
    n: int

    @classmethod
    def of(cls, values, confidence: float) -> "Summary | None":
        v = np.asarray(values, dtype=np.float64)
        if v.size == 0:
            return None
        from scipy import stats  # imported here: scipy.stats is slow to import

        mean = float(v.mean())
        std = float(v.std(ddof=1)) if v.size > 1 else 0.0
        half = float(stats.t.ppf(0.5 + confidence / 2, v.size - 1) * std / math.sqrt(v.size)) if v.size > 1 else 0.0
        return cls(mean, std, mean - half, mean + half, int(v.size))


@dataclass
class Evaluation:
    """What :func:`evaluate` measured for one scheme.

    Attributes
    ----------
    scheme : str
        ``repr`` of the scheme.
    metrics : dict of str -> Summary or None
        ``"mse"``, ``"nmse"`` (MSE over the variance of f(x)), ``"rmse"``,
        ``"max_error"``, ``"loo_mse"`` (the decoder's own estimate, where it has
        one), ``"accuracy"`` (argmax agreement with f, missing inputs counted
        wrong) for classifiers and ``"cosine"`` (mean cosine similarity of
        decoded and true outputs, missing inputs counted 0) for embeddings.
        ``None`` when no draw decoded.

        Degraded mode (as ParM reports it): ``"exact_share"``, the fraction
        of the K inputs a draw answered exactly (a returned systematic
        worker, ``Decoded.info["exact"]``; 0 for non-systematic schemes,
        whose every input is decoded); ``"degraded_mse"``, the MSE over the
        inputs of a draw that were decoded rather than answered exactly
        (draws with none are left out), and for classifiers
        ``"degraded_accuracy"``, argmax agreement over those inputs (missing
        ones counted wrong). For a non-systematic scheme ``degraded_mse``
        equals ``mse``.
    samples : dict of str -> ndarray
        The per-draw values behind each metric.
    draws : int
        Straggler draws attempted (rounds x draws per round).
    failures : int
        Draws with too few returns to decode at all.
    missing_rate : float
        Fraction of inputs with no answer (replication/uncoded only).
    returned_mean : float
        Mean number of returned workers per draw.
    """

    scheme: str
    n_inputs: int
    n_workers: int
    stragglers: str
    metrics: dict
    samples: dict = field(repr=False)
    draws: int = 0
    failures: int = 0
    missing_rate: float = 0.0
    returned_mean: float = 0.0

    def to_dict(self) -> dict:
        """JSON-ready dictionary (without the raw samples)."""
        d = asdict(self)
        d.pop("samples")
        return d

    def mean(self, metric: str) -> float:
        """The mean of ``metric``, or NaN when no draw decoded."""
        s = self.metrics.get(metric)
        return float("nan") if s is None else s.mean


def apply_batch(f, X, name: str, n_rows: int) -> np.ndarray:
    """Call vectorised ``f`` on X, check it returned ``n_rows`` finite rows."""
    Y = np.asarray(f(X), dtype=np.float64)
    if Y.ndim < 1 or Y.shape[0] != n_rows:
        raise ValueError(f"f must map ({n_rows}, ...) inputs to ({n_rows}, ...) outputs; {name} gave {Y.shape}")
    if not np.all(np.isfinite(Y)):
        raise ValueError(f"f returned NaN or Inf on the {name}")
    return Y


def apply_workers(f, scheme: CodingScheme, coded) -> np.ndarray:
    """What the N workers return: worker n's function on coded row n.

    Worker n computes ``scheme.worker_function(n, f)`` (f itself except for
    ParM's parity worker). Workers that share a function are run as one
    vectorised call, so for most schemes f is called once on all N rows.

    Parameters
    ----------
    f : callable
        Vectorised: (n, *in_shape) -> (n, *out_shape).
    scheme : CodingScheme
    coded : ndarray, shape (N, *in_shape)
        ``scheme.encode(X)``.

    Returns
    -------
    Y : ndarray, shape (N, *out_shape), float64
    """
    N = scheme.n_workers
    groups: dict[int, tuple] = {}
    for n in range(N):
        fn = scheme.worker_function(n, f)
        groups.setdefault(id(fn), (fn, []))[1].append(n)
    if len(groups) == 1:
        return apply_batch(next(iter(groups.values()))[0], coded, "coded inputs", N)
    Y = None
    for fn, rows in groups.values():
        part = apply_batch(fn, coded[rows], "coded inputs" if fn is f else "coded inputs (worker function)",
                           len(rows))
        if Y is None:
            Y = np.empty((N, *part.shape[1:]))
        elif part.shape[1:] != Y.shape[1:]:
            raise ValueError(f"the worker functions disagree on the output shape: {part.shape[1:]} for workers "
                             f"{rows}, {Y.shape[1:]} for others")
        Y[rows] = part
    return Y


def _scarcity(info) -> float:
    # Replication is exact until an input's last copy is gone: scoring inputs
    # with few copies left lets a greedy adversary find the inputs to erase.
    copies = info.get("copies_returned")
    return 0.0 if copies is None else float(np.sum(0.5 ** np.asarray(copies, dtype=np.float64)))


def cosine_similarity(A, B) -> np.ndarray:
    """Row-wise cosine similarity of two (n, ...) arrays; 0 where a row is zero.

    Returns
    -------
    ndarray, shape (n,)
    """
    A = np.asarray(A, dtype=np.float64).reshape(len(A), -1)
    B = np.asarray(B, dtype=np.float64).reshape(len(B), -1)
    den = np.linalg.norm(A, axis=1) * np.linalg.norm(B, axis=1)
    return np.divide(np.sum(A * B, axis=1), den, out=np.zeros(len(A)), where=den > 0)


def evaluate(f, scheme: CodingScheme, X, stragglers: StragglerModel, *, rounds: int = 20, draws: int = 1,
             seed=0, task: str = "regression", confidence: float = 0.95, progress: bool = False,
             byzantine=None, drop_liars: bool = False) -> Evaluation:
    """Measure a scheme's decoding accuracy on f under a straggler model.

    Parameters
    ----------
    f : callable
        Vectorised: maps inputs of shape (n, *in_shape) to outputs (n, *out_shape).
    scheme : CodingScheme
        Its ``n_inputs`` is the batch size K.
    X : array_like, shape (n_samples, *in_shape)
        Pool of inputs; each round draws K of them (without replacement when
        n_samples >= K).
    stragglers : StragglerModel
        Adversarial models are given the true decoding error (MSE) to maximise.
    rounds : int
        Batches drawn; f runs once on the K inputs and once on the N coded inputs per batch.
    draws : int
        Straggler draws per batch.
    seed : int or Generator
    task : {"regression", "classification", "embedding"}
        Classification adds relative accuracy (argmax agreement); embedding
        adds cosine similarity.
    confidence : float
        Level of the t-intervals.
    progress : bool
        Show a progress bar.
    byzantine : gencc.byzantine.ByzantineModel, optional
        An attack on the returned outputs of each draw: the decoder sees the
        attacked outputs. Its random choices come from their own stream
        (spawned from ``seed``), so straggler draws are those without an
        attack, and every scheme evaluated at a seed sees the same attacks.
        Adds ``"clean_mse"`` (the same draw decoded by the same scheme
        from the honest outputs), ``"n_flagged"`` (workers the decoder flagged,
        ``Decoded.info["flagged"]``; 0 where it flags none),
        ``"false_flags"`` (flagged honest workers), ``"flag_precision"``
        (over draws with a flag) and ``"flag_recall"`` (over draws with a
        liar), the last three only for decoders that report ``"flagged"``.
        Adversarial straggler models still score honest decodes.
    drop_liars : bool
        With ``byzantine``: decode from the honest returned workers only, as
        an oracle that knows the liars would (the floor of any screen); the
        liars count as stragglers (a draw left with too few returns fails).

    Returns
    -------
    Evaluation

    Examples
    --------
    >>> import numpy as np, gencc
    >>> X = np.random.default_rng(0).uniform(-2, 2, size=(100, 3))
    >>> ev = gencc.evaluate(np.sin, gencc.BACC(4, 10), X, gencc.stragglers.RandomStragglers(2), rounds=5)
    >>> ev.metrics["mse"].n
    5
    """
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    rounds = check_int(rounds, "rounds")
    draws = check_int(draws, "draws")
    Xa = np.asarray(X, dtype=np.float64)
    check_batch(Xa, "X")
    rng = rng_from(seed)
    K, N = scheme.n_inputs, scheme.n_workers
    if byzantine is not None:
        from .byzantine import ByzantineModel

        if not isinstance(byzantine, ByzantineModel):
            raise TypeError(f"byzantine must be a gencc.byzantine.ByzantineModel or None, got {byzantine!r}")
        brng = rng.spawn(1)[0]  # its own stream: the straggler draws stay those without an attack
    if drop_liars and byzantine is None:
        raise ValueError("drop_liars needs an attack (byzantine=...) whose liars to drop")
    samples = {k: [] for k in ("mse", "rmse", "max_error", "loo_mse")}
    samples["exact_share"], samples["degraded_mse"] = [], []
    if task == "classification":
        samples["accuracy"], samples["degraded_accuracy"] = [], []
    if task == "embedding":
        samples["cosine"] = []
    if byzantine is not None:
        for k in ("clean_mse", "n_flagged", "false_flags", "flag_precision", "flag_recall"):
            samples[k] = []
    truths, failures, missing, answered, n_ret = [], 0, 0, 0, []

    iterator = range(rounds)
    if progress:
        from tqdm.auto import tqdm

        iterator = tqdm(iterator, desc=f"evaluate {type(scheme).__name__}", leave=False)
    for _ in iterator:
        batch = rng.choice(Xa.shape[0], size=K, replace=Xa.shape[0] < K)
        Xb = Xa[batch]
        truth = apply_batch(f, Xb, "data inputs", K)
        truths.append(truth.reshape(K, -1))
        Y = apply_workers(f, scheme, scheme.encode(Xb))

        def error(ret, Y=Y, truth=truth):
            try:
                dec = scheme.decode_with_info(Y[ret], ret)
                return float(np.mean((dec.estimate - truth) ** 2)) + _scarcity(dec.info)
            except MissingOutputsError as exc:  # a lost input outweighs any error
                return _LOST_INPUT * exc.missing.size + _scarcity(exc.info)
            except InsufficientReturnsError:
                return math.inf

        for _ in range(draws):
            ret = stragglers.returned(N, rng, error=error if stragglers.adversarial else None)
            n_ret.append(ret.size)
            answered += K
            Yret = Y[ret]
            if byzantine is not None:
                Yret, liars = byzantine.attack(Yret, ret, brng, points=scheme.beta[ret])
            try:
                if drop_liars:
                    keep = ~np.isin(ret, liars)
                    dec = scheme.decode_with_info(Yret[keep], ret[keep])
                else:
                    dec = scheme.decode_with_info(Yret, ret)
                est, ok, loo = dec.estimate, np.ones(K, dtype=bool), dec.error_estimate
                if byzantine is not None:
                    clean = scheme.decode(Y[ret], ret)
                    samples["clean_mse"].append(float(np.mean((clean - truth) ** 2)))
                    flagged = dec.info.get("flagged")
                    if flagged is not None:
                        hit = np.isin(flagged, liars)
                        samples["n_flagged"].append(float(flagged.size))
                        samples["false_flags"].append(float(np.count_nonzero(~hit)))
                        if flagged.size:
                            samples["flag_precision"].append(float(hit.mean()))
                        if liars.size:
                            samples["flag_recall"].append(float(np.count_nonzero(hit)) / liars.size)
                exact = np.asarray(dec.info.get("exact", np.zeros(K, dtype=bool)), dtype=bool)
            except MissingOutputsError as exc:
                est, loo = exc.partial, None
                exact = np.asarray(exc.info.get("exact", np.zeros(K, dtype=bool)), dtype=bool)
                ok = np.ones(K, dtype=bool)
                ok[exc.missing] = False
                missing += exc.missing.size
            except InsufficientReturnsError:
                failures += 1
                missing += K
                continue
            if ok.any():
                err = (est[ok] - truth[ok]).reshape(ok.sum(), -1)
                mse = float(np.mean(err**2))
                samples["mse"].append(mse)
                samples["rmse"].append(math.sqrt(mse))
                samples["max_error"].append(float(np.abs(err).max()))
                if task == "embedding":  # an unanswered input scores 0, as if orthogonal
                    samples["cosine"].append(float(np.sum(cosine_similarity(est[ok], truth[ok]))) / K)
            samples["exact_share"].append(float(exact.mean()))
            degraded = ok & ~exact
            if degraded.any():
                samples["degraded_mse"].append(float(np.mean((est[degraded] - truth[degraded]) ** 2)))
            if loo is not None and np.isfinite(loo):
                samples["loo_mse"].append(loo)
            if task == "classification":
                pred = np.argmax(est.reshape(K, -1), axis=1)
                agree = (pred == np.argmax(truth.reshape(K, -1), axis=1)) & ok
                samples["accuracy"].append(float(agree.mean()))
                if not exact.all():
                    samples["degraded_accuracy"].append(float(agree[~exact].mean()))

    T = np.concatenate(truths)
    var = float(np.mean(T.var(axis=0))) if T.shape[0] > 1 else 0.0
    samples["nmse"] = [m / var for m in samples["mse"]] if var > 0 else []
    arrays = {k: np.asarray(v) for k, v in samples.items()}
    return Evaluation(
        scheme=repr(scheme), n_inputs=K, n_workers=N, stragglers=repr(stragglers),
        metrics={k: Summary.of(v, confidence) for k, v in arrays.items()}, samples=arrays,
        draws=rounds * draws, failures=failures, missing_rate=missing / max(answered, 1),
        returned_mean=float(np.mean(n_ret)),
    )
