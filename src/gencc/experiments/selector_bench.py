"""Decoders judged on settings drawn fresh from a seed: an evaluation nobody can tune to.

Each run draws ``n_settings`` settings (function, K, N, straggler pattern)
from its seed: a new seed every run unless one is given, always printed and
stored, so a figure can be repeated but not chosen. For each setting every
decoder decodes the SAME batches from the SAME returned sets (common random
numbers), and is scored by its mean squared error over the best fixed GCC
decoder of a stated grid in hindsight (the *oracle*: the configuration of
``CALIBRATION_GRID`` — Sobolev-2 and Matern 1/2, 3/2, 5/2 at scales 0.1-2,
ridges 0, 1e-12 and 1e-8-1e-2, 144 configurations — with the lowest mean MSE on that
setting's own draws).

Decoders: ``gcc`` (the default: ``kernel="auto"``, ``criterion="auto"``, mean
of the best 3 of 16 kernels), ``gcc-gap`` (the same by the hole error alone,
the default until seed 1508795693's run), ``gcc-ridge1e-8`` (the default
with the former decoder ridge 1e-8, the default until seed 1930528233's
run), ``gcc-loo`` (by leave-one-out alone),
``gcc-spline`` (one fixed interpolating cubic spline: Sobolev-2,
``lam_dec=0``), ``letcc`` (LeTCC at its best decoder ridge of 0-1e-1 in
hindsight: a peer given its best setting) and ``bacc`` (Berrut). LeTCC and
BACC run their own encoders, on the same inputs and returned sets.

Families: ``closed-form`` (x sin x, tanh of a random projection, a Gaussian
bump, a random cubic, log cosh; 1-8 inputs in a random range), ``mlp`` (random
width 8-128, depth 1-3, activation tanh/relu/gelu/sigmoid/sin), ``cnn`` (a
random small CNN on the 8x8 digits, 1-2 conv layers of 4-16 channels) and
``network`` (the shipped workloads: mlp, lenet5, convnet, vit, lenet5-mnist and
the pretrained MiniLM). K is drawn log-uniformly from 2-64, N/K from
1.1-16, N capped at ``max_workers`` (512; 128 for MiniLM, 48 under the worst
block). Patterns: ``random`` (S uniform in 1..N-K), ``bernoulli`` (p up to
0.5, below (N-K)/N), ``block`` (one contiguous block at a random position),
``blocks`` (two or three), ``worst-block`` (each decoder's own worst block of
S adjacent workers: an adversary per decoder) and ``latency`` (the fastest
N-S of shifted-exponential, Pareto or slow-node latencies).

Errors below ``EXACT_NMSE`` (1e-12) times the outputs' mean square count as
exact: each MSE is raised to that floor before it is divided, so that a ratio
of round-offs (1e-30 against 1e-24, from a function that the code reproduces
exactly) is 1, not 10^6.

Every decoder choice of this project is judged on settings drawn after the
change (a new seed), never on a fixed list.
"""

from __future__ import annotations

import math
import secrets
import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import InsufficientReturnsError
from ..evaluate import apply_batch, apply_workers
from ..schemes import BACC, GCC, LeTCC
from ..schemes.gcc import CALIBRATION_GRID
from ..stragglers import (BernoulliStragglers, BlockStragglers, ContiguousStragglers, LatencyStragglers,
                          Pareto, RandomStragglers, ShiftedExponential, SlowNodes)

__all__ = ["FAMILIES", "PATTERNS", "DECODERS", "Setting", "draw_setting", "score_setting", "run_selector_bench",
           "summarize", "report", "plot", "plot_ecdf"]

FAMILIES = ("closed-form", "mlp", "cnn", "network")
PATTERNS = ("random", "bernoulli", "block", "blocks", "worst-block", "latency")
DECODERS = ("gcc", "gcc-gap", "gcc-ridge1e-8", "gcc-loo", "gcc-spline", "letcc", "bacc")
LETCC_RIDGES = (0.0, 1e-12, 1e-10, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1)
# Errors below this MSE relative to the outputs' mean square (an RMSE of one part in 10^6 of
# their RMS) count as exact: ratios of round-off (1e-30 against 1e-24) say nothing of a decoder.
EXACT_NMSE = 1e-12
_MAX_REDRAWS = 1000  # straggler draws tried per round for one that leaves K workers
NETWORKS = ("mlp", "lenet5", "convnet", "vit", "lenet5-mnist", "minilm")


@dataclass
class Setting:
    """One drawn setting: f, its input pool, K, N and the straggler pattern."""

    name: str
    family: str
    f: object = field(repr=False)
    X: np.ndarray = field(repr=False)
    K: int = 0
    N: int = 0
    pattern: str = ""
    stragglers: object = None

    def describe(self) -> dict:
        return {"name": self.name, "family": self.family, "K": self.K, "N": self.N, "pattern": self.pattern,
                "stragglers": repr(self.stragglers)}


# -- functions ---------------------------------------------------------------------------------
def _closed_form(rng):
    d = int(rng.integers(1, 9))
    a = float(rng.uniform(0.5, 3.0))
    X = rng.uniform(-a, a, size=(256, d))
    kind = str(rng.choice(["xsinx", "tanh-proj", "bump", "cubic", "logcosh"]))
    if kind == "xsinx":
        return f"x sin x (d={d}, |x|<={a:.2g})", (lambda X: X * np.sin(X)), X
    if kind == "tanh-proj":
        m = int(rng.integers(1, 9))
        W = rng.normal(size=(d, m)) * float(rng.uniform(0.3, 2.0))
        return f"tanh(XW) (d={d}, m={m})", (lambda X, W=W: np.tanh(X @ W)), X
    if kind == "bump":
        c = rng.uniform(-a, a, size=d)
        return f"gaussian bump (d={d})", (lambda X, c=c: np.exp(-np.sum((X - c) ** 2, axis=1, keepdims=True))), X
    if kind == "cubic":
        C = rng.normal(size=(3, d))
        return f"random cubic (d={d})", (lambda X, C=C: C[0] * X + C[1] * X ** 2 + C[2] * X ** 3), X
    return f"log cosh (d={d})", (lambda X: np.log(np.cosh(X))), X


_ACTS = {"tanh": np.tanh, "relu": lambda z: np.maximum(z, 0.0), "sigmoid": lambda z: 1.0 / (1.0 + np.exp(-z)),
         "gelu": lambda z: 0.5 * z * (1.0 + np.tanh(0.7978845608 * (z + 0.044715 * z ** 3))), "sin": np.sin}


def _mlp(rng):
    d, m = int(rng.integers(2, 33)), int(rng.integers(1, 11))
    depth = int(rng.integers(1, 4))
    widths = [d] + [int(rng.integers(8, 129)) for _ in range(depth)] + [m]
    act = str(rng.choice(list(_ACTS)))
    Ws = [rng.normal(size=(i, o)) * math.sqrt(2.0 / i) for i, o in zip(widths[:-1], widths[1:])]
    bs = [rng.normal(scale=0.1, size=o) for o in widths[1:]]
    g = _ACTS[act]

    def f(X, Ws=Ws, bs=bs):
        h = np.asarray(X, dtype=np.float64)
        for i, (W, b) in enumerate(zip(Ws, bs)):
            h = h @ W + b
            if i < len(Ws) - 1:
                h = g(h)
        return h

    return f"mlp {'-'.join(map(str, widths))} {act}", f, rng.normal(size=(256, d))


def _cnn(rng):
    import torch

    from ..workloads import get

    X = get("lenet5").X[:256]
    layers = int(rng.integers(1, 3))
    ch = [1] + [int(rng.integers(4, 17)) for _ in range(layers)]
    act = str(rng.choice(["relu", "tanh"]))
    torch.manual_seed(int(rng.integers(2 ** 31)))
    mods = []
    for i, o in zip(ch[:-1], ch[1:]):
        mods += [torch.nn.Conv2d(i, o, 3, padding=1), torch.nn.ReLU() if act == "relu" else torch.nn.Tanh()]
    net = torch.nn.Sequential(*mods, torch.nn.AdaptiveAvgPool2d(2), torch.nn.Flatten(),
                              torch.nn.Linear(4 * ch[-1], 10)).double().eval()

    def f(X, net=net):
        with torch.no_grad():
            return net(torch.as_tensor(np.asarray(X, dtype=np.float64))).numpy()

    return f"cnn {'-'.join(map(str, ch))} {act}", f, X


def _network(rng):
    from ..workloads import get

    name = str(rng.choice(NETWORKS))
    wl = get(name)
    return f"{name} (pretrained)" if name == "minilm" else name, wl.f, np.asarray(wl.X[:256], dtype=np.float64)


_FAMILY_DRAW = {"closed-form": _closed_form, "mlp": _mlp, "cnn": _cnn, "network": _network}


# -- settings ----------------------------------------------------------------------------------
def _pattern(rng, pattern, K, N):
    S = int(rng.integers(1, N - K + 1))  # at least K return: every decoder can decode
    if pattern == "random":
        return RandomStragglers(S)
    if pattern == "bernoulli":
        return BernoulliStragglers(float(rng.uniform(0.02, max(0.03, min(0.5, (N - K) / N)))))
    if pattern == "block":
        return BlockStragglers(S, 1)
    if pattern == "blocks":
        blocks = int(rng.integers(2, 4))
        S = max(S, blocks)
        while S + blocks - 1 > N - K and S > blocks:  # the blocks must fit apart with K returning
            S -= 1
        if S + blocks - 1 > N - K:  # no room for several blocks: one block that leaves K returning
            return BlockStragglers(min(S, N - K), 1)
        return BlockStragglers(S, blocks)
    if pattern == "worst-block":
        return ContiguousStragglers(S)
    latency = [ShiftedExponential(), Pareto(), SlowNodes()][int(rng.integers(3))]
    return LatencyStragglers(latency, wait_for=N - S)


def draw_setting(rng, index: int, *, max_workers: int = 512) -> Setting:
    """Draw setting ``index`` from ``rng`` (a numpy Generator)."""
    family = str(rng.choice(FAMILIES))
    label, f, X = _FAMILY_DRAW[family](rng)
    pattern = str(rng.choice(PATTERNS))
    cap = max_workers
    if "minilm" in label:
        cap = min(cap, 128)
    if pattern == "worst-block":
        cap = min(cap, 48)
    K = int(np.clip(round(math.exp(rng.uniform(math.log(2), math.log(64)))), 2, cap // 2))
    N = int(np.clip(math.ceil(K * math.exp(rng.uniform(math.log(1.1), math.log(16)))), K + 1, cap))
    return Setting(f"{index}: {label}, K={K}, N={N}", family, f, X, K, N, pattern, _pattern(rng, pattern, K, N))


# -- scoring -----------------------------------------------------------------------------------
def _decoders(K, N, extra=None):
    """name -> (scheme, encoder family): schemes sharing an encoder family see the same coded outputs."""
    out = {f"grid:{k}@{sc:g},{lam:g}": (GCC(K, N, kernel=k, scale=sc, lam_dec=lam), "gcc")
           for k, sc, lam in CALIBRATION_GRID}
    out["gcc"] = (GCC(K, N), "gcc")
    out["gcc-gap"] = (GCC(K, N, criterion="gap"), "gcc")
    out["gcc-ridge1e-8"] = (GCC(K, N, lam_dec=1e-8), "gcc")
    out["gcc-loo"] = (GCC(K, N, criterion="loo"), "gcc")
    out["gcc-spline"] = (GCC(K, N, kernel="sobolev2", lam_dec=0.0), "gcc")
    for lam in LETCC_RIDGES:
        out[f"letcc@{lam:g}"] = (LeTCC(K, N, lam_dec=lam), "letcc")
    out["bacc"] = (BACC(K, N), "bacc")
    for name, make in (extra or {}).items():  # candidates for a new default: GCC's encoder, GCC's draws
        out[name] = (make(K, N), "gcc")
    return out


def draw_returned(stragglers, N: int, K: int, rng) -> np.ndarray:
    """A draw of the returned workers with at least ``K`` of them (Bernoulli may leave fewer),
    redrawn at most ``_MAX_REDRAWS`` times."""
    for _ in range(_MAX_REDRAWS):
        ret = stragglers.returned(N, rng)
        if ret.size >= K:
            return ret
    raise RuntimeError(f"{stragglers!r} left fewer than K = {K} of N = {N} workers in {_MAX_REDRAWS} draws")


def _mse(scheme, Y, ret, truth) -> float:
    try:
        est = scheme.decode(Y[ret], ret)
    except (InsufficientReturnsError, ValueError, np.linalg.LinAlgError):
        return math.inf
    return _finite_mse(est, truth)


def _finite_mse(est, truth) -> float:
    err = float(np.mean((np.asarray(est).reshape(truth.shape) - truth) ** 2))
    return err if math.isfinite(err) else math.inf


def _decode_scored(scheme, Y, ret, truth) -> tuple[float, list]:
    """One decode: its MSE and, per decoded input, its true RMSE over the decoder's ``rmse_p90``
    (<= 1: covered; None where the decoder gave no bound, an infinite ``rmse_p90``). An input
    whose true error is round-off (below ``EXACT_NMSE``) counts as covered."""
    try:
        dec = scheme.decode_with_info(Y[ret], ret)
    except (InsufficientReturnsError, ValueError, np.linalg.LinAlgError):
        return math.inf, []
    est = np.asarray(dec.estimate).reshape(truth.shape)
    err = np.sqrt(np.mean((est - truth) ** 2, axis=1))
    tiny = err ** 2 <= EXACT_NMSE * max(float(np.mean(truth ** 2)), 1e-300)
    bound = np.asarray(dec.info.get("rmse_p90", np.full(err.shape, np.nan)), dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(tiny, 0.0, err / bound)
    return _finite_mse(est, truth), [None if b == math.inf and not t else float(v) if np.isfinite(v) else math.inf
                                     for v, b, t in zip(r, bound, tiny)]


def _coverage(ratios) -> dict:
    """Of the decoded inputs with a bound, the share whose true RMSE is under it, and the true RMSE
    over it (median, p90); ``unbounded``: the share of all inputs the decoder gave no bound
    (None in ``ratios``)."""
    v = np.asarray([x for x in ratios if x is not None], dtype=np.float64)
    unbounded = (len(ratios) - v.size) / len(ratios) if len(ratios) else math.nan
    if not v.size:
        return {"inputs": len(ratios), "covered": math.nan, "ratio_p50": math.nan, "ratio_p90": math.nan,
                "unbounded": unbounded}
    return {"inputs": len(ratios), "covered": float(np.mean(v <= 1.0)), "ratio_p50": float(np.quantile(v, 0.5)),
            "ratio_p90": float(np.quantile(v, 0.9)), "unbounded": unbounded}


def score_setting(setting: Setting, *, rounds: int = 6, seed=0, extra=None) -> dict:
    """Every decoder's mean MSE on the setting's draws, and each named decoder over the oracle.

    ``extra``: name -> ``make(K, N)``, further GCC decoders to score (a
    candidate default, judged on the same draws as the rest).

    Returns
    -------
    dict
        ``mse`` (decoder -> mean MSE over rounds; ``letcc`` is LeTCC at its
        best ridge, named in ``letcc_ridge``), ``oracle`` (the grid's best
        configuration) and ``oracle_mse``, ``ratio`` (decoder -> MSE over the
        oracle's, both raised to ``exact_floor``: ``EXACT_NMSE`` times the
        outputs' mean square), ``seconds``.
    """
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    K, N, f = setting.K, setting.N, setting.f
    decs = _decoders(K, N, extra)
    encoders = {fam: scheme for scheme, fam in reversed(list(decs.values()))}
    sums = dict.fromkeys(decs, 0.0)
    power = 0.0
    ratios = []  # the default decoder's true RMSE over its rmse_p90, per decoded input
    adversarial = getattr(setting.stragglers, "adversarial", False)
    blocks = setting.stragglers.candidates(N) if adversarial else None
    for _ in range(rounds):
        Xb = setting.X[rng.choice(setting.X.shape[0], size=K, replace=setting.X.shape[0] < K)]
        truth = apply_batch(f, Xb, "data inputs", K).reshape(K, -1)
        power += float(np.mean(truth ** 2)) / rounds
        Y = {fam: apply_workers(f, s, s.encode(Xb)).reshape(N, -1) for fam, s in encoders.items()}
        if not adversarial:
            ret = draw_returned(setting.stragglers, N, K, rng)
            for name, (scheme, fam) in decs.items():
                if name == "gcc":
                    err, r = _decode_scored(scheme, Y[fam], ret, truth)
                    sums[name] += err
                    ratios.extend(r)
                else:
                    sums[name] += _mse(scheme, Y[fam], ret, truth)
        else:  # each decoder against its own worst block
            for name, (scheme, fam) in decs.items():
                if name == "gcc":
                    scored = [_decode_scored(scheme, Y[fam], r, truth) for r in blocks]
                    worst = int(np.argmax([e for e, _ in scored]))
                    sums[name] += scored[worst][0]
                    ratios.extend(scored[worst][1])
                else:
                    sums[name] += max(_mse(scheme, Y[fam], r, truth) for r in blocks)
    mse = {name: v / rounds for name, v in sums.items()}
    grid = {n: v for n, v in mse.items() if n.startswith("grid:")}
    oracle = min(grid, key=lambda n: grid[n])
    letcc = min((n for n in mse if n.startswith("letcc@")), key=lambda n: mse[n])
    named = {**{n: mse[n] for n in DECODERS if n in mse}, "letcc": mse[letcc], **{n: mse[n] for n in (extra or {})}}
    floor = max(EXACT_NMSE * power, 1e-300)  # below it, errors are round-off and count as equal
    return {"mse": named, "oracle": oracle[len("grid:"):], "oracle_mse": grid[oracle],
            "letcc_ridge": float(letcc.split("@")[1]), "exact_floor": floor,
            "ratio": {n: max(v, floor) / max(grid[oracle], floor) for n, v in named.items()},
            "coverage": _coverage(ratios), "error_ratios": ratios, "seconds": time.perf_counter() - t0}


def _quantile(v, q):
    v = np.asarray(v, dtype=np.float64)
    return float(np.quantile(v, q)) if v.size else math.nan


def _floored(row, dec):
    return max(row["mse"][dec], row.get("exact_floor", 0.0), 1e-300)


def summarize(rows: list[dict], key: str = "ratio", against: str | None = None) -> list[dict]:
    """Per decoder: the distribution of its ratio over the settings (median, p90, max, worst named).

    ``against``: a decoder name to divide by instead of the oracle (e.g. ``"letcc"``)."""
    out = []
    for dec in rows[0]["ratio"] if rows else DECODERS:
        if against is not None and dec == against:
            continue
        vals = [_floored(r, dec) / _floored(r, against) if against else r[key][dec] for r in rows]
        worst = int(np.argmax(vals))
        out.append({"decoder": dec, "vs": against or "oracle", "settings": len(vals),
                    "median": _quantile(vals, 0.5), "p90": _quantile(vals, 0.9), "max": float(np.max(vals)),
                    "within_1.25x": float(np.mean(np.asarray(vals) <= 1.25)),
                    "within_2x": float(np.mean(np.asarray(vals) <= 2.0)), "worst": rows[worst]["setting"]["name"]
                    + f" [{rows[worst]['setting']['pattern']}]"})
    return out


def run_selector_bench(n_settings: int = 200, *, seed: int | None = None, rounds: int = 6,
                       max_workers: int = 512, progress: bool = False, extra=None) -> dict:
    """Draw ``n_settings`` settings from ``seed`` (a fresh one if None) and score every decoder
    (``extra``: further decoders, see :func:`score_setting`).

    Returns
    -------
    dict
        ``seed``, ``rows`` (one per setting: its description, every decoder's
        MSE, the oracle and the ratios), ``summary`` (over the oracle),
        ``summary_vs_letcc``, ``summary_vs_bacc``, ``coverage`` (per function
        family and over all: the share of the default decoder's decoded inputs
        whose true RMSE is under its ``rmse_p90``) and ``by_pattern`` (the
        default decoder's distribution per straggler pattern).
    """
    seed = secrets.randbits(32) if seed is None else int(seed)
    rng = np.random.default_rng(seed)
    from tqdm.auto import tqdm

    rows = []
    for i in tqdm(range(n_settings), desc=f"selector bench (seed {seed})", unit="setting", disable=not progress):
        setting = draw_setting(rng, i, max_workers=max_workers)
        res = score_setting(setting, rounds=rounds, seed=rng.integers(2 ** 63), extra=extra)
        rows.append({"setting": setting.describe(), **res})
    by_pattern = []
    for pattern in PATTERNS:
        sub = [r for r in rows if r["setting"]["pattern"] == pattern]
        if sub:
            by_pattern.extend({"pattern": pattern, **row} for row in summarize(sub) if row["decoder"] == "gcc")
    coverage = [{"family": fam, **_coverage([x for r in rows if r["setting"]["family"] == fam
                                             for x in r["error_ratios"]])}
                for fam in FAMILIES + ("all",) if fam == "all" or any(r["setting"]["family"] == fam for r in rows)]
    coverage[-1].update(_coverage([x for r in rows for x in r["error_ratios"]]))
    return {"seed": seed, "n_settings": n_settings, "rounds": rounds, "max_workers": max_workers, "rows": rows,
            "coverage": coverage,
            "summary": summarize(rows), "summary_vs_letcc": summarize(rows, against="letcc"),
            "summary_vs_bacc": summarize(rows, against="bacc"), "by_pattern": by_pattern}


def report(result: dict) -> str:
    """The console tables of a :func:`run_selector_bench` result (or of its saved JSON)."""
    from ..report import format_table

    seed = result["seed"]
    cols = ["decoder", "vs", "settings", "median", "p90", "max", "within_1.25x", "within_2x", "worst"]
    return "\n".join([
        format_table(result["summary"], cols, title=f"MSE over the best fixed GCC decoder in hindsight, seed {seed}"),
        format_table(result["summary_vs_letcc"] + result["summary_vs_bacc"], cols, title="MSE over the peers'"),
        format_table(result["by_pattern"], ["pattern"] + cols, title="the default decoder (gcc) by straggler pattern"),
        format_table(result["coverage"], ["family", "inputs", "unbounded", "covered", "ratio_p50", "ratio_p90"],
                     title="gcc's rmse_p90: share of decoded inputs with a bound whose true RMSE is under it "
                           "(target 0.85-0.95); unbounded: no bound given (rmse_p90 inf)"),
    ])


def plot_ecdf(rows: list[dict], path, *, title: str, xlabel: str, decoders=None, marks=(1.25, 2.0)):
    """ECDF over the settings of each decoder's ``row["ratio"]``, log scale, to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for dec in decoders or rows[0]["ratio"]:
        v = np.sort([r["ratio"][dec] for r in rows])
        ax.step(v, np.arange(1, v.size + 1) / v.size, where="post", label=dec)
    ax.set_xscale("log")
    for x, ls in zip(marks, (":", "--")):
        ax.axvline(x, color="grey", ls=ls, lw=1)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("share of settings")
    ax.set_title(title)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot(result: dict, path):
    """ECDF of each decoder's MSE over the oracle's, log scale, to ``path`` (PNG)."""
    return plot_ecdf(result["rows"], path, title=f"{result['n_settings']} settings drawn with seed {result['seed']}",
                     xlabel=f"MSE / best fixed GCC decoder in hindsight ({len(CALIBRATION_GRID)}-configuration grid)")
