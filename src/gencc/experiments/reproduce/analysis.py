"""Fitted log-log slopes and theory reference curves."""

from __future__ import annotations

import numpy as np


def fit_slope(x, y) -> float:
    """Least-squares slope of log(y) against log(x) over the finite positive
    points; NaN when fewer than three."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    if ok.sum() < 3:
        return float("nan")
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0])


def series(rows, group, x="N", y="mse"):
    """Rows grouped by the ``group`` columns: key -> sorted (x, y) points."""
    out = {}
    for r in rows:
        out.setdefault(tuple(r[g] for g in group), []).append((r[x], r.get(y)))
    return {k: sorted(v) for k, v in out.items()}


def slopes(rows, by):
    """Fitted slope of MSE against N per (``by``, scheme)."""
    table = []
    for (variant, scheme), pts in series(rows, (by, "scheme")).items():
        xs = [p[0] for p in pts]
        ys = [np.nan if p[1] is None else p[1] for p in pts]
        table.append({by: variant, "scheme": scheme, "slope": fit_slope(xs, ys),
                      "points": int(np.sum(np.isfinite(ys) & (np.asarray(ys) > 0)))})
    return table


def reference(Ns, anchor_N, anchor_y, shape):
    """A reference curve ``c * shape(N)`` through (anchor_N, anchor_y)."""
    Ns = np.asarray(Ns, dtype=np.float64)
    return anchor_y / shape(anchor_N) * np.array([shape(n) for n in Ns])
