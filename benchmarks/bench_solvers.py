"""Dense against linear-time kernel ridge solvers, as ratios to one matrix product.

Run with one BLAS thread::

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_solvers.py [--quick] [--max-n 65536] [--gcc-max-n 16384]

(about 100 s with the defaults on one core; ``--gcc-max-n 65536`` adds about 30 s).

Prints two tables. (1) A fixed kernel (Sobolev2 and Matern 5/2, lam = 1e-8):
fit on n nodes plus predict at K = n/4 targets, m = 10 outputs, dense
(Cholesky, up to n = 2,048) and fast (state-space, n = 16 ... max-n).
(2) GCC's default decode, ``gencc.GCC(K, N).decode(Y, returned)`` with
K = N/4, N/8 random stragglers, m = 10, and the fitted slope of its time
against N. Every time is the best of several runs and is also given as a
ratio to one float64 product ``(K, n) @ (n, m)`` of the decode's shape,
measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import gencc
from gencc import ridge
from gencc.ridge import common as ridge_common
from gencc.kernels import Matern, Sobolev2
from gencc.ridge import KernelRidge
from _timing import best_time


_MATMUL = {}


def matmul_time(K, n, m, rng):
    """Best time of one float64 product (K, n) @ (n, m) (the operands' values do not matter)."""
    if (K, n, m) not in _MATMUL:
        A, B = np.full((K, n), 0.5), rng.normal(size=(n, m))  # (K, n) is 8.6 GB at n = 65,536
        _MATMUL.clear()
        _MATMUL[K, n, m] = best_time(lambda: A @ B, budget=0.1, max_runs=200)
    return _MATMUL[K, n, m]


def fixed_kernel(ns, dense_max, m, rng):
    print("\n(1) fixed kernel, lam = 1e-8: fit + predict at K = n/4 targets, m = %d" % m)
    print(f"{'kernel':>10} {'n':>6} {'matmul us':>10} {'dense ms':>10} {'fast ms':>10} "
          f"{'dense/mm':>10} {'fast/mm':>10} {'dense/fast':>10}")
    for kernel in (Sobolev2(), Matern(0.5, 2.5)):
        for n in ns:
            t = gencc.points.make_points("chebyshev2", n)
            s = gencc.points.make_points("chebyshev1", max(n // 4, 1))
            Y = np.sin(3 * t)[:, None] * rng.normal(size=(1, m))
            mm = matmul_time(s.size, n, m, rng)
            td = np.nan
            if n <= dense_max:
                td = best_time(lambda: KernelRidge(kernel, 1e-8, solver="dense").fit(t, Y).predict(s), budget=0.3)
            tf = best_time(lambda: KernelRidge(kernel, 1e-8, solver="fast").fit(t, Y).predict(s), budget=0.3)
            print(f"{kernel.name:>10} {n:>6} {mm * 1e6:>10.1f} {td * 1e3:>10.3f} {tf * 1e3:>10.3f} "
                  f"{td / mm:>10.0f} {tf / mm:>10.0f} {td / tf:>10.2f}")


def gcc_default(Ns, dense_max, m, rng):
    print("\n(2) GCC default decode (16 candidates, gap criterion, mix of 3), K = N/4, N/8 stragglers, m = %d" % m)
    print(f"{'N':>6} {'n':>6} {'matmul us':>10} {'dense ms':>10} {'auto ms':>10} {'dense/mm':>10} {'auto/mm':>10}")
    rows = []
    for N in Ns:
        K = max(N // 4, 1)
        scheme = gencc.GCC(K, N)
        # smooth worker outputs f(u_enc(beta)) without building the (N, K) encoder
        # (8.6 GB at N = 65,536): the decode's cost does not depend on where Y came from
        phase = rng.uniform(0, 2 * np.pi, size=m)
        Y = np.sin(3 * scheme.beta[:, None] + phase) * (1 + scheme.beta[:, None] ** 2)
        returned = np.setdiff1d(np.arange(N), rng.choice(N, N // 8, replace=False))
        mm = matmul_time(K, returned.size, m, rng)
        ta = best_time(lambda: scheme.decode(Y[returned], returned), budget=0.5, max_runs=10)
        td = np.nan
        if N <= dense_max:
            saved = ridge_common.FAST_MIN_N, ridge_common.FAST_MIN_N_SELECT
            ridge_common.FAST_MIN_N = ridge_common.FAST_MIN_N_SELECT = 10**12
            try:
                td = best_time(lambda: scheme.decode(Y[returned], returned), budget=0.5, max_runs=5)
            finally:
                ridge_common.FAST_MIN_N, ridge_common.FAST_MIN_N_SELECT = saved
        rows.append((N, ta))
        print(f"{N:>6} {returned.size:>6} {mm * 1e6:>10.1f} {td * 1e3:>10.2f} {ta * 1e3:>10.2f} "
              f"{td / mm:>10.0f} {ta / mm:>10.0f}")
    big = [(N, ta) for N, ta in rows if N >= 256]
    if len(big) >= 2:
        slope = np.polyfit(np.log([r[0] for r in big]), np.log([r[1] for r in big]), 1)[0]
        print(f"slope of log(decode time) against log(N), N >= 256: {slope:.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-n", type=int, default=65536)
    ap.add_argument("--gcc-max-n", type=int, default=16384,
                    help="largest N of the GCC decode sweep (65,536 adds about 30 s)")
    ap.add_argument("--quick", action="store_true", help="n up to 4,096 only")
    args = ap.parse_args()
    if os.environ.get("OPENBLAS_NUM_THREADS") != "1":
        print("warning: set OPENBLAS_NUM_THREADS=1 for one BLAS thread")
    max_n = 4096 if args.quick else args.max_n
    rng = np.random.default_rng(0)
    print(f"FAST_MIN_N = {ridge.FAST_MIN_N}, FAST_MIN_N_SELECT = {ridge.FAST_MIN_N_SELECT}, "
          f"compiled recursions: {gencc.statespace.USE_COMPILED}")
    t_warm = time.perf_counter()  # a one-off: numba loads (or compiles) the recursions on first use
    warm = gencc.GCC(16, 64)
    warm.decode(np.sin(warm.beta[:60, None]), np.arange(60))
    print(f"warm-up (compiled recursions loaded or compiled): {time.perf_counter() - t_warm:.2f} s")
    t0 = time.perf_counter()
    ns = [n for n in (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 16384, 65536) if n <= max_n]
    fixed_kernel(ns, 2048, 10, rng)
    Ns = [N for N in (16, 64, 256, 1000, 4096, 16384, 65536) if N <= min(max_n, args.gcc_max_n)]
    gcc_default(Ns, 1000, 10, rng)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
