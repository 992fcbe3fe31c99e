"""Kernel ridge regression of vector-valued data on scalar nodes in [-1, 1].

This is the single regression engine behind the GCC and LeTCC encoders and
decoders. It knows nothing of workers or stragglers.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy import linalg

from .errors import IllConditionedWarning
from .kernels import Kernel

__all__ = ["KernelRidge", "select_ridge", "RidgeSelection", "DEFAULT_RIDGE_GRID", "hole_blocks", "ridge_path",
           "CRITERIA"]

CRITERIA = ("loo", "gcv", "gap")

# Relative ridge floor: n*lam is never below this times the mean eigenvalue of
# the penalised Gram matrix, so a requested lam = 0 is an interpolant up to
# round-off rather than a singular solve.
_RIDGE_FLOOR = 1e-13
# Relative candidates for n*lam in the automatic selection (times the mean
# eigenvalue of the penalised Gram matrix).
DEFAULT_RIDGE_GRID = np.logspace(-12, 0, 25)


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


class KernelRidge:
    """Kernel ridge regression ``min (1/n) sum_i |u(t_i) - y_i|^2 + lam |u|_H^2``.

    Parameters
    ----------
    kernel : Kernel
        The kernel; its null space (if any) is left unpenalised.
    lam : float
        Ridge, >= 0. ``lam = 0`` interpolates (a tiny relative floor keeps the
        solve finite).

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

    Notes
    -----
    With Gram matrix ``G = k(t, t)``, null-space basis ``T = Q1 R`` and ``Z``
    an orthonormal basis of ``range(T)``'s complement, the representer theorem
    gives ``u(s) = k(s, t) c + p(s) b`` with ``c = Z (Z^T G Z + n lam I)^{-1} Z^T y``
    and ``b = R^{-1} Q1^T (y - G c)``. The residual is ``y - u(t) = n lam c`` and
    ``diag(I - H) = n lam a`` with ``a = diag(Z (Z^T G Z + n lam I)^{-1} Z^T)``,
    so the leave-one-out residual is ``c_i / a_i`` [1]_, finite even as lam -> 0.
    One Cholesky factorisation serves all m output coordinates.

    References
    ----------
    .. [1] G. Wahba, *Spline Models for Observational Data*, SIAM, 1990, ch. 4.

    Examples
    --------
    >>> from gencc.kernels import Sobolev2
    >>> t = np.linspace(-1, 1, 5)
    >>> fit = KernelRidge(Sobolev2(), 0.0).fit(t, t**2)
    >>> bool(np.allclose(fit.predict(t), t**2))
    True
    """

    def __init__(self, kernel: Kernel, lam: float = 0.0):
        self.kernel = kernel
        self.lam = lam

    def fit(self, t, Y) -> "KernelRidge":
        """Fit to nodes ``t`` (shape (n,)) and targets ``Y`` (shape (n, m) or (n,))."""
        t = np.asarray(t, dtype=np.float64)
        Y = np.asarray(Y, dtype=np.float64)
        self._vector = Y.ndim == 1
        Y2 = Y.reshape(t.size, -1)
        self.kernel_ = self.kernel
        n = t.size
        G = self.kernel(t, t)
        Q1, R, Z = _null_space(self.kernel, t)
        M0 = G if Z is None else Z.T @ G @ Z
        dim = M0.shape[0]
        if dim == 0:  # as many nodes as null-space functions: pure polynomial interpolation
            c = np.zeros_like(Y2)
            a = np.zeros(n)
            lam_eff = float(self.lam)
        else:
            scale = max(np.trace(M0) / dim, np.finfo(float).tiny)
            nlam = max(n * float(self.lam), _RIDGE_FLOOR * scale)
            L = self._cholesky(M0, nlam, scale)
            ZtY = Y2 if Z is None else Z.T @ Y2
            w = linalg.cho_solve((L, True), ZtY)
            c = w if Z is None else Z @ w
            V = linalg.solve_triangular(L, np.eye(dim) if Z is None else Z.T, lower=True)
            a = np.einsum("ij,ij->j", V, V)
            lam_eff = self._nlam / n
        return self._finish(t, Y2, G, Q1, R, c, a, lam_eff)

    def _finish(self, t, Y2, G, Q1, R, c, a, lam_eff):
        b = np.zeros((0, Y2.shape[1])) if Q1 is None else linalg.solve_triangular(R, Q1.T @ (Y2 - G @ c))
        self.nodes_ = t
        self.coef_ = c
        self.null_coef_ = b
        self.lam_effective_ = lam_eff
        with np.errstate(divide="ignore", invalid="ignore"):
            loo = np.where(a[:, None] > 0, c / a[:, None], 0.0)
        self.loo_residuals_ = loo
        self.loo_mse_ = float(np.mean(loo**2)) if c.shape[0] > _null_dim(Q1) else float("nan")
        return self

    def _cholesky(self, M0, nlam, scale):
        dim = M0.shape[0]
        # Cholesky fails only when round-off makes the shifted matrix indefinite:
        # raise the ridge geometrically until it succeeds.
        for attempt in range(8):
            try:
                L = linalg.cholesky(M0 + nlam * np.eye(dim), lower=True)
                self._nlam = nlam
                return L
            except linalg.LinAlgError:
                if attempt == 7:
                    raise
            nlam = max(nlam * 100.0, 1e-12 * scale)
            warnings.warn(
                f"{self.kernel} Gram matrix on {dim} nodes is ill-conditioned; "
                f"raising the ridge n*lam to {nlam:.3g}",
                IllConditionedWarning,
                stacklevel=4,
            )
        raise AssertionError("unreachable")  # pragma: no cover

    def predict(self, s) -> np.ndarray:
        """Evaluate the fitted function at points ``s``: shape (len(s), m)."""
        s = np.asarray(s, dtype=np.float64).reshape(-1)
        out = self.kernel(s, self.nodes_) @ self.coef_
        q = self.null_coef_.shape[0]
        if q:
            out = out + np.vander(s, q, increasing=True) @ self.null_coef_
        return out[:, 0] if self._vector else out

    def smoother_matrix(self, t, s) -> np.ndarray:
        """The linear map from targets at ``t`` to predictions at ``s``: shape (len(s), len(t))."""
        t = np.asarray(t, dtype=np.float64)
        return KernelRidge(self.kernel, self.lam).fit(t, np.eye(t.size)).predict(s)


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
    t = np.asarray(t, dtype=np.float64)
    n = t.size
    out, seen = [], set()
    for a in np.asarray(targets, dtype=np.float64).reshape(-1):
        r = int(np.searchsorted(t, a))  # t[r-1] < a <= t[r]
        dl = a - t[r - 1] if r > 0 else np.inf
        dr = t[r] - a if r < n else np.inf
        if wide and np.isfinite(dl + dr):
            near = [t[r - 1] - t[r - 2] if r >= 2 else 0.0, t[r + 1] - t[r] if r + 1 < n else 0.0]
            if dl + dr <= wide * max(near):
                continue
        for j in range(r - centres, r + centres):
            if not 0 <= j < n:
                continue
            lo, hi = t[j] - dl, t[j] + dr
            if (np.isfinite(dl) and lo < t[0]) or (np.isfinite(dr) and hi > t[-1]):
                continue  # an interior hole moved past an end would be an extrapolation
            B = np.flatnonzero((t > lo) & (t < hi))
            if j not in B:
                B = np.union1d(B, [j])
            key = (j, B.tobytes())
            if n - B.size < min_kept or key in seen:
                continue
            seen.add(key)
            out.append((j, B))
    return out


def ridge_path(t, Y, kernel: Kernel, lams, *, targets=None, blocks=None, relative: bool = False) -> list:
    """Fits of one kernel for several ridges from one eigendecomposition.

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
    """
    t = np.asarray(t, dtype=np.float64)
    Y2 = np.asarray(Y, dtype=np.float64).reshape(t.size, -1)
    n = t.size
    G = kernel(t, t)
    Q1, R, Z = _null_space(kernel, t)
    M0 = G if Z is None else Z.T @ G @ Z
    if M0.shape[0] == 0:
        return []
    sigma, U = np.linalg.eigh((M0 + M0.T) / 2)
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
        row = {"lam": nlam / n, "c": c, "a": W2 @ g}
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
        out.append(row)
    return out


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
    """

    fit: KernelRidge
    kernel: Kernel
    lam: float
    score: float
    scores: list


def select_ridge(t, Y, kernels, *, ridge_grid=DEFAULT_RIDGE_GRID, lam=None, criterion: str = "loo",
                 targets=None) -> RidgeSelection:
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
    """
    if criterion not in CRITERIA:
        raise ValueError(f"criterion must be one of {CRITERIA}, got {criterion!r}")
    t = np.asarray(t, dtype=np.float64)
    Y2 = np.asarray(Y, dtype=np.float64).reshape(t.size, -1)
    n = t.size
    kernels = list(kernels)
    blocks = None
    if criterion == "gap":
        if targets is None:
            raise ValueError("criterion='gap' needs the targets (the points the fit is evaluated at)")
        order = np.argsort(t, kind="stable")
        blocks = [(int(order[j]), np.sort(order[B])) for j, B in hole_blocks(t[order], targets)]
        if not blocks:
            criterion = "loo"
    if lam is None:
        lams, relative = np.maximum(np.asarray(ridge_grid, dtype=np.float64), _RIDGE_FLOOR), True
    else:
        lams, relative = np.atleast_1d(np.asarray(lam, dtype=np.float64)), False
    best = None
    scores = []
    for kernel in kernels:
        k_best = None
        for row in ridge_path(t, Y2, kernel, lams, blocks=blocks if criterion == "gap" else None, relative=relative):
            c, a = row["c"], row["a"]
            if criterion == "loo":
                score = float(np.mean((c / a[:, None]) ** 2))
            elif criterion == "gcv":
                score = float(n * np.sum(c**2) / np.sum(a) ** 2 / Y2.shape[1])
            else:
                score = float(np.mean(row["block"] ** 2))
            if np.isfinite(score) and (k_best is None or score < k_best[1]):
                k_best = (row["lam"], score, c, a)
        if k_best is None:
            continue
        scores.append((str(kernel), k_best[0], k_best[1]))
        if best is None or k_best[1] < best[2]:
            best = (kernel, *k_best)
    if best is None:
        # n == null-space dimension for every kernel: only interpolation is possible
        kernel = kernels[0]
        fit = KernelRidge(kernel, 0.0).fit(t, Y2)
        return RidgeSelection(fit, kernel, 0.0, float("nan"), scores)
    kernel, lam_best, score, c, a = best
    Q1, R, _ = _null_space(kernel, t)
    fit = KernelRidge(kernel, lam_best)
    fit._vector = False
    fit.kernel_ = kernel
    fit._finish(t, Y2, kernel(t, t), Q1, R, c, a, lam_best)
    return RidgeSelection(fit, kernel, lam_best, score, scores)
