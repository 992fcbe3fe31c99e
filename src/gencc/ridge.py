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

__all__ = ["KernelRidge", "select_ridge", "RidgeSelection", "DEFAULT_RIDGE_GRID"]

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


def select_ridge(t, Y, kernels, *, ridge_grid=DEFAULT_RIDGE_GRID, lam=None, criterion: str = "loo") -> RidgeSelection:
    """Choose kernel and ridge by closed-form leave-one-out or GCV error.

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
    lam : float, optional
        A fixed ridge: then only the kernel is selected.
    criterion : {"loo", "gcv"}
        ``"loo"`` minimises the mean squared leave-one-out residual
        ``mean((c_i / a_i)^2)``; ``"gcv"`` minimises ``n |c|^2 / (sum a)^2 / m``.

    Returns
    -------
    RidgeSelection

    Notes
    -----
    One symmetric eigendecomposition ``Z^T G Z = U diag(sigma) U^T`` per
    kernel makes every ridge candidate cost O(n^2 m): with ``W = Z U`` and
    ``g = 1 / (sigma + n lam)``, ``c = W (g * W^T y)`` and ``a = (W*W) g``.
    """
    if criterion not in ("loo", "gcv"):
        raise ValueError(f"criterion must be 'loo' or 'gcv', got {criterion!r}")
    t = np.asarray(t, dtype=np.float64)
    Y2 = np.asarray(Y, dtype=np.float64).reshape(t.size, -1)
    n = t.size
    kernels = list(kernels)
    best = None
    scores = []
    for kernel in kernels:
        G = kernel(t, t)
        _, _, Z = _null_space(kernel, t)
        M0 = G if Z is None else Z.T @ G @ Z
        if M0.shape[0] == 0:
            continue
        sigma, U = np.linalg.eigh((M0 + M0.T) / 2)
        sigma = np.clip(sigma, 0.0, None)
        W = U if Z is None else Z @ U
        WY = W.T @ Y2
        W2 = W * W
        mean_eig = max(sigma.mean(), np.finfo(float).tiny)
        k_best = None
        if lam is None:
            nlams = np.maximum(np.asarray(ridge_grid, dtype=np.float64), _RIDGE_FLOOR) * mean_eig
        else:
            nlams = [max(n * float(lam), _RIDGE_FLOOR * mean_eig)]
        for nlam in nlams:
            g = 1.0 / (sigma + nlam)
            c = W @ (g[:, None] * WY)
            a = W2 @ g
            if criterion == "loo":
                score = float(np.mean((c / a[:, None]) ** 2))
            else:
                score = float(n * np.sum(c**2) / np.sum(a) ** 2 / Y2.shape[1])
            if np.isfinite(score) and (k_best is None or score < k_best[1]):
                k_best = (nlam / n, score, c, a)
        if k_best is None:
            continue
        scores.append((str(kernel), k_best[0], k_best[1]))
        if best is None or k_best[1] < best[2]:
            best = (kernel, k_best[0], k_best[1], k_best[2], k_best[3], G)
    if best is None:
        # n == null-space dimension for every kernel: only interpolation is possible
        kernel = kernels[0]
        fit = KernelRidge(kernel, 0.0).fit(t, Y2)
        return RidgeSelection(fit, kernel, 0.0, float("nan"), scores)
    kernel, lam_best, score, c, a, G = best
    Q1, R, _ = _null_space(kernel, t)
    fit = KernelRidge(kernel, lam_best)
    fit._vector = False
    fit.kernel_ = kernel
    fit._finish(t, Y2, G, Q1, R, c, a, lam_best)
    return RidgeSelection(fit, kernel, lam_best, score, scores)
