"""Self-calibration judged on streams drawn fresh from a seed, and on a workload that drifts.

:func:`run_self_calibration_bench` draws settings as the selector bench does
(:func:`gencc.experiments.selector_bench.draw_setting`: function, K, N and a
straggler pattern; the ``worst-block`` adversary, which picks its block per
decoder, is replaced by one block of the same size at a random position) and
serves each as a stream of ``batches`` batches through a *systematic* GCC.
Every decoder decodes the same batches from the same returned sets:

- ``gcc``: the default per-decode selection (``kernel="auto"``);
- ``self-cal``: :class:`~gencc.schemes.self_calibration.SelfCalibration`,
  decoding each batch with its current choice, then observing the batch (as
  the executor does with ``self_calibrate=True``, without the CPU cap);
- ``calibrated``: ``GCC.calibrate`` on 8 batches of sample inputs drawn from
  the same pool, with the setting's straggler model, before the stream;
- the oracle: the best of the 144 fixed decoders of ``CALIBRATION_GRID`` in
  hindsight, on the scored batches.

Scores are MSEs over the second half of the stream (self-calibration has seen
the first half), divided by the oracle's, both floored at ``EXACT_NMSE``
times the outputs' mean square.

:func:`run_drift` serves one stream whose function changes halfway and
records every decoder's error per batch: the plot of decoded error against
requests served shows self-calibration converging and re-converging.
"""

from __future__ import annotations

import math
import secrets
import time

import numpy as np

from ..evaluate import apply_batch, apply_workers
from ..schemes import GCC
from ..schemes.gcc import CALIBRATION_GRID
from ..schemes.self_calibration import SelfCalibration
from ..stragglers import BlockStragglers
from .selector_bench import EXACT_NMSE, _mse, draw_returned, draw_setting, plot_ecdf, summarize

__all__ = ["run_self_calibration_bench", "score_stream", "run_drift", "report", "plot", "plot_drift"]

DECODERS = ("gcc", "self-cal", "calibrated")


def _grid(K, N):
    return {f"{k}@{sc:g},{lam:g}": GCC(K, N, kernel=k, scale=sc, lam_dec=lam, worker_points="systematic")
            for k, sc, lam in CALIBRATION_GRID}


def score_stream(f, X, K, N, stragglers, *, batches=48, seed=0, calibrate_rounds=8) -> dict:
    """Serve ``batches`` batches of K inputs drawn from ``X`` and score every decoder.

    Returns
    -------
    dict
        ``mse`` (decoder -> mean MSE over the second half), ``oracle``,
        ``oracle_mse``, ``exact_floor``, ``ratio`` (decoder -> MSE over the
        oracle's, floored), ``self_cal`` (the choice at the end, switches,
        CPU seconds spent scoring), ``seconds``.
    """
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    if getattr(stragglers, "adversarial", False):
        stragglers = BlockStragglers(min(stragglers.n_stragglers, N - K), 1)
    default = GCC(K, N, worker_points="systematic")
    cal = SelfCalibration(default, seed=int(rng.integers(2 ** 31)))
    calibrated = default.calibrate(f, X, stragglers, rounds=calibrate_rounds, seed=int(rng.integers(2 ** 31)))
    grid = _grid(K, N)
    scored = range(batches // 2, batches)
    sums = dict.fromkeys(list(DECODERS) + list(grid), 0.0)
    power = 0.0
    for t in range(batches):
        Xb = X[rng.choice(X.shape[0], size=K, replace=X.shape[0] < K)]
        truth = apply_batch(f, Xb, "data inputs", K).reshape(K, -1)
        Y = apply_workers(f, default, default.encode(Xb)).reshape(N, -1)
        ret = np.sort(draw_returned(stragglers, N, K, rng))
        if t in scored:
            power += float(np.mean(truth ** 2)) / len(scored)
            sums["gcc"] += _mse(default, Y, ret, truth)
            sums["self-cal"] += _mse(cal.decoder, Y, ret, truth)
            sums["calibrated"] += _mse(calibrated, Y, ret, truth)
            for name, scheme in grid.items():
                sums[name] += _mse(scheme, Y, ret, truth)
        cal.observe(Y[ret][:, None, :], ret)
    mse = {k: v / len(scored) for k, v in sums.items()}
    oracle = min(grid, key=lambda n: mse[n])
    floor = max(EXACT_NMSE * power, 1e-300)
    named = {d: mse[d] for d in DECODERS}
    return {"mse": named, "oracle": oracle, "oracle_mse": mse[oracle], "exact_floor": floor,
            "ratio": {d: max(v, floor) / max(mse[oracle], floor) for d, v in named.items()},
            "self_cal": {"choice": cal.labels[cal.current], "switches": len(cal.switches),
                         "busy_seconds": cal.busy_seconds, "tests": cal.tests_seen},
            "seconds": time.perf_counter() - t0}


def run_self_calibration_bench(n_settings: int = 60, *, seed: int | None = None, batches: int = 48,
                               max_workers: int = 128, progress: bool = False) -> dict:
    """Draw ``n_settings`` settings from ``seed`` (a fresh one if None) and score each stream.

    Returns
    -------
    dict
        ``seed``, ``rows`` (per setting: its description and
        :func:`score_stream`'s result), ``summary`` (per decoder over the
        oracle: median, p90, max, worst named), ``summary_vs_gcc`` (over the
        default decoder).
    """
    from tqdm.auto import tqdm

    seed = secrets.randbits(32) if seed is None else int(seed)
    rng = np.random.default_rng(seed)
    rows = []
    for i in tqdm(range(n_settings), desc=f"self-calibration bench (seed {seed})", unit="setting",
                  disable=not progress):
        s = draw_setting(rng, i, max_workers=max_workers)
        res = score_stream(s.f, s.X, s.K, s.N, s.stragglers, batches=batches, seed=int(rng.integers(2 ** 63)))
        rows.append({"setting": s.describe(), **res})
    return {"seed": seed, "n_settings": n_settings, "batches": batches, "max_workers": max_workers, "rows": rows,
            "summary": summarize(rows), "summary_vs_gcc": summarize(rows, against="gcc")}


def _drift_functions(rng, d):
    W1 = rng.normal(size=(d, 3)) / math.sqrt(d)
    W2 = rng.normal(size=(d, 3)) / math.sqrt(d)

    def smooth(X):  # nearly linear on the inputs' range
        return np.tanh(0.5 * np.asarray(X) @ W1)

    def sharp(X):  # steep and oscillating: wants a rougher kernel
        return np.sin(6.0 * np.asarray(X) @ W2)

    return ("tanh(0.5 XW)", smooth), ("sin(6 XW)", sharp)


def run_drift(*, seed: int | None = None, K: int = 8, N: int = 24, batches: int = 240, stragglers=None,
              d: int = 4) -> dict:
    """One stream whose function changes after half of its batches.

    Every batch is decoded by ``gcc`` (default), ``self-cal`` and
    ``calibrated`` (calibrated before the stream on the first function), and
    by every fixed decoder of the grid; the per-phase oracle is the fixed
    decoder best over that phase in hindsight.

    Returns
    -------
    dict
        ``seed``, ``K``, ``N``, ``functions``, ``drift_at``, ``errors``
        (decoder -> per-batch MSE over the batch's decoded inputs, those whose
        systematic worker was missing, relative to the outputs' mean square;
        NaN for a batch answered exactly), ``oracle`` (per phase: its name),
        ``switches``, ``phase_mse`` (per phase and decoder: the mean, and
        ``settled``, the mean over its second half).
    """
    seed = secrets.randbits(32) if seed is None else int(seed)
    rng = np.random.default_rng(seed)
    stragglers = stragglers or BlockStragglers(max(1, (N - K) // 2), 1)
    (name1, f1), (name2, f2) = _drift_functions(rng, d)
    default = GCC(K, N, worker_points="systematic")
    cal = SelfCalibration(default, seed=int(rng.integers(2 ** 31)))
    pool = rng.uniform(-1, 1, size=(512, d))
    calibrated = default.calibrate(f1, pool, stragglers, rounds=8, seed=int(rng.integers(2 ** 31)))
    grid = _grid(K, N)
    drift_at = batches // 2
    errors = {k: [] for k in list(DECODERS) + list(grid)}
    for t in range(batches):
        f = f1 if t < drift_at else f2
        Xb = pool[rng.choice(pool.shape[0], size=K, replace=False)]
        truth = f(Xb).reshape(K, -1)
        Y = f(default.encode(Xb)).reshape(N, -1)
        ret = np.sort(draw_returned(stragglers, N, K, rng))
        decoded = np.setdiff1d(np.arange(K), ret)  # inputs whose systematic worker is missing
        scale = max(float(np.mean(truth ** 2)), 1e-300)
        for name, scheme in [("gcc", default), ("self-cal", cal.decoder), ("calibrated", calibrated),
                             *grid.items()]:
            if decoded.size:
                est = np.asarray(scheme.decode(Y[ret], ret)).reshape(truth.shape)
                err = float(np.mean((est[decoded] - truth[decoded]) ** 2)) / scale
                errors[name].append(max(err, EXACT_NMSE) if math.isfinite(err) else math.inf)
            else:
                errors[name].append(math.nan)  # every input answered exactly: nothing to compare
        cal.observe(Y[ret][:, None, :], ret)
    phases = [(0, drift_at), (drift_at, batches)]
    oracle = [min(grid, key=lambda n: _mean_seen(errors[n][a:b])) for a, b in phases]
    out = {"seed": seed, "K": K, "N": N, "stragglers": repr(stragglers), "functions": [name1, name2],
           "drift_at": drift_at, "batches": batches, "oracle": oracle, "switches": cal.switches,
           "errors": {k: errors[k] for k in DECODERS}}
    out["errors"]["oracle"] = errors[oracle[0]][:drift_at] + errors[oracle[1]][drift_at:]
    out["phase_mse"] = [{"phase": i + 1, "function": [name1, name2][i], "oracle_decoder": oracle[i],
                         **{k: _mean_seen(v[a:b]) for k, v in out["errors"].items()},
                         # the second half of each phase: after self-calibration has had time to converge
                         "settled": {k: _mean_seen(v[(a + b) // 2:b]) for k, v in out["errors"].items()}}
                        for i, (a, b) in enumerate(phases)]
    return out


def _mean_seen(v) -> float:
    """Mean over the batches that had decoded inputs (NaN: none had)."""
    v = np.asarray(v, dtype=np.float64)
    v = v[~np.isnan(v)]
    return float(np.mean(v)) if v.size else math.nan


def report(result: dict, drift: dict | None = None) -> str:
    """The console tables of a bench result (and of a drift run)."""
    from ..report import format_table

    cols = ["decoder", "vs", "settings", "median", "p90", "max", "within_1.25x", "within_2x", "worst"]
    parts = [format_table(result["summary"] + result["summary_vs_gcc"], cols,
                          title=f"MSE over the best fixed decoder in hindsight (systematic GCC), second half of "
                                f"{result['batches']} batches, seed {result['seed']}")]
    if drift is not None:
        rows = [{"phase": p["phase"], "function": p["function"], "oracle": p["oracle_decoder"],
                 **{f"{k} (settled)": p["settled"][k] / p["settled"]["oracle"] for k in DECODERS}}
                for p in drift["phase_mse"]]
        parts.append(format_table(rows, title=f"drift (seed {drift['seed']}, K={drift['K']}, N={drift['N']}, "
                                              f"{drift['stragglers']}): MSE over the phase's oracle, second half "
                                              "of each phase"))
    return "\n".join(parts)


def plot(result: dict, path):
    """ECDF of each decoder's MSE over the oracle's, log scale, to ``path`` (PNG)."""
    return plot_ecdf(result["rows"], path, decoders=DECODERS, marks=(1.1, 2.0),
                     title=f"{result['n_settings']} streams drawn with seed {result['seed']} (systematic GCC)",
                     xlabel="MSE / best fixed decoder in hindsight (second half of each stream)")


def plot_drift(drift: dict, path, smooth: int = 16):
    """Decoded error (rolling mean over the last ``smooth`` batches with decoded inputs) against requests
    served."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    K = drift["K"]
    for name in ("gcc", "calibrated", "self-cal", "oracle"):
        v = np.asarray(drift["errors"][name], dtype=np.float64)
        seen = np.flatnonzero(np.isfinite(v))  # batches with decoded inputs
        width = min(smooth, seen.size)
        if width == 0:
            continue
        roll = np.convolve(v[seen], np.ones(width) / width, mode="valid")  # MSE: the tables' arithmetic mean
        x = (seen[width - 1:] + 1) * K
        ax.plot(x, roll, label=name, lw=2 if name == "self-cal" else 1.2,
                ls="--" if name == "oracle" else "-")
    for s in drift["switches"]:
        ax.axvline(s["batches"] * K, color="tab:green", alpha=0.25, lw=1)
    ax.axvline(drift["drift_at"] * K, color="black", ls=":", lw=1.5)
    ax.set_yscale("log")
    ax.set_xlabel("requests served (inputs)")
    ax.set_ylabel(f"decoded inputs' MSE / mean square\n(mean of the last {smooth} batches with any)")
    ax.set_title(f"{drift['functions'][0]} -> {drift['functions'][1]} at the dotted line; switches in green")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
