"""Barycentric rational and polynomial interpolation as linear maps.

Used by the BACC (Berrut) and LCC (Lagrange) schemes.
"""

from __future__ import annotations

import numpy as np

__all__ = ["barycentric_matrix", "berrut_weights", "lagrange_weights"]


def berrut_weights(n: int) -> np.ndarray:
    """Berrut's weights ``(-1)^j`` for n nodes sorted increasingly.

    Berrut's first rational interpolant has no poles on the real line for any
    distinct nodes, and its sign pattern follows the nodes' rank [1]_.

    References
    ----------
    .. [1] J.-P. Berrut, "Rational functions for guaranteed and experimentally
       well-conditioned global interpolation", Comput. Math. Appl. 15 (1988).
    """
    return np.where(np.arange(n) % 2 == 0, 1.0, -1.0)


def lagrange_weights(nodes) -> np.ndarray:
    """Barycentric weights ``1 / prod_{k != j} (t_j - t_k)`` of polynomial interpolation.

    The differences are scaled by 4 / (max - min) (capacity scaling), which
    leaves the interpolant unchanged and keeps the product in range.
    """
    t = np.asarray(nodes, dtype=np.float64)
    if t.size == 1:
        return np.ones(1)
    c = 4.0 / (t.max() - t.min())
    diff = c * (t[:, None] - t[None, :])
    np.fill_diagonal(diff, 1.0)
    return 1.0 / np.prod(diff, axis=1)


def barycentric_matrix(nodes, weights, s) -> np.ndarray:
    """The map from values at ``nodes`` to the barycentric interpolant at ``s``.

    ``r(s) = sum_j w_j f_j / (s - t_j) / sum_j w_j / (s - t_j)``.

    Parameters
    ----------
    nodes : array_like, shape (n,)
    weights : array_like, shape (n,)
    s : array_like, shape (p,)

    Returns
    -------
    B : ndarray, shape (p, n)
        ``r(s) = B @ f``. Where ``s_i`` coincides with node ``j`` the row is
        the unit vector e_j, so no division by zero occurs.
    """
    t = np.asarray(nodes, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    s = np.asarray(s, dtype=np.float64).reshape(-1)
    diff = s[:, None] - t[None, :]
    hit = diff == 0
    safe = np.where(hit, 1.0, diff)
    C = w[None, :] / safe
    B = C / C.sum(axis=1, keepdims=True)
    rows = hit.any(axis=1)
    if rows.any():
        B[rows] = hit[rows].astype(np.float64)
    return B
