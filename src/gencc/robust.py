"""Screening returned outputs for Byzantine workers before a decode.

GCC's robust decode (``GCC(robust=True)``) calls :func:`screen_outliers` on
the returned outputs and decodes without the workers it flags.
"""

from __future__ import annotations

import numpy as np

from .kernels import Kernel, Sobolev2
from .ridge import KernelRidge

__all__ = ["screen_outliers", "standardised_loo"]


def standardised_loo(t, Y, kernel: Kernel | None = None, lam: float = 1e-8) -> np.ndarray:
    """Leave-one-out residuals standardised by their Gaussian-process variance.

    Parameters
    ----------
    t : array_like, shape (n,)
        Nodes (returned workers' points beta).
    Y : array_like, shape (n, m)
        Outputs.
    kernel : Kernel, default Sobolev2
    lam : float, default 1e-8

    Returns
    -------
    z : ndarray, shape (n, m)
        ``z = c / sqrt(a)``: the leave-one-out residual ``c / a`` times
        ``sqrt(a)``.

    Notes
    -----
    With the fit's coefficients c and ``a = diag(Z (Z^T G Z + n lam I)^{-1}
    Z^T)`` (:class:`gencc.ridge.KernelRidge`), the leave-one-out residual
    is ``r_i = c_i / a_i`` and, if y were a Gaussian process with kernel k
    (plus a white ridge term), ``Var r_i = sigma^2 / a_i``. So
    ``z_i = r_i sqrt(a_i) = c_i / sqrt(a_i)`` is the residual in units of
    its own standard deviation, which removes the dependence on the local
    node spacing (a straggler's hole, the dense ends of Chebyshev points).
    It is also the likelihood-ratio statistic for a single shift of y_i.
    Computed as ``sign(c) sqrt(c r)`` (c r = c^2 / a >= 0), without a.
    """
    fit = KernelRidge(Sobolev2() if kernel is None else kernel, lam).fit(t, Y)
    c, r = fit.coef_, fit.loo_residuals_
    return np.sign(c) * np.sqrt(np.abs(c * r))


def screen_outliers(t, Y, *, min_keep: int, max_remove: int, threshold: float = 8.0,
                    kernel: Kernel | None = None, lam: float = 1e-8) -> np.ndarray:
    """Flag outputs inconsistent with a smooth curve through the rest, one at a time.

    Parameters
    ----------
    t : array_like, shape (n,)
        Nodes of the returned workers.
    Y : array_like, shape (n, m)
        Their outputs (flattened).
    min_keep : int
        Never flag so many that fewer than ``min_keep`` remain.
    max_remove : int
        At most this many are flagged.
    threshold : float, default 8.0
        Flag while the largest score exceeds it (in robust standard
        deviations).
    kernel : Kernel, default Sobolev2
        A fixed kernel: the decoder's own selection is not run while
        screening, so a liar cannot steer it.
    lam : float, default 1e-8

    Returns
    -------
    flagged : ndarray of int, shape (n_flagged,)
        Row indices into ``t`` / ``Y``, in the order they were flagged.

    Notes
    -----
    Per round: z = :func:`standardised_loo` on the rows kept; per output
    coordinate j a robust scale ``s_j = 1.4826 median_i |z_ij|`` (the
    normal-consistent median absolute deviation about 0); per row the
    score ``q_i = sqrt(mean_j (z_ij / s_j)^2)``, a vector residual that
    pools all m coordinates, so an attack that moves every coordinate a
    little adds up. The row with the largest score is flagged if
    ``q_i > threshold``, and the fit is redone without it: one at a time,
    because a liar also inflates its neighbours' residuals (the curve
    bends towards it), and removing it first clears them.

    Measured limits (``scripts/byzantine_study.py``,
    ``docs/byzantine_study.txt``): honest leave-one-out residuals of the
    workloads here are 0.2-1 standard deviations of the outputs at
    N = 4K (holding a node out doubles the gap the curve must bridge), so
    attacks smaller than that (a bias of one standard deviation, a copy of
    a nearby worker, a smooth colluding curve) are not told apart from the
    honest curve, while gross ones (scaling by 10) are.
    """
    t = np.asarray(t, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64).reshape(t.size, -1)
    keep = np.ones(t.size, dtype=bool)
    flagged = []
    while len(flagged) < max_remove and keep.sum() > max(min_keep, 3):
        rows = np.flatnonzero(keep)
        z = standardised_loo(t[rows], Y[rows], kernel, lam)
        s = 1.4826 * np.median(np.abs(z), axis=0)
        ok = s > 0
        if not ok.any():
            break
        q = np.sqrt(np.mean((z[:, ok] / s[ok]) ** 2, axis=1))
        j = int(np.argmax(q))
        if not q[j] > threshold:
            break
        keep[rows[j]] = False
        flagged.append(int(rows[j]))
    return np.asarray(flagged, dtype=np.int64)
