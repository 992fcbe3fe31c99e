"""What every ridge solver shares: the floors and crossovers, the choice of solver, the null space,
and the solution type a solver hands to :class:`~gencc.ridge.KernelRidge`.

The crossovers (``FAST_MIN_N``, ``FAST_MIN_N_SELECT``) and the filters' memory budget
(``FAST_BATCH_BYTES``) are read from this module at call time, so a benchmark or a test may
set them here.
"""

from __future__ import annotations

import numpy as np

from ..kernels import Kernel
from .. import statespace as _statespace
from ..statespace import has_state_space

__all__ = ["SOLVERS", "FAST_MIN_N", "FAST_MIN_N_SELECT", "FAST_BATCH_BYTES"]

SOLVERS = ("auto", "dense", "fast")

# Relative ridge floor: n*lam is never below this times the mean eigenvalue of
# the penalised Gram matrix, so a requested lam = 0 is an interpolant up to
# round-off rather than a singular solve.
_RIDGE_FLOOR = 1e-13
# Fewest nodes at which solver="auto" takes the linear-time path: one kernel
# (KernelRidge, ridge_path), and select_ridge, where one batch of filters
# serves every candidate. Measured crossovers with the compiled (numba)
# recursions (CPU time, one BLAS thread, lam = 1e-8, m = 10): one fit +
# predict at n/4 points, Matern 5/2 between n = 20 and 24, Sobolev2 faster on
# the fast path from the smallest n measured, 12 (2x; 2.4x at 48); GCC's
# default decode (16 candidates) faster on the fast path from n = 7 (3x; 14x
# at 42).
# With the NumPy recursions alone (numba missing or GENCC_NO_NUMBA set) they
# were 384 and 48, the values used then.
FAST_MIN_N, FAST_MIN_N_SELECT = (24, 8) if _statespace.USE_COMPILED else (384, 48)
# Memory budget (bytes) of one batch of state-space filters.
FAST_BATCH_BYTES = 256e6


def _null_dim(Q1) -> int:
    return 0 if Q1 is None else Q1.shape[1]


def _null_space(kernel: Kernel, t: np.ndarray):
    """QR of the null-space basis: (Q1, R, Z) with Z spanning T's complement."""
    q = min(kernel.null_degree + 1, t.size)
    if q <= 0:
        return None, None, None
    T = np.vander(t, q, increasing=True)
    Q, R = np.linalg.qr(T, mode="complete")
    return Q[:, :q], R[:q], Q[:, q:]


def _check_solver(solver):
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")


def _distinct_finite(t: np.ndarray) -> bool:
    """Whether the nodes are finite and distinct (what the linear-time solver needs of them)."""
    ts = np.sort(t)
    return bool(np.all(np.isfinite(ts)) and np.all(np.diff(ts) > 0))


def _fast_applies(kernel: Kernel, t: np.ndarray, nodes_ok: bool | None = None) -> bool:
    """Whether the linear-time solver can fit ``kernel`` on nodes ``t`` (``nodes_ok``:
    :func:`_distinct_finite` of t, when the caller already knows it)."""
    if not has_state_space(kernel) or t.size < kernel.null_degree + 2:
        return False
    return _distinct_finite(t) if nodes_ok is None else nodes_ok


def _use_fast(kernel: Kernel, t: np.ndarray, solver: str, min_n: int | None = None,
              nodes_ok: bool | None = None) -> bool:
    _check_solver(solver)
    if solver == "dense":
        return False
    ok = _fast_applies(kernel, t, nodes_ok)
    if solver == "fast":
        if not ok:
            raise ValueError(
                f"solver='fast' needs a Sobolev2 or Matern(nu in 0.5, 1.5, 2.5) kernel and distinct nodes "
                f"(at least 3 for Sobolev2); got {kernel} on {t.size} nodes"
            )
        return True
    return ok and t.size >= (FAST_MIN_N if min_n is None else min_n)


class _Solution:
    """One kernel's solution at one ridge: everything a fitted :class:`KernelRidge` exposes.

    Attributes
    ----------
    t : ndarray, shape (n,)
        Nodes in the caller's order.
    lam : float
        Effective ridge (``n lam`` = the noise variance of the state-space form).
    predict : callable
        ``predict(s)`` for ``s`` of shape (K,) returns shape (K, m).
    c : ndarray, shape (n, m)
        Kernel coefficients.
    a : ndarray, shape (n,)
        ``diag(A)`` (``c / a`` are the leave-one-out residuals).
    null_coef : ndarray, shape (q, m)

    ``c``, ``a`` and ``null_coef`` may be given as callables (``ca() -> (c, a)``,
    ``null_coef(c)``); they are then computed on first use, so a fit that is
    only used to predict never pays for them.
    """

    def __init__(self, t, lam, predict, ca, null_coef):
        self.t, self.lam, self.predict = t, lam, predict
        self._ca, self._null = ca, null_coef

    @property
    def c(self):
        if callable(self._ca):
            self._ca = self._ca()
        return self._ca[0]

    @property
    def a(self):
        self.c
        return self._ca[1]

    @property
    def null_coef(self):
        if callable(self._null):
            self._null = self._null(self.c)
        return self._null
