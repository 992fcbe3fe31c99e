"""Kernel ridge regression of vector-valued data on scalar nodes in [-1, 1].

This is the single regression engine behind the GCC and LeTCC encoders and
decoders. It knows nothing of workers or stragglers.

Two solvers sit behind one interface: a dense one (Cholesky or one
eigendecomposition per kernel, O(n^3); every kernel, and the reference) and a
linear-time one for the kernels with exact state-space forms (Sobolev2 and
Matern 1/2, 3/2, 5/2; :mod:`gencc.statespace`). ``solver="auto"`` uses the
linear-time one for those kernels from ``FAST_MIN_N`` nodes on. Its per-node
recursions run compiled (numba) where numba imports, in NumPy otherwise
(:data:`gencc.statespace.USE_COMPILED`); the crossovers depend on which.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy import linalg

from ._validation import check_choice, check_nonnegative, check_points, check_targets
from .errors import IllConditionedWarning, NotFittedError
from .kernels import Kernel, Sobolev2
from . import statespace as _statespace
from .statespace import TwoFilter, gauss_markov, has_state_space

__all__ = ["KernelRidge", "select_ridge", "RidgeSelection", "DEFAULT_RIDGE_GRID", "hole_blocks", "hole_residuals",
           "hole_rmse", "ridge_path", "CRITERIA", "SOLVERS", "FAST_MIN_N", "FAST_MIN_N_SELECT"]

CRITERIA = ("loo", "gcv", "gap")
SOLVERS = ("auto", "dense", "fast")

# Relative ridge floor: n*lam is never below this times the mean eigenvalue of
# the penalised Gram matrix, so a requested lam = 0 is an interpolant up to
# round-off rather than a singular solve.
_RIDGE_FLOOR = 1e-13
# Relative candidates for n*lam in the automatic selection (times the mean
# eigenvalue of the penalised Gram matrix).
DEFAULT_RIDGE_GRID = np.logspace(-12, 0, 25)
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
_FAST_BATCH_BYTES = 256e6


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


def _cubic_sums(t, W):
    """``sum_j W_j |t_i - t_j|^3`` for sorted ``t`` (n,), ``W`` (n, m): shape (n, m), O(n m).

    Expands ``(t_i - t_j)^3`` and accumulates prefix sums of ``W_j t_j^k``
    (k = 0..3) from the left and from the right; ``t`` is centred first.
    """
    t = t - 0.5 * (t[0] + t[-1])
    tp = np.stack([np.ones_like(t), t, t * t, t**3])[:, :, None]  # (4, n, 1)
    Wt = tp * W[None]  # W_j t_j^k
    left = np.cumsum(Wt, axis=1) - Wt  # sum over j < i
    right = np.cumsum(Wt[:, ::-1], axis=1)[:, ::-1] - Wt  # sum over j > i
    ti = tp[1]
    coef = (ti**3, -3 * ti**2, 3 * ti, -1.0)
    out = np.zeros_like(W)
    for k in range(4):
        out = out + coef[k] * (left[k] - right[k])
    return out


def _sobolev_scale(kernel: Kernel, ts):
    """Mean eigenvalue ``trace(Z^T G Z) / (n - 2)`` of the Sobolev2 Gram matrix in O(n).

    ``diag(G) = 0`` and ``Z Z^T = I - Q1 Q1^T`` give ``trace(Z^T G Z) =
    -trace(Q1^T G Q1) = -trace((T^T G T)(T^T T)^{-1})`` with ``T = [1, t]``;
    ``G T`` comes from :func:`_cubic_sums`.
    """
    T = np.vander(ts, 2, increasing=True)
    GT = _cubic_sums(ts, T) / (12.0 * kernel.scale**3)
    tr = -np.trace(np.linalg.solve(T.T @ T, T.T @ GT))
    return max(tr / (ts.size - 2), np.finfo(float).tiny)


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


class _DenseSolver:
    """Dense kernel ridge regression of one kernel on nodes ``t``: O(n^3).

    Holds the Gram matrix ``G``, the null-space QR and ``M0 = Z^T G Z``;
    :meth:`solve` factorises ``M0 + n lam I`` by Cholesky (one ridge),
    :meth:`path` eigendecomposes ``M0`` once for many ridges.
    """

    def __init__(self, kernel: Kernel, t, Y2):
        self.kernel, self.t, self.Y2 = kernel, t, Y2
        self.G = kernel(t, t)
        self.Q1, self.R, self.Z = _null_space(kernel, t)
        self.M0 = self.G if self.Z is None else self.Z.T @ self.G @ self.Z
        self.dim = self.M0.shape[0]

    def _solution(self, c, a, lam_eff):
        Q1, R, Y2, G, kernel, t = self.Q1, self.R, self.Y2, self.G, self.kernel, self.t
        b = np.zeros((0, Y2.shape[1])) if Q1 is None else linalg.solve_triangular(R, Q1.T @ (Y2 - G @ c))
        q = b.shape[0]

        def predict(s):
            out = kernel(s, t) @ c
            return out + np.vander(s, q, increasing=True) @ b if q else out

        return _Solution(t, lam_eff, predict, (c, a), b)

    def solve(self, lam) -> _Solution:
        """Cholesky solve at ridge ``lam`` (raised to the relative floor)."""
        n, Y2 = self.t.size, self.Y2
        if self.dim == 0:  # as many nodes as null-space functions: pure polynomial interpolation
            return self._solution(np.zeros_like(Y2), np.zeros(n), float(lam))
        scale = max(np.trace(self.M0) / self.dim, np.finfo(float).tiny)
        nlam = max(n * float(lam), _RIDGE_FLOOR * scale)
        L, nlam = self._cholesky(nlam, scale)
        Z = self.Z
        w = linalg.cho_solve((L, True), Y2 if Z is None else Z.T @ Y2)
        c = w if Z is None else Z @ w
        V = linalg.solve_triangular(L, np.eye(self.dim) if Z is None else Z.T, lower=True)
        a = np.einsum("ij,ij->j", V, V)
        return self._solution(c, a, nlam / n)

    def _cholesky(self, nlam, scale):
        M0, dim = self.M0, self.dim
        # Cholesky fails only when round-off makes the shifted matrix indefinite:
        # raise the ridge geometrically until it succeeds.
        for attempt in range(8):
            try:
                return linalg.cholesky(M0 + nlam * np.eye(dim), lower=True), nlam
            except linalg.LinAlgError:
                if attempt == 7:
                    raise
            nlam = max(nlam * 100.0, 1e-12 * scale)
            warnings.warn(
                f"{self.kernel} Gram matrix on {dim} nodes is ill-conditioned; "
                f"raising the ridge n*lam to {nlam:.3g}",
                IllConditionedWarning,
                stacklevel=5,
            )
        raise AssertionError("unreachable")  # pragma: no cover

    def path(self, lams, *, relative, targets=None, blocks=None):
        """Rows of :func:`ridge_path` from one eigendecomposition (see there)."""
        t, Y2, G, Q1, R, Z, kernel = self.t, self.Y2, self.G, self.Q1, self.R, self.Z, self.kernel
        n = t.size
        if self.dim == 0:
            return []
        sigma, U = np.linalg.eigh((self.M0 + self.M0.T) / 2)
        sigma = np.clip(sigma, 0.0, None)
        W = U if Z is None else Z @ U
        WY = W.T @ Y2
        W2 = W * W
        mean_eig = max(sigma.mean(), np.finfo(float).tiny)
        Kt = Vt = None
        if targets is not None:
            s = np.asarray(targets, dtype=np.float64).reshape(-1)
            Kt = kernel(s, t)
            Vt = np.vander(s, _null_dim(Q1), increasing=True) if Q1 is not None else None
        out = []
        for lam in lams:
            nlam = max(float(lam) * mean_eig if relative else n * float(lam), _RIDGE_FLOOR * mean_eig)
            g = 1.0 / (sigma + nlam)
            c = W @ (g[:, None] * WY)
            a = W2 @ g
            row = {"lam": nlam / n, "c": c, "a": a}
            if targets is not None:
                pred = Kt @ c
                if Q1 is not None:
                    pred = pred + Vt @ linalg.solve_triangular(R, Q1.T @ (Y2 - G @ c))
                row["pred"] = pred
            if blocks:
                A = (W * g) @ W.T
                res = np.empty((len(blocks), Y2.shape[1]))
                for i, (j, B) in enumerate(blocks):
                    k = int(np.flatnonzero(B == j)[0])
                    try:
                        res[i] = np.linalg.solve(A[np.ix_(B, B)], c[B])[k]
                    except np.linalg.LinAlgError:
                        res[i] = np.inf
                row["block"] = res
            row["solution"] = (lambda c=c, a=a, lam=nlam / n: self._solution(c, a, lam))
            out.append(row)
        return out


class _FastSolver:
    """Linear-time kernel ridge regression by state-space two-filter smoothing.

    Serves a batch of kernels with state-space forms on the same nodes (any
    order, distinct) and targets; see :mod:`gencc.statespace` for the
    algorithm. Every quantity of the dense solver is exact here: ``c``,
    ``a = diag(A)``, predictions, leave-block-out residuals and the scale
    (mean eigenvalue of ``Z^T G Z``; 1 for Matern, O(n) prefix sums for
    Sobolev2).
    """

    def __init__(self, t, Y2):
        self.t, self.Y2 = t, Y2
        self.order = np.argsort(t, kind="stable")
        self.rank = np.empty_like(self.order)
        self.rank[self.order] = np.arange(t.size)
        self.sorted = bool(np.all(self.order[1:] > self.order[:-1]))  # given in sorted order: no permutations
        self.ts = t if self.sorted else t[self.order]
        self.Ys = np.ascontiguousarray(Y2 if self.sorted else Y2[self.order])
        self._scales = {}

    def scale(self, kernel) -> float:
        """Mean eigenvalue of the penalised Gram matrix ``Z^T G Z``."""
        if kernel not in self._scales:
            self._scales[kernel] = _sobolev_scale(kernel, self.ts) if type(kernel) is Sobolev2 else 1.0
        return self._scales[kernel]

    def nlam(self, kernel, lam, relative) -> float:
        n = self.t.size
        if not relative and kernel not in self._scales and type(kernel) is Sobolev2:
            # the scale (an O(n) pass, but the largest cost of a small fixed-ridge fit) only
            # matters when the floor binds; it is at most ||Z^T G Z||_2 <= n max|G_ij| =
            # n span^3 / (12 scale^3), so above that bound's floor n*lam is the answer
            span = float(self.ts[-1] - self.ts[0])
            if n * float(lam) >= _RIDGE_FLOOR * n * span**3 / (12.0 * kernel.scale**3):
                return n * float(lam)
        sc = self.scale(kernel)
        return max(float(lam) * sc if relative else n * float(lam), _RIDGE_FLOOR * sc)

    def sorted_blocks(self, blocks):
        """Blocks (original indices) as (target rank, first rank, last rank); None if one is not contiguous."""
        out = []
        for j, B in blocks:
            r = self.rank[np.asarray(B)]
            lo, hi = int(r.min()), int(r.max())
            if hi - lo + 1 != len(B):
                return None
            out.append((int(self.rank[j]), lo, hi))
        return np.array(out, dtype=np.int64).reshape(-1, 3)

    def _loo(self, tf):
        n = self.t.size
        i = np.arange(n)
        mu, v = tf.query(self.ts, i - 1, i + 1)
        loo = self.Ys[None] - mu
        a = 1.0 / (v + tf.sigma2[:, None])
        c = a[..., None] * loo
        if self.sorted:
            return c, a
        return c[:, self.rank], a[:, self.rank]  # back to the caller's order

    def _null_coef(self, kernel, c, nlam):
        if kernel.null_degree < 0:
            return np.zeros((0, c.shape[1]))
        cs = c[self.order]
        Gc = _cubic_sums(self.ts, cs) / (12.0 * kernel.scale**3)
        T = np.vander(self.ts, 2, increasing=True)
        return np.linalg.lstsq(T, self.Ys - nlam * cs - Gc, rcond=None)[0]

    def _solution(self, kernel, tf1, ca, nlam):
        """``tf1``: the one-model TwoFilter, or a callable returning it."""
        ts = self.ts
        get = tf1 if callable(tf1) else (lambda: tf1)

        def predict(s):
            iL = np.searchsorted(ts, s, side="right") - 1
            return get().query(s, iL, iL + 1)[0][0]

        def loo():
            c, a = self._loo(get())
            return c[0], a[0]

        return _Solution(self.t, nlam / self.t.size, predict, loo if ca is None else ca,
                         lambda c: self._null_coef(kernel, c, nlam))

    def batches(self, models):
        """Split ``models`` (list of (kernel, nlam)) into batches within the memory budget."""
        per = 2 * self.t.size * 3 * (self.Y2.shape[1] + 3) * 8.0
        size = max(1, int(_FAST_BATCH_BYTES // per))
        for i in range(0, len(models), size):
            yield models[i : i + size]

    def path(self, models, *, targets=None, blocks=None, loo=True):
        """Yield one row per (kernel, nlam) in ``models``, as :func:`ridge_path`'s rows.

        ``blocks`` must come from :meth:`sorted_blocks`. ``loo=False`` skips
        ``c`` and ``a`` (the row's ``solution()`` still builds them).
        """
        ts = self.ts
        for ib, batch in enumerate(self.batches(models)):
            tf = TwoFilter([gauss_markov(k) for k, _ in batch], [nl for _, nl in batch], ts, self.Ys)
            c = a = pred = res = None
            if loo:
                c, a = self._loo(tf)
            if targets is not None:
                s = np.asarray(targets, dtype=np.float64).reshape(-1)
                iL = np.searchsorted(ts, s, side="right") - 1
                pred = tf.query(s, iL, iL + 1)[0]
            if blocks is not None and len(blocks):
                j, lo, hi = blocks.T
                mu, _ = tf.query(ts[j], lo - 1, hi + 1)
                res = self.Ys[j][None] - mu
            for b, (kernel, nlam) in enumerate(batch):
                row = {"lam": nlam / ts.size, "kernel": kernel, "batch": ib}
                if loo:
                    row["c"], row["a"] = c[b], a[b]
                if pred is not None:
                    row["pred"] = pred[b]
                if res is not None:
                    row["block"] = res[b]
                row["solution"] = (lambda lazy=False, b=b, tf=tf, kernel=kernel, nlam=nlam, row=row:
                                   self._materialise(tf, b, kernel, nlam, row, lazy))
                yield row

    def _materialise(self, tf, b, kernel, nlam, row, lazy=False):
        """Model b of the batch as a solution; ``lazy``: select it from the batch on first use
        (the solution then keeps the whole batch alive)."""
        ca = (row["c"], row["a"]) if "c" in row else None
        if not lazy:
            return self._solution(kernel, tf.select(b), ca, nlam)
        box = []

        def get():
            if not box:
                box.append(tf.select(b))
            return box[0]

        return self._solution(kernel, get, ca, nlam)

    def solve(self, kernel, lam) -> _Solution:
        """One kernel at one ridge ``lam`` (raised to the relative floor)."""
        row = next(self.path([(kernel, self.nlam(kernel, lam, False))]))
        return row["solution"]()


class KernelRidge:
    """Kernel ridge regression ``min (1/n) sum_i |u(t_i) - y_i|^2 + lam |u|_H^2``.

    Parameters
    ----------
    kernel : Kernel
        The kernel; its null space (if any) is left unpenalised.
    lam : float
        Ridge, >= 0. ``lam = 0`` interpolates (a tiny relative floor keeps the
        solve finite).
    solver : {"auto", "dense", "fast"}, default "auto"
        ``"dense"``: Cholesky of the Gram matrix, O(n^3), any kernel (the
        reference). ``"fast"``: the linear-time state-space solver
        (:mod:`gencc.statespace`), for Sobolev2 and Matern 1/2, 3/2, 5/2 on
        distinct nodes; an error otherwise. ``"auto"``: fast where it applies
        and n >= ``FAST_MIN_N``, dense otherwise.

    Attributes
    ----------
    nodes_ : ndarray, shape (n,)
    coef_ : ndarray, shape (n, m)
        Kernel coefficients c.
    null_coef_ : ndarray, shape (q, m)
        Null-space polynomial coefficients b (q = 0 for positive definite kernels).
    loo_residuals_ : ndarray, shape (n, m)
        Closed-form leave-one-out residuals ``y_i - u_{-i}(t_i)``.
    loo_mse_ : float
        Mean of ``loo_residuals_**2``: the fit's own estimate of its
        prediction error at an unseen node.
    lam_effective_ : float
        The ridge actually used (larger than ``lam`` only if the floor or an
        ill-conditioning fix raised it).
    solver_ : str
        ``"dense"`` or ``"fast"``: the solver that produced the fit.

    Notes
    -----
    With Gram matrix ``G = k(t, t)``, null-space basis ``T = Q1 R`` and ``Z``
    an orthonormal basis of ``range(T)``'s complement, the representer theorem
    gives ``u(s) = k(s, t) c + p(s) b`` with ``c = Z (Z^T G Z + n lam I)^{-1} Z^T y``
    and ``b = R^{-1} Q1^T (y - G c)``. The residual is ``y - u(t) = n lam c`` and
    ``diag(I - H) = n lam a`` with ``a = diag(Z (Z^T G Z + n lam I)^{-1} Z^T)``,
    so the leave-one-out residual is ``c_i / a_i`` [1]_, finite even as lam -> 0.
    One Cholesky factorisation serves all m output coordinates.

    The fast solver computes the same fit as the posterior mean of the
    kernel's Gauss-Markov process observed with noise variance ``n lam``
    (the cubic smoothing spline as a state-space smoother for Sobolev2 [2]_
    [3]_; Matern as in [4]_), in O(n m) by two Kalman filters: it predicts
    ``u_{-i}(t_i)`` and its variance ``v_{-i}`` directly, so
    ``a_i = 1 / (v_{-i} + n lam)`` and ``c_i = a_i (y_i - u_{-i}(t_i))`` (the
    hat-matrix diagonal in linear time, as [5]_ for splines), and ``predict``
    at K points costs O((n + K) m) with no K x n kernel matrix. ``coef_`` and
    ``null_coef_`` are exact there too (``null_coef_`` by O(n) prefix sums of
    ``|t_i - t_j|^3``) and, like the leave-one-out residuals, computed on
    first access. Measured agreement with the dense path (tests): 1e-10 or
    better for predictions and leave-one-out residuals at lam = 1e-8 on up to
    1,500 Chebyshev nodes; ``coef_`` and ``null_coef_`` to 1e-7, the dense
    path's own round-off (cond * eps) near interpolation. At the ridge floor
    (lam = 0) the dense Cholesky may fail and raise the ridge (with an
    :class:`IllConditionedWarning`); the fast path never needs to, so there
    the two may differ in ``lam_effective_`` and in leave-one-out residuals,
    which the dense path cannot resolve.

    References
    ----------
    .. [1] G. Wahba, *Spline Models for Observational Data*, SIAM, 1990, ch. 4.
    .. [2] C. H. Reinsch, "Smoothing by spline functions", Numer. Math. 10
       (1967) 177-183.
    .. [3] M. R. Wecker and C. F. Ansley, "The signal extraction approach to
       nonlinear regression and spline smoothing", JASA 78 (1983) 81-89.
    .. [4] J. Hartikainen and S. Sarkka, "Kalman filtering and smoothing
       solutions to temporal Gaussian process regression models", MLSP 2010.
    .. [5] M. F. Hutchinson and F. R. de Hoog, "Smoothing noisy data with
       spline functions", Numer. Math. 47 (1985) 99-106.

    Examples
    --------
    >>> from gencc.kernels import Sobolev2
    >>> t = np.linspace(-1, 1, 5)
    >>> fit = KernelRidge(Sobolev2(), 0.0).fit(t, t**2)
    >>> bool(np.allclose(fit.predict(t), t**2))
    True
    """

    def __init__(self, kernel: Kernel, lam: float = 0.0, *, solver: str = "auto"):
        _check_solver(solver)
        self.kernel = kernel
        self.lam = lam
        self.solver = solver

    def fit(self, t, Y) -> "KernelRidge":
        """Fit to nodes ``t`` (shape (n,)) and targets ``Y`` (shape (n, m) or (n,)).

        Raises
        ------
        TypeError
            ``kernel`` is not a :class:`gencc.kernels.Kernel`.
        ValueError
            ``lam`` is negative or not finite; ``t`` is not a finite vector
            of at least one node; ``Y`` has not one finite row per node.
        """
        self._check_params()
        t = check_points(t, "t")
        return self._fit(t, check_targets(Y, t.size))

    def _fit(self, t, Y) -> "KernelRidge":
        """:meth:`fit` on arguments already checked (t a finite vector, Y finite with t.size rows)."""
        Y2 = Y.reshape(t.size, -1)
        if _use_fast(self.kernel, t, self.solver):
            sol, name = _FastSolver(t, Y2).solve(self.kernel, self.lam), "fast"
        else:
            sol, name = _DenseSolver(self.kernel, t, Y2).solve(self.lam), "dense"
        return self._set_solution(sol, vector=Y.ndim == 1, solver=name)

    def _check_params(self):
        if not isinstance(self.kernel, Kernel):
            raise TypeError(f"kernel must be a gencc.kernels.Kernel such as Sobolev2() or Matern(0.5, 2.5), "
                            f"got {self.kernel!r}")
        check_nonnegative(self.lam, "lam")
        check_choice(self.solver, "solver", SOLVERS)

    def _fitted(self):
        try:
            return self._sol
        except AttributeError:
            raise NotFittedError("this KernelRidge is not fitted yet: call fit(t, Y) first") from None

    @classmethod
    def _from_solution(cls, kernel: Kernel, sol: _Solution, *, vector: bool = False, solver: str = "auto",
                       used: str = "dense") -> "KernelRidge":
        """A fitted KernelRidge (ridge ``sol.lam``) from a solver's solution."""
        return cls(kernel, sol.lam, solver=solver)._set_solution(sol, vector=vector, solver=used)

    def _set_solution(self, sol: _Solution, *, vector: bool, solver: str) -> "KernelRidge":
        self._sol = sol
        self._vector = vector
        self.kernel_ = self.kernel
        self.solver_ = solver
        self.nodes_ = sol.t
        self.lam_effective_ = sol.lam
        self._loo = None
        return self

    @property
    def coef_(self) -> np.ndarray:
        return self._fitted().c

    @property
    def null_coef_(self) -> np.ndarray:
        return self._fitted().null_coef

    @property
    def loo_residuals_(self) -> np.ndarray:
        sol = self._fitted()
        if self._loo is None:
            c, a = sol.c, sol.a
            with np.errstate(divide="ignore", invalid="ignore"):
                self._loo = np.where(a[:, None] > 0, c / a[:, None], 0.0)
        return self._loo

    @property
    def loo_mse_(self) -> float:
        loo = self.loo_residuals_
        return float(np.mean(loo**2)) if loo.shape[0] > max(self.kernel.null_degree + 1, 0) else float("nan")

    def predict(self, s) -> np.ndarray:
        """Evaluate the fitted function at points ``s``: shape (len(s), m), or (len(s),) after a fit to
        a vector."""
        sol = self._fitted()
        s = check_points(s, "s", min_size=0)
        out = sol.predict(s)
        return out[:, 0] if self._vector else out

    def smoother_matrix(self, t, s) -> np.ndarray:
        """The linear map from targets at ``t`` to predictions at ``s``: shape (len(s), len(t)).

        On the fast path the identity's columns are fitted in chunks, so the
        filters' memory stays within a fixed budget however large len(t) is
        (time O(n^2), against O(n^3) dense).
        """
        self._check_params()
        t = check_points(t, "t")
        s = check_points(s, "s", min_size=0)
        n = t.size
        fit = KernelRidge(self.kernel, self.lam, solver=self.solver)
        if not _use_fast(self.kernel, t, self.solver):
            return fit._fit(t, np.eye(n))._sol.predict(s)
        step = max(1, int(_FAST_BATCH_BYTES // (100.0 * n)))  # ~100 bytes per node and column
        out = np.empty((s.size, n))
        for j in range(0, n, step):
            cols = np.zeros((n, min(step, n - j)))
            cols[np.arange(j, j + cols.shape[1]), np.arange(cols.shape[1])] = 1.0
            out[:, j : j + cols.shape[1]] = fit._fit(t, cols)._sol.predict(s)
        return out


def hole_blocks(t, targets, *, centres: int = 2, min_kept: int = 3, wide: float = 0.0) -> list:
    """Leave-block-out sets that copy the holes the decoder has to bridge.

    Parameters
    ----------
    t : array_like, shape (n,)
        Returned nodes, sorted ascending.
    targets : array_like, shape (K,)
        Points the fit will be evaluated at (the alpha_k).
    centres : int
        Held-out centres per target: the ``centres`` returned nodes nearest
        to the target on either side (2: the two nodes bracketing it).
    min_kept : int
        Fewest nodes a block may leave (>= null-space dimension + 1).
    wide : float
        Copy only holes wider than ``wide`` times the larger of the two node
        spacings next to them (0: every hole), i.e. holes left by stragglers.
    Returns
    -------
    list of (int, ndarray)
        ``(j, B)``: predict node j from the nodes outside block B (j in B),
        without duplicates.

    Notes
    -----
    Target a sits in the hole (t_L, t_R) of the returned nodes, at distance
    ``dl = a - t_L`` from its left and ``dr = t_R - a`` from its right node
    (infinite when a lies beyond the last node: extrapolation). Moving that
    hole so that node t_j sits where a sat removes every node strictly
    inside ``(t_j - dl, t_j + dr)``; predicting y_j from the rest is then a
    problem of the same shape as predicting f at a, with a known answer.
    A hole that would reach past an end node is skipped: it would turn an
    interpolation into a (harder) extrapolation. Leave-one-out is the
    special case of holes one node wide, which is why it is blind to a gap
    left by several adjacent stragglers.
    """
    rows = _hole_ranges(t, targets, centres=centres, min_kept=min_kept, wide=wide)
    out = []
    for j, lo, hi, i0, i1 in rows.tolist():
        B = np.arange(lo, hi + 1) if i0 <= j < i1 or i1 <= i0 else np.union1d(np.arange(i0, i1), [j])
        out.append((j, B))
    return out


def _hole_ranges(t, targets, *, centres: int = 2, min_kept: int = 3, wide: float = 0.0,
                 return_tests: bool = False):
    """:func:`hole_blocks` as an int array of rows ``(j, first, last, i0, i1)``.

    Block B is the nodes ``i0 <= i < i1`` plus j, so ``first = min(B)`` and
    ``last = max(B)`` (B is contiguous whenever j lies in or next to
    ``[i0, i1)``, as it always does for hole blocks); rows in the order
    :func:`hole_blocks` returns them, duplicates removed. Vectorised over
    (target, centre): O((K + n) log n) with no Python loop.
    ``return_tests`` also returns ``tests``, int (n_tests, 2): the pairs
    (target, row) of every target with each block that copies its hole (a
    block asked for by several targets is one row, and one test of each).
    """
    t = np.asarray(t, dtype=np.float64)
    n = t.size
    a = np.asarray(targets, dtype=np.float64).reshape(-1)
    if n == 0 or a.size == 0:
        empty = np.zeros((0, 5), dtype=np.int64)
        return (empty, np.zeros((0, 2), dtype=np.int64)) if return_tests else empty
    # vectorised over (target, centre); the loop below only assembles the result
    r = np.searchsorted(t, a)  # t[r-1] < a <= t[r]
    with np.errstate(invalid="ignore"):
        dl = np.where(r > 0, a - t[np.maximum(r - 1, 0)], np.inf)
        dr = np.where(r < n, t[np.minimum(r, n - 1)] - a, np.inf)
    keep_t = np.ones(a.size, dtype=bool)
    if wide:
        left = np.where(r >= 2, t[np.clip(r - 1, 0, n - 1)] - t[np.clip(r - 2, 0, n - 1)], 0.0)
        right = np.where(r + 1 < n, t[np.clip(r + 1, 0, n - 1)] - t[np.clip(r, 0, n - 1)], 0.0)
        keep_t = ~(np.isfinite(dl + dr) & (dl + dr <= wide * np.maximum(left, right)))
    offs = np.arange(-centres, centres)
    J = (r[:, None] + offs[None, :]).ravel()
    DL, DR = np.repeat(dl, offs.size), np.repeat(dr, offs.size)
    ok = np.repeat(keep_t, offs.size) & (J >= 0) & (J < n)
    Jc = np.clip(J, 0, n - 1)
    lo, hi = t[Jc] - DL, t[Jc] + DR
    # an interior hole moved past an end would be an extrapolation
    ok &= ~((np.isfinite(DL) & (lo < t[0])) | (np.isfinite(DR) & (hi > t[-1])))
    i0 = np.searchsorted(t, lo, side="right")  # first node > lo
    i1 = np.searchsorted(t, hi, side="left")  # first node >= hi
    inside = (i0 <= Jc) & (Jc < i1)
    size = np.maximum(i1 - i0, 0) + ~inside
    ok &= n - size >= min_kept
    empty = i1 <= i0
    first = np.where(empty, Jc, np.minimum(i0, Jc))
    last = np.where(empty, Jc, np.maximum(i1 - 1, Jc))
    rows = np.stack([Jc, first, last, i0, i1, size], axis=1)[ok]
    tid = np.repeat(np.arange(a.size), offs.size)[ok]
    if not len(rows):
        rows = rows[:, :5].astype(np.int64)
        return (rows, np.zeros((0, 2), dtype=np.int64)) if return_tests else rows
    # (j, first, last, size) fix B (a range plus j): keep each key's first occurrence
    # first occurrence of each key: a stable lexicographic sort keeps equal keys in order
    srt = np.lexsort((rows[:, 5], rows[:, 2], rows[:, 1], rows[:, 0]))
    keys = rows[srt][:, [0, 1, 2, 5]]
    first = np.ones(len(srt), dtype=bool)
    first[1:] = np.any(keys[1:] != keys[:-1], axis=1)
    kept = np.sort(srt[first])
    out = rows[kept, :5].astype(np.int64)
    if not return_tests:
        return out
    # every row's key is its group's first occurrence's: map each row to its kept row
    group = np.cumsum(first) - 1  # group of each row, in sorted order
    position = np.searchsorted(kept, srt[first])  # group -> its row of out
    row_of = np.empty(len(srt), dtype=np.int64)
    row_of[srt] = position[group]
    return out, np.stack([tid, row_of], axis=1).astype(np.int64)


def hole_residuals(t, Y, kernel: Kernel, lam: float, targets, *, centres: int = 2):
    """Held-out residuals of one fit across holes shaped like the targets' own.

    Parameters
    ----------
    t : array_like, shape (n,)
        Nodes, sorted ascending.
    Y : array_like, shape (n, m)
    kernel : Kernel
    lam : float
    targets : array_like, shape (K,)
    centres : int
        As in :func:`hole_blocks`.

    Returns
    -------
    residuals : ndarray, shape (n_tests, m)
        ``y_j - u_{-B}(t_j)`` for each block of :func:`hole_blocks`.
    tests : ndarray of int, shape (n_pairs, 2)
        Pairs (target k, row of ``residuals``) of each target with the
        blocks that copy its hole.
    """
    t = np.asarray(t, dtype=np.float64)
    Y2 = np.asarray(Y, dtype=np.float64).reshape(t.size, -1)
    rows, tests = _hole_ranges(t, targets, centres=centres, return_tests=True)
    if not len(rows):
        return np.zeros((0, Y2.shape[1])), tests
    blocks = [(j, np.arange(lo, hi + 1) if i0 <= j < i1 or i1 <= i0 else np.union1d(np.arange(i0, i1), [j]))
              for j, lo, hi, i0, i1 in rows.tolist()]
    path = ridge_path(t, Y2, kernel, [lam], blocks=blocks)
    if not path:
        return np.zeros((0, Y2.shape[1])), np.zeros((0, 2), dtype=np.int64)
    return np.asarray(path[0]["block"]).reshape(len(blocks), -1), tests


def hole_rmse(residuals, tests, n_targets: int, fallback: float = float("nan")) -> np.ndarray:
    """Each target's root-mean-squared error estimated by its own hole tests.

    Parameters
    ----------
    residuals : array_like, shape (n_tests, m)
        Held-out residuals (:func:`hole_residuals`, or a mixture's: the mean
        of its members' residuals, since a mean of linear smoothers holds
        out as the mean of their held-out predictions).
    tests : array_like of int, shape (n_pairs, 2)
        Pairs (target, row of ``residuals``).
    n_targets : int
        K.
    fallback : float
        The mean squared error to assume where no test is available at
        all (e.g. the leave-one-out error).

    Returns
    -------
    ndarray, shape (K,)
        ``sqrt(mean over target k's tests of mean_m r^2)``; a target with
        no test of its own gets the mean over every test, and every target
        gets ``sqrt(fallback)`` when there is no test.
    """
    R = np.asarray(residuals, dtype=np.float64)
    tests = np.asarray(tests, dtype=np.int64).reshape(-1, 2)
    if R.size == 0 or not len(tests):
        return np.full(n_targets, math.sqrt(fallback) if fallback >= 0 else math.nan)
    per = np.mean(R.reshape(R.shape[0], -1) ** 2, axis=1)  # (n_tests,)
    total = np.bincount(tests[:, 0], weights=per[tests[:, 1]], minlength=n_targets)
    count = np.bincount(tests[:, 0], minlength=n_targets)
    mse = np.where(count > 0, total / np.maximum(count, 1), float(np.mean(per[tests[:, 1]])))
    return np.sqrt(mse)


def ridge_path(t, Y, kernel: Kernel, lams, *, targets=None, blocks=None, relative: bool = False,
               solver: str = "auto") -> list:
    """Fits of one kernel for several ridges from one factorisation.

    Parameters
    ----------
    t : array_like, shape (n,)
    Y : array_like, shape (n, m)
    kernel : Kernel
    lams : sequence of float
        Ridges lam (objective normalised by 1/n); each is raised to the
        relative floor as in :class:`KernelRidge`.
    targets : array_like, optional
        Points to predict at.
    blocks : list of (int, ndarray), optional
        Leave-block-out sets from :func:`hole_blocks`.
    relative : bool
        Read ``lams`` as values of ``n*lam`` relative to the mean eigenvalue
        of the penalised Gram matrix (as ``DEFAULT_RIDGE_GRID``).
    solver : {"auto", "dense", "fast"}
        As in :class:`KernelRidge`; the fast solver needs blocks contiguous
        in sorted node order (as :func:`hole_blocks` makes them).

    Returns
    -------
    list of dict, one per ridge
        ``lam`` (effective), ``c`` (n, m) and ``a`` (n,) as in
        :class:`KernelRidge` (so ``c / a`` are the leave-one-out residuals),
        ``pred`` (len(targets), m) when targets are given and ``block``
        (len(blocks), m), the residual ``y_j - u_{-B}(t_j)`` per block.
        An empty list when n does not exceed the null-space dimension.

    Notes
    -----
    With ``A = Z (Z^T G Z + n lam I)^{-1} Z^T`` the residual is
    ``y - u(t) = n lam A y`` and ``I - H = n lam A``. Fitting without the
    block B gives the same function as fitting all n nodes with y_B replaced
    by the held-out predictions, hence ``y_B - u_{-B}(t_B) = (I - H)_BB^{-1}
    (y - Hy)_B = A_BB^{-1} c_B``: the factor n lam cancels, as it does in the
    leave-one-out residual c_i / a_i, which is the 1 x 1 case.

    The dense solver eigendecomposes ``Z^T G Z`` once (O(n^3), then O(n^2 m)
    per ridge). The fast one runs the two state-space filters once per ridge
    (all ridges batched, O(n m) each) and predicts ``u_{-B}(t_j)`` from the
    nodes left and right of a contiguous block directly, O(m) per block
    (:mod:`gencc.statespace`).
    """
    t = np.asarray(t, dtype=np.float64)
    Y2 = np.asarray(Y, dtype=np.float64).reshape(t.size, -1)
    rows = []
    if _use_fast(kernel, t, solver):
        fs = _FastSolver(t, Y2)
        sb = fs.sorted_blocks(blocks) if blocks else None
        if blocks and sb is None:
            if solver == "fast":
                raise ValueError("blocks must be contiguous in sorted node order for solver='fast'")
        else:
            models = [(kernel, fs.nlam(kernel, lam, relative)) for lam in lams]
            rows = list(fs.path(models, targets=targets, blocks=sb))
            for row in rows:
                for key in ("kernel", "solution", "batch"):
                    row.pop(key)
            return rows
    rows = _DenseSolver(kernel, t, Y2).path(lams, relative=relative, targets=targets, blocks=blocks)
    for row in rows:
        row.pop("solution")
    return rows


@dataclass
class RidgeSelection:
    """Result of :func:`select_ridge`.

    Attributes
    ----------
    fit : KernelRidge
        The winning fit (already fitted).
    kernel : Kernel
    lam : float
    score : float
        Its leave-one-out (or GCV) mean squared error.
    scores : list of (str, float, float)
        (kernel, lam, score) for every kernel's best ridge.
    fits : dict
        ``str(kernel) -> KernelRidge``: every kernel's best fit, already
        fitted (so a mixture of the best few needs no refit).
    residuals : dict
        ``str(kernel) -> ndarray``, shape (n_tests, m): the held-out
        residuals the best fit was scored by (hole residuals for ``"gap"``,
        leave-one-out residuals otherwise; empty for ``"gcv"``), rows in the
        same order for every kernel, so that combinations of the fits can be
        scored without refitting.
    tests : ndarray of int, shape (n_tests, 2), or None
        For ``"gap"``: pairs (target k, residual row) of each target with
        the held-out residuals that copy its hole.
    """

    fit: KernelRidge
    kernel: Kernel
    lam: float
    score: float
    scores: list
    fits: dict = field(default_factory=dict, repr=False)
    residuals: dict = field(default_factory=dict, repr=False)
    tests: np.ndarray | None = field(default=None, repr=False)


def _materialise(best_rows, lazy=False):
    """Turn the best rows' solution factories into solutions; ``lazy`` (the last batch of
    filters, which then stays alive with the fits): select each model on first use."""
    for entry in best_rows.values():
        if callable(entry[2]):
            entry[2] = entry[2](lazy=True) if lazy and entry[3] == "fast" else entry[2]()


def _score(criterion, row, n, m):
    if criterion == "gap":
        return float(np.mean(row["block"] ** 2))
    c, a = row["c"], row["a"]
    if criterion == "loo":
        return float(np.mean((c / a[:, None]) ** 2))
    return float(n * np.sum(c**2) / np.sum(a) ** 2 / m)


def _held_out(criterion, row):
    if criterion == "gap":
        return row["block"]
    if criterion == "loo":
        return row["c"] / row["a"][:, None]
    return None


def select_ridge(t, Y, kernels, *, ridge_grid=DEFAULT_RIDGE_GRID, lam=None, criterion: str = "loo",
                 targets=None, solver: str = "auto", centres: int = 2) -> RidgeSelection:
    """Choose kernel and ridge by closed-form leave-one-out, GCV or hole error.

    Parameters
    ----------
    t : array_like, shape (n,)
        Nodes.
    Y : array_like, shape (n, m)
        Targets.
    kernels : sequence of Kernel
        Candidate kernels (each with its scale).
    ridge_grid : array_like
        Candidate values of ``n*lam`` relative to the mean eigenvalue of the
        penalised Gram matrix ``Z^T G Z``.
    lam : float or sequence of float, optional
        Fixed ridges (objective normalised by 1/n): then ``ridge_grid`` is
        not used; a single value selects only the kernel.
    criterion : {"loo", "gcv", "gap"}
        ``"loo"`` minimises the mean squared leave-one-out residual
        ``mean((c_i / a_i)^2)``; ``"gcv"`` minimises ``n |c|^2 / (sum a)^2 / m``;
        ``"gap"`` the mean squared residual of predicting a node with a hole
        as wide as the real one around each target removed
        (:func:`hole_blocks`); it needs ``targets``.
    targets : array_like, optional
        The points the fit will be evaluated at (needed by ``"gap"``).
    solver : {"auto", "dense", "fast"}
        As in :class:`KernelRidge`, per candidate kernel (``"fast"`` is an
        error for a kernel without a state-space form); ``"auto"`` takes
        the fast path from ``FAST_MIN_N_SELECT`` nodes on.
    centres : int, default 2
        Held-out centres per target for ``"gap"`` (:func:`hole_blocks`).

    Returns
    -------
    RidgeSelection

    Notes
    -----
    One symmetric eigendecomposition ``Z^T G Z = U diag(sigma) U^T`` per
    kernel makes every ridge candidate cost O(n^2 m): with ``W = Z U`` and
    ``g = 1 / (sigma + n lam)``, ``c = W (g * W^T y)`` and ``a = (W*W) g``
    (:func:`ridge_path`). When no hole can be cut (too few nodes), ``"gap"``
    falls back to leave-one-out.

    On the fast solver every candidate (kernel, ridge) of the kernels with
    state-space forms runs in one batch of Kalman filters, O(n m) each; the
    gap criterion's block residuals are O(m) per block and the scale of the
    relative grid is O(n) (:func:`ridge_path`). No step is O(n^2).
    """
    if criterion not in CRITERIA:
        raise ValueError(f"criterion must be one of {CRITERIA}, got {criterion!r}")
    _check_solver(solver)
    t = np.asarray(t, dtype=np.float64)
    Y2 = np.asarray(Y, dtype=np.float64).reshape(t.size, -1)
    n, m = t.size, Y2.shape[1]
    kernels = list(kernels)
    blocks = tests = None
    if criterion == "gap":
        if targets is None:
            raise ValueError("criterion='gap' needs the targets (the points the fit is evaluated at)")
        order = np.argsort(t, kind="stable")
        ranges, tests = _hole_ranges(t[order], targets, centres=centres, return_tests=True)  # (j, first, last, i0, i1) in sorted order
        if not len(ranges):
            criterion = "loo"
    if lam is None:
        lams, relative = np.maximum(np.asarray(ridge_grid, dtype=np.float64), _RIDGE_FLOOR), True
    else:
        lams, relative = np.atleast_1d(np.asarray(lam, dtype=np.float64)), False
    nodes_ok = _distinct_finite(t) if solver != "dense" else False
    fast = [k for k in kernels if _use_fast(k, t, solver, FAST_MIN_N_SELECT, nodes_ok)]
    best_rows = {}  # kernel -> (lam, score, solution)

    def consider(kernel, row, used):
        score = _score(criterion, row, n, m)
        if not np.isfinite(score):
            return
        cur = best_rows.get(kernel)
        if cur is None or score < cur[1]:
            best_rows[kernel] = [row["lam"], score, row["solution"], used, _held_out(criterion, row)]

    if fast:
        fs = _FastSolver(t, Y2)
        sb = None
        if criterion == "gap":  # (target, first, last) in sorted order; hole blocks are contiguous
            sb = ranges[:, :3]
        models = [(k, fs.nlam(k, lam_, relative)) for k in fast for lam_ in lams]
        batch = None
        for row in fs.path(models, blocks=sb, loo=criterion != "gap"):
            if row["batch"] != batch:  # materialise the bests of a finished batch: it can be freed
                _materialise(best_rows)
                batch = row["batch"]
            consider(row["kernel"], row, "fast")
        _materialise(best_rows, lazy=True)
    if criterion == "gap" and len(fast) < len(kernels):
        blocks = [(int(order[j]), np.sort(order[B])) for j, B in hole_blocks(t[order], targets, centres=centres)]
    for kernel in kernels:
        if kernel in fast:
            continue
        for row in _DenseSolver(kernel, t, Y2).path(lams, relative=relative,
                                                    blocks=blocks if criterion == "gap" else None):
            consider(kernel, row, "dense")
    scores, best = [], None
    for kernel in kernels:
        if kernel not in best_rows:
            continue
        lam_k, score, sol, used, _ = best_rows[kernel]
        scores.append((str(kernel), lam_k, score))
        if best is None or score < best[2]:
            best = (kernel, lam_k, score)
    if best is None:
        # n == null-space dimension for every kernel: only interpolation is possible
        kernel = kernels[0]
        fit = KernelRidge(kernel, 0.0, solver="dense").fit(t, Y2)
        return RidgeSelection(fit, kernel, 0.0, float("nan"), scores, {str(kernel): fit}, {}, None)
    fits, residuals = {}, {}
    for kernel, (lam_k, score, sol, used, res) in best_rows.items():
        if callable(sol):
            sol = sol()
        fits[str(kernel)] = KernelRidge._from_solution(kernel, sol, solver=solver, used=used)
        if res is not None:
            residuals[str(kernel)] = res
    kernel, lam_best, score = best
    return RidgeSelection(fits[str(kernel)], kernel, lam_best, score, scores, fits, residuals,
                          tests if criterion == "gap" else None)
