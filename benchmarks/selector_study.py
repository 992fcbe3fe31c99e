"""How far are GCC's per-decode kernel selectors from the best fixed decoder?

For every setting (f, straggler model, K, N) the script draws ``rounds``
batches of K inputs, encodes them with GCC's encoder (interpolating cubic
spline, Chebyshev points), runs f on the N coded inputs once, and then
scores every decoder on the SAME outputs and returned sets:

* every fixed configuration (kernel, scale, ridge) of the oracle grid
  ``sobolev2`` and ``matern12/32/52`` at scales 0.1, 0.2, 0.5, 1, 2, with
  ridges 1e-8 .. 1e-2 (112 configurations); the oracle is the one with the
  lowest mean MSE in hindsight, chosen per setting;
* per-decode selectors, each choosing a configuration from the returned
  outputs alone:

  ``loo``        the former default: 4 kernels (sobolev2, matern32@0.5,
                 matern52@0.5, matern52@2), lam 1e-8, closed-form leave-one-out;
  ``loo_grid``   leave-one-out over the whole oracle grid;
  ``near_grid``  leave-one-out residuals of only the nodes bracketing each
                 alpha_k, over the grid (a criterion weighted to the alpha_k);
  ``gap4``       gap-aware cross-validation (:func:`gencc.ridge.hole_blocks`:
                 hold out a block as wide as the real hole around each
                 alpha_k, predict its centre) over the former 4 kernels, lam 1e-8;
  ``gap_k16``    gap CV over the grid's 16 kernels at lam 1e-8 (GCC's default
                 now: criterion="gap", DEFAULT_CANDIDATES);
  ``gap_grid``   gap CV over the whole grid (kernel, scale and ridge);
  ``gap_fine``   gap CV over the grid plus scales 0.05, 0.3, 0.7, 1.4, 3, 5
                 (a finer, wider scale search);
  ``gap_mix3``   the mean of the 3 best grid configurations by gap CV;
  ``gaploo``     gap CV + leave-one-out score summed, over the grid;
  ``k16_mix3``   the mean of the 3 best of the 16 kernels at lam 1e-8 by gap CV;
  ``k13_mix3``   the same without matern12;
  ``w16_mix3``   k16_mix3 copying only holes wider than 1.5x the spacing next
                 to them (``hole_blocks(wide=1.5)``), leave-one-out when none;
  ``w13_mix3``   the same without matern12.

Straggler models: ``random`` (S = max(1, min(N - K, round(N/4)))),
``bernoulli`` (p = 0.2; draws leaving fewer than K returns are redrawn) and
``contiguous`` (the worst block of S adjacent workers, chosen separately
for every decoder and round: each decoder faces its own adversary, as in
:class:`gencc.stragglers.ContiguousStragglers`).

Output: per setting the oracle's MSE and configuration and each selector's
MSE over the oracle's; then the geometric mean and maximum of the ratios.

Run: PYTHONPATH=src python benchmarks/selector_study.py [rounds] [out]
"""

from __future__ import annotations

import sys
import time
import zlib

import numpy as np

import gencc
from gencc.kernels import make_kernel
from gencc.ridge import hole_blocks, ridge_path

LAMS = [1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2]
SCALES = [0.1, 0.2, 0.5, 1.0, 2.0]
FINE = [0.05, 0.3, 0.7, 1.4, 3.0, 5.0]
FAMILIES = ["matern12", "matern32", "matern52"]

KERNELS = [("sobolev2", 1.0)] + [(k, s) for k in FAMILIES for s in SCALES]
FINE_KERNELS = [(k, s) for k in FAMILIES for s in FINE]
ALL_KERNELS = KERNELS + FINE_KERNELS
CONFIGS = [(k, s, lam) for k, s in ALL_KERNELS for lam in LAMS]
N_ORACLE = len(KERNELS) * len(LAMS)


def _mask(pred):
    return np.array([pred(k, s, lam) for k, s, lam in CONFIGS])


# GCC's candidates before this study (kernel="auto", criterion="loo")
DEFAULT = {("sobolev2", 1.0), ("matern32", 0.5), ("matern52", 0.5), ("matern52", 2.0)}
ORACLE = np.arange(len(CONFIGS)) < N_ORACLE
SELECTORS = {  # name: (configs allowed, criterion, how many to average)
    "loo": (_mask(lambda k, s, lam: (k, s) in DEFAULT and lam == 1e-8), "loo", 1),
    "loo_grid": (ORACLE, "loo", 1),
    "near_grid": (ORACLE, "near", 1),
    "gap4": (_mask(lambda k, s, lam: (k, s) in DEFAULT and lam == 1e-8), "gap", 1),
    "gap_k16": (ORACLE & _mask(lambda k, s, lam: lam == 1e-8), "gap", 1),
    "gap_grid": (ORACLE, "gap", 1),
    "gap_fine": (np.ones(len(CONFIGS), dtype=bool), "gap", 1),
    "gap_mix3": (ORACLE, "gap", 3),
    "gaploo": (ORACLE, "gaploo", 1),
    "k16_mix3": (ORACLE & _mask(lambda k, s, lam: lam == 1e-8), "gap", 3),
    "k13_mix3": (ORACLE & _mask(lambda k, s, lam: lam == 1e-8 and k != "matern12"), "gap", 3),
    "w16_mix3": (ORACLE & _mask(lambda k, s, lam: lam == 1e-8), "gapw", 3),
    "w13_mix3": (ORACLE & _mask(lambda k, s, lam: lam == 1e-8 and k != "matern12"), "gapw", 3),
}


def _setting_rng(*key):
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def _returned_sets(kind, N, K, S, rounds, rng):
    """list of (returned, rounds that see it)."""
    if kind == "contiguous":
        every = np.arange(N)
        return [(np.concatenate([every[:s], every[s + S:]]), np.arange(rounds)) for s in range(N - S + 1)]
    out = []
    for r in range(rounds):
        if kind == "random":
            ret = np.sort(rng.choice(N, N - S, replace=False))
        else:
            while True:
                ret = np.flatnonzero(rng.random(N) >= 0.2)
                if ret.size >= K:
                    break
        out.append((ret, np.array([r])))
    return out


def run_setting(wl, kind, K, N, rounds):
    S = max(1, min(N - K, round(N / 4)))
    rng = _setting_rng(wl.name, kind, K, N)
    scheme = gencc.GCC(K, N)
    alpha, beta = scheme.alpha, scheme.beta
    truths, outs = [], []
    for _ in range(rounds):
        Xb = wl.X[rng.choice(wl.X.shape[0], K, replace=False)]
        truths.append(np.asarray(wl.f(Xb), dtype=np.float64).reshape(K, -1))
        outs.append(np.asarray(wl.f(scheme.encode(Xb)), dtype=np.float64).reshape(N, -1))
    m = truths[0].shape[1]
    sets = _returned_sets(kind, N, K, S, rounds, rng)
    n_cfg = len(CONFIGS)
    # errors[set, round] per config and per selector (NaN where a round does not see a set)
    cfg_err = np.full((len(sets), rounds, n_cfg), np.nan)
    sel_err = {name: np.full((len(sets), rounds), np.nan) for name in SELECTORS}
    for si, (ret, rs) in enumerate(sets):
        t = beta[ret]
        order = np.argsort(t)
        t, ret = t[order], ret[order]
        Yc = np.concatenate([outs[r][ret] for r in rs], axis=1)  # (n, len(rs) * m)
        Tc = np.concatenate([truths[r] for r in rs], axis=1)
        blocks = hole_blocks(t, alpha)
        wblocks = hole_blocks(t, alpha, wide=1.5)
        nb = len(blocks)
        r_idx = np.searchsorted(t, alpha)
        near = np.unique(np.clip(np.concatenate([r_idx - 1, r_idx]), 0, t.size - 1))
        preds = np.empty((n_cfg, K, Yc.shape[1]))
        score = {c: np.empty((n_cfg, len(rs))) for c in ("loo", "gap", "near", "gapw")}
        ci = 0
        for name, s in ALL_KERNELS:
            for row in ridge_path(t, Yc, make_kernel(name, s), LAMS, targets=alpha, blocks=blocks + wblocks):
                loo = (row.c / row.a[:, None]) ** 2
                preds[ci] = row.pred
                score["loo"][ci] = loo.reshape(t.size, len(rs), m).mean(axis=(0, 2))
                score["near"][ci] = loo[near].reshape(near.size, len(rs), m).mean(axis=(0, 2))
                gap = row.block[:nb] ** 2 if blocks else loo
                score["gap"][ci] = gap.reshape(gap.shape[0], len(rs), m).mean(axis=(0, 2))
                gap = row.block[nb:] ** 2 if wblocks else loo
                score["gapw"][ci] = gap.reshape(gap.shape[0], len(rs), m).mean(axis=(0, 2))
                ci += 1
        assert ci == n_cfg
        score["gaploo"] = score["gap"] + score["loo"]
        for c in score.values():
            c[~np.isfinite(c)] = np.inf
        sq = ((preds - Tc[None]) ** 2).reshape(n_cfg, K, len(rs), m).mean(axis=(1, 3))  # (cfg, len(rs))
        cfg_err[si][rs] = sq.T
        for sel, (allowed, crit, top) in SELECTORS.items():
            cand = np.flatnonzero(allowed)
            for j, r in enumerate(rs):
                pick = cand[np.argsort(score[crit][cand, j], kind="stable")[:top]]
                p = preds[pick][:, :, j * m:(j + 1) * m].mean(axis=0)
                sel_err[sel][si, r] = float(np.mean((p - truths[r]) ** 2))
    # per round: the adversary's worst set (contiguous) or the round's own set
    agg = np.nanmax if kind == "contiguous" else np.nanmean
    per_cfg = agg(cfg_err, axis=0).mean(axis=0)  # (cfg,)
    best = int(np.argmin(np.where(ORACLE, per_cfg, np.inf)))
    res = {sel: float(agg(e, axis=0).mean()) for sel, e in sel_err.items()}
    return S, per_cfg[best], CONFIGS[best], res


def main(rounds=30, out="results/selector_study/selector_study.txt"):
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass
    lines = [f"selector study: {rounds} rounds per setting; MSE ratio to the best fixed "
             f"(kernel, scale, ridge) of {N_ORACLE} in hindsight (benchmarks/selector_study.py)", ""]
    head = f"{'setting':<34} {'oracle':>10} {'oracle config':<24}" + "".join(f"{s:>10}" for s in SELECTORS)
    lines.append(head)
    ratios = {s: [] for s in SELECTORS}
    t0 = time.time()
    for fname in ("xsinx", "mlp", "lenet5", "convnet"):
        wl = gencc.workloads.get(fname)
        for kind in ("random", "bernoulli", "contiguous"):
            for K in (4, 8):
                for N in (round(1.25 * K), 2 * K, 5 * K):
                    S, omse, cfg, res = run_setting(wl, kind, K, N, rounds)
                    tag = f"{fname} {kind} K={K} N={N}" + (f" S={S}" if kind != "bernoulli" else " p=.2")
                    row = f"{tag:<34} {omse:>10.3g} {cfg[0] + '@' + format(cfg[1], 'g') + ' ' + format(cfg[2], '.0e'):<24}"
                    for s in SELECTORS:
                        q = res[s] / omse if omse > 0 else 1.0
                        ratios[s].append(q)
                        row += f"{q:>10.3f}"
                    lines.append(row)
                    print(row, f"[{time.time() - t0:.0f}s]", flush=True)
    lines.append("")
    lines.append(f"{'geometric mean':<70}" + "".join(f"{np.exp(np.mean(np.log(ratios[s]))):>10.3f}" for s in SELECTORS))
    lines.append(f"{'max':<70}" + "".join(f"{np.max(ratios[s]):>10.3f}" for s in SELECTORS))
    lines.append(f"{'settings within 1.25x':<70}" + "".join(f"{np.sum(np.array(ratios[s]) <= 1.25):>10d}" for s in SELECTORS))
    text = "\n".join(lines) + "\n"
    print(text)
    if out:
        with open(out, "w") as fh:
            fh.write(text)
    return ratios


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30, sys.argv[2] if len(sys.argv) > 2 else "results/selector_study/selector_study.txt")
