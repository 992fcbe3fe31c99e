"""Measure where a systematic GCC code should put its N - K parity workers.

Workers 0..K-1 sit on the data points alpha_k (Chebyshev first kind) and
compute f(x_k) exactly; the question is where the N - K parity points go so
that the inputs whose systematic worker straggles are decoded best.

For each (K, N), S = 1..N-K random stragglers and seeded rounds, the script
reports the MSE of the missing (degraded) inputs only, for every placement
rule, and the MSE over all K inputs of the non-systematic GCC default
(Chebyshev second kind worker points) under the same straggler count.
The decoder is GCC's default (kernel by leave-one-out, lam_dec = 1e-8); the
encoder interpolates (lam_enc = 0), so a systematic scheme and a scheme whose
explicit worker points are alpha plus the parities decode identically.

"shipped" is ``gencc.points.parity_points`` (what ``worker_points=
"systematic"`` uses); the other rules are the alternatives it was chosen
over. The 600-round output is kept in results/systematic_placement/systematic_placement.txt.

Run: PYTHONPATH=src python benchmarks/systematic_placement.py [rounds]
"""

from __future__ import annotations

import sys
import time

import numpy as np

import gencc
from gencc.points import chebyshev1, chebyshev2, equispaced

CONFIGS = [(4, 5), (4, 6), (4, 8), (8, 10), (8, 12), (8, 16)]


def _greedy(alpha, P, score, sep=0.0, start=()):
    grid = np.linspace(-1, 1, 2001)
    grid = grid[np.min(np.abs(grid[:, None] - alpha[None, :]), axis=1) > 1e-3]
    if sep:  # keep sep x (the gap of [-1, alpha, 1] around p) away from every alpha
        edges = np.concatenate([[-1.0], alpha, [1.0]])
        i = np.clip(np.searchsorted(edges, grid) - 1, 0, edges.size - 2)
        gap = edges[i + 1] - edges[i]
        grid = grid[np.min(np.abs(grid[:, None] - alpha[None, :]), axis=1) >= sep * gap]
    par = list(start)[:P]
    grid = grid[np.min(np.abs(grid[:, None] - np.array(list(start) + [9.0])[None, :]), axis=1) > 1e-3]
    for _ in range(P - len(par)):
        best = min(grid, key=lambda p: score(np.array(par + [p])))
        par.append(float(best))
        grid = grid[np.abs(grid - best) > 1e-3]
    return np.sort(par)


def _holes(alpha, par):
    """For each alpha_k: distance between its neighbours once it is removed
    (an end point counts twice its one-sided distance: extrapolation)."""
    pts = np.sort(np.concatenate([alpha, par]))
    out = []
    for a in alpha:
        left, right = pts[pts < a], pts[pts > a]
        if left.size and right.size:
            out.append(right[0] - left[-1])
        else:
            out.append(2 * ((right[0] - a) if right.size else (a - left[-1])))
    return np.array(out)


def rule_cheb2(alpha, P):
    return chebyshev2(P)


def rule_equi(alpha, P):
    return equispaced(P)


def rule_inner_equi(alpha, P):
    """P equispaced points strictly inside [alpha_0, alpha_{K-1}]."""
    return np.linspace(alpha[0], alpha[-1], P + 2)[1:-1]


def rule_midgap(alpha, P):
    """Repeatedly the midpoint of the widest gap between consecutive points inside [alpha_0, alpha_{K-1}]."""
    pts = list(alpha)
    par = []
    for _ in range(P):
        s = np.sort(pts)
        g = np.diff(s)
        i = int(np.argmax(g - 1e-12 * np.abs(np.arange(g.size) - (g.size - 1) / 2)))  # ties: central
        m = 0.5 * (s[i] + s[i + 1])
        pts.append(m)
        par.append(m)
    return np.sort(par)


def _gaps_product(alpha, par):
    """For each alpha_k: (distance to the nearest other point on the left) x (on the right);
    the linear-interpolation error factor at alpha_k once its own worker is missing.
    A missing neighbour side counts as a distance of 2 (extrapolation)."""
    pts = np.sort(np.concatenate([alpha, par]))
    out = []
    for a in alpha:
        left, right = pts[pts < a], pts[pts > a]
        dl = a - left[-1] if left.size else 2.0
        dr = right[0] - a if right.size else 2.0
        out.append(dl * dr)
    return np.array(out)


def rule_product(alpha, P):
    """Greedy: each parity where it most lowers the mean interpolation factor d_left*d_right of a missing alpha_k."""
    return _greedy(alpha, P, lambda par: (lambda h: h.mean() + 1e-3 * h.max())(_gaps_product(alpha, par)))


def rule_minimax_hole(alpha, P):
    """Greedy: each parity where it most lowers the widest hole left by one missing systematic worker."""
    return _greedy(alpha, P, lambda par: (lambda h: h.max() + 1e-3 * h.sum())(_holes(alpha, par)))


def rule_snap(alpha, P):
    """GCC's default grid cheb2(N) with the K points nearest to alpha moved onto alpha
    (a minimum squared-distance matching); the N - K points left over are the parities."""
    from scipy.optimize import linear_sum_assignment

    grid = chebyshev2(alpha.size + P)
    _, cols = linear_sum_assignment((alpha[:, None] - grid[None, :]) ** 2)
    return np.delete(grid, cols)


def rule_angle(alpha, P):
    """Nested Chebyshev angles: first the K-1 angle midpoints cos(j pi / K) between consecutive alpha
    (central first), then the end points +-1, then the quarter angles cos((2m+1) pi / (4K)) next to alpha."""
    K = alpha.size
    mids = np.cos(np.arange(1, K) * np.pi / K)
    mids = mids[np.argsort(np.abs(mids), kind="stable")]
    quarter = np.cos((2 * np.arange(2 * K) + 1) * np.pi / (4 * K))
    quarter = quarter[np.argsort(np.abs(quarter), kind="stable")]
    cand = np.concatenate([mids, [-1.0, 1.0], quarter])
    return np.sort(cand[:P])


RULES = {
    "shipped": lambda alpha, P: gencc.points.parity_points(alpha, P),  # greedy, sep = 0.1
    "sep0.25": lambda alpha, P: gencc.points.parity_points(alpha, P, sep=0.25),
    "product": rule_product,  # the same greedy, no separation (near copies of x_k)
    "cheb2": rule_cheb2,
    "equi": rule_equi,
    "inner_equi": rule_inner_equi,
    "midgap": rule_midgap,
    "angle": rule_angle,
    "minimax_hole": rule_minimax_hole,
    "snap": rule_snap,
}


def make_fns():
    rng = np.random.default_rng(123)
    W1 = rng.normal(size=(784, 64)) / np.sqrt(784)
    b1 = rng.normal(size=64) * 0.1
    W2 = rng.normal(size=(64, 10)) / np.sqrt(64)
    mlp = lambda x: np.tanh(x @ W1 + b1) @ W2
    xsin = lambda x: x * np.sin(x)
    pools = {
        "xsinx": (xsin, rng.uniform(-3, 3, size=(2000, 4))),
        "mlp": (mlp, rng.uniform(0, 1, size=(2000, 784))),
    }
    return pools


def main(rounds=60):
    pools = make_fns()
    t0 = time.time()
    results = {}
    for K, N in CONFIGS:
        P = N - K
        alpha = chebyshev1(K)
        schemes = {}
        for name, rule in RULES.items():
            par = rule(alpha, P)
            beta = np.concatenate([alpha, par])
            if np.unique(np.round(beta, 9)).size != N:
                print(f"  {name} K={K} N={N}: collision, skipped")
                continue
            s = gencc.GCC(K, N, worker_points=beta)
            pos = np.searchsorted(s.beta, beta)  # slot -> sorted worker index
            schemes[name] = (s, pos)
        base = gencc.GCC(K, N)
        for fname, (f, pool) in pools.items():
            for S in range(1, P + 1):
                rng = np.random.default_rng(1000 * K + 10 * N + S)
                acc = {n: [0.0, 0] for n in schemes}
                acc_sys_all = {n: [0.0, 0] for n in schemes}
                bacc = [0.0, 0]
                for _ in range(rounds):
                    batch = rng.choice(pool.shape[0], size=K, replace=False)
                    Xb = pool[batch]
                    truth = f(Xb)
                    slow = rng.choice(N, size=S, replace=False)
                    keep = np.setdiff1d(np.arange(N), slow)
                    missing = slow[slow < K]
                    for n, (s, pos) in schemes.items():
                        Y = f(s.encode(Xb))
                        ret = pos[keep]
                        est = s.decode(Y[ret], ret)
                        est[np.setdiff1d(np.arange(K), missing)] = truth[np.setdiff1d(np.arange(K), missing)]
                        e = (est[missing] - truth[missing]) ** 2
                        acc[n][0] += e.sum()
                        acc[n][1] += e.size
                        acc_sys_all[n][0] += ((est - truth) ** 2).sum()
                        acc_sys_all[n][1] += est.size
                    Yb = f(base.encode(Xb))
                    eb = (base.decode(Yb[keep], keep) - truth) ** 2
                    bacc[0] += eb.sum()
                    bacc[1] += eb.size
                row = {n: (a[0] / a[1] if a[1] else float("nan")) for n, a in acc.items()}
                row_all = {n: a[0] / a[1] for n, a in acc_sys_all.items()}
                results[(fname, K, N, S)] = (row, row_all, bacc[0] / bacc[1])
                print(f"{fname:6s} K={K} N={N:2d} S={S}: " + " ".join(f"{n}={v:.3g}" for n, v in row.items())
                      + f" | shipped_all={row_all['shipped']:.3g} gcc_default_all={bacc[0] / bacc[1]:.3g}"
                      + f"  [{time.time() - t0:.0f}s]", flush=True)
    # mean rank and geometric-mean ratio to the best rule, per function
    for fname in pools:
        keys = [k for k in results if k[0] == fname]
        ratios = {n: [] for n in RULES}
        for k in keys:
            row = results[k][0]
            b = min(v for v in row.values() if np.isfinite(v))
            for n, v in row.items():
                ratios[n].append(v / b)
        for K, N in CONFIGS:
            ks = [k for k in keys if k[1:3] == (K, N)]
            deg = {n: np.mean([results[k][0][n] for k in ks]) for n in RULES}
            alt = min((n for n in RULES if n != "shipped"), key=deg.get)
            sys_all = np.mean([results[k][1]["shipped"] for k in ks])
            gcc_all = np.mean([results[k][2] for k in ks])
            print(f"  {fname} K={K} N={N} mean over S: degraded shipped={deg['shipped']:.3g} "
                  f"best-other {alt}={deg[alt]:.3g} cheb2={deg['cheb2']:.3g} | all-inputs shipped="
                  f"{sys_all:.3g} gcc_default={gcc_all:.3g}")
        print(fname, "geo-mean ratio to best:",
              " ".join(f"{n}={np.exp(np.mean(np.log(r))):.3f}(n={len(r)})" for n, r in ratios.items() if r))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 60)
