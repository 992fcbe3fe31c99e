"""The estimator: :class:`KernelRidge`, fitted with the dense or the linear-time solver."""

from __future__ import annotations

import numpy as np

from .._validation import check_choice, check_nonnegative, check_points, check_targets
from ..errors import NotFittedError
from ..kernels import Kernel
from . import common as _common
from .common import SOLVERS, _check_solver, _Solution, _use_fast
from .dense import _DenseSolver
from .fast import _FastSolver

__all__ = ["KernelRidge"]


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
        step = max(1, int(_common.FAST_BATCH_BYTES // (100.0 * n)))  # ~100 bytes per node and column
        out = np.empty((s.size, n))
        for j in range(0, n, step):
            cols = np.zeros((n, min(step, n - j)))
            cols[np.arange(j, j + cols.shape[1]), np.arange(cols.shape[1])] = 1.0
            out[:, j : j + cols.shape[1]] = fit._fit(t, cols)._sol.predict(s)
        return out
