"""Timing shared by the benchmarks (import as ``from _timing import best_time``:
a benchmark run as ``python benchmarks/<name>.py`` has this folder on sys.path)."""

from __future__ import annotations

import time

import numpy as np


def best_time(fn, *, budget: float = 0.2, max_runs: int = 20) -> float:
    """Best wall time of ``fn()`` over calls that fit in ``budget`` seconds:
    at least one call, at most ``max_runs``."""
    best, spent, runs = np.inf, 0.0, 0
    while runs < max_runs and (runs == 0 or spent < budget):
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        best, spent, runs = min(best, dt), spent + dt, runs + 1
    return best
