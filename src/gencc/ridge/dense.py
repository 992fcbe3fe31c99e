"""The dense solver: Cholesky or one eigendecomposition per kernel, O(n^3); every kernel, and the reference."""

from __future__ import annotations

import warnings

import numpy as np
from scipy import linalg

from ..errors import IllConditionedWarning
from ..kernels import Kernel
from .common import _RIDGE_FLOOR, _null_dim, _null_space, _Solution
from .path_row import PathRow


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
            row = PathRow(nlam / n, c, a, kernel=kernel)
            if targets is not None:
                pred = Kt @ c
                if Q1 is not None:
                    pred = pred + Vt @ linalg.solve_triangular(R, Q1.T @ (Y2 - G @ c))
                row.pred = pred
            if blocks:
                A = (W * g) @ W.T
                res = np.empty((len(blocks), Y2.shape[1]))
                for i, (j, B) in enumerate(blocks):
                    k = int(np.flatnonzero(B == j)[0])
                    try:
                        res[i] = np.linalg.solve(A[np.ix_(B, B)], c[B])[k]
                    except np.linalg.LinAlgError:
                        res[i] = np.inf
                row.block = res
            row.solution = (lambda c=c, a=a, lam=nlam / n: self._solution(c, a, lam))
            out.append(row)
        return out
