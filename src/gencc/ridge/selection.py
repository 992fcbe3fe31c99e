"""Choosing the kernel and the ridge: closed-form leave-one-out, GCV or hole error (:func:`select_ridge`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..kernels import Kernel
from . import common as _common
from .common import _RIDGE_FLOOR, _check_solver, _distinct_finite, _use_fast
from .dense import _DenseSolver
from .estimator import KernelRidge
from .fast import _FastSolver
from .holes import _hole_ranges, hole_blocks

__all__ = ["select_ridge", "RidgeSelection", "CRITERIA", "DEFAULT_RIDGE_GRID"]

CRITERIA = ("loo", "gcv", "gap")
# Relative candidates for n*lam in the automatic selection (times the mean
# eigenvalue of the penalised Gram matrix).
DEFAULT_RIDGE_GRID = np.logspace(-12, 0, 25)


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
        Where hole tests were run (``"gap"``, or ``hole_tests=True``): pairs
        (target k, row of ``hole_residuals``) of each target with the
        held-out residuals that copy its hole.
    hole_residuals : dict
        ``str(kernel) -> ndarray``, shape (n_tests, m): every kernel's hole
        residuals at its best ridge, where hole tests were run (for
        ``"gap"`` the same arrays as ``residuals``).
    """

    fit: KernelRidge
    kernel: Kernel
    lam: float
    score: float
    scores: list
    fits: dict = field(default_factory=dict, repr=False)
    residuals: dict = field(default_factory=dict, repr=False)
    tests: np.ndarray | None = field(default=None, repr=False)
    hole_residuals: dict = field(default_factory=dict, repr=False)


@dataclass
class _Best:
    """A kernel's best candidate so far: its ridge, score, solution (or the factory that builds
    it), the solver that made it and the held-out residuals it was scored by."""

    lam: float
    score: float
    solution: object
    used: str
    held_out: np.ndarray | None
    block: np.ndarray | None = None


def _materialise(best_rows, lazy=False):
    """Turn the best rows' solution factories into solutions; ``lazy`` (the last batch of
    filters, which then stays alive with the fits): select each model on first use."""
    for best in best_rows.values():
        if callable(best.solution):
            best.solution = best.solution(lazy=True) if lazy and best.used == "fast" else best.solution()


def _score(criterion, row, n, m):
    if criterion == "gap":
        return float(np.mean(row.block ** 2))
    c, a = row.c, row.a
    if criterion == "loo":
        return float(np.mean((c / a[:, None]) ** 2))
    return float(n * np.sum(c**2) / np.sum(a) ** 2 / m)


def _held_out(criterion, row):
    if criterion == "gap":
        return row.block
    if criterion == "loo":
        return row.c / row.a[:, None]
    return None


def select_ridge(t, Y, kernels, *, ridge_grid=DEFAULT_RIDGE_GRID, lam=None, criterion: str = "loo",
                 targets=None, solver: str = "auto", centres: int = 2, hole_tests: bool = False) -> RidgeSelection:
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
    hole_tests : bool, default False
        Also compute the targets' hole residuals when the criterion is not
        ``"gap"`` (in the same pass: the error estimate of a fit chosen by
        leave-one-out); needs ``targets``.

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
    holes = criterion == "gap" or bool(hole_tests)
    if holes:
        if targets is None:
            raise ValueError(f"criterion={criterion!r} with hole tests needs the targets (the points the fit is "
                             "evaluated at)")
        order = np.argsort(t, kind="stable")
        ranges, tests = _hole_ranges(t[order], targets, centres=centres, return_tests=True)  # (j, first, last, i0, i1) in sorted order
        if not len(ranges):
            holes = False
            if criterion == "gap":
                criterion = "loo"
    if lam is None:
        lams, relative = np.maximum(np.asarray(ridge_grid, dtype=np.float64), _RIDGE_FLOOR), True
    else:
        lams, relative = np.atleast_1d(np.asarray(lam, dtype=np.float64)), False
    nodes_ok = _distinct_finite(t) if solver != "dense" else False
    fast = [k for k in kernels if _use_fast(k, t, solver, _common.FAST_MIN_N_SELECT, nodes_ok)]
    best_rows = {}  # kernel -> (lam, score, solution)

    def consider(kernel, row, used):
        score = _score(criterion, row, n, m)
        if not np.isfinite(score):
            return
        cur = best_rows.get(kernel)
        if cur is None or score < cur.score:
            best_rows[kernel] = _Best(row.lam, score, row.solution, used, _held_out(criterion, row),
                                      row.block if holes else None)

    if fast:
        fs = _FastSolver(t, Y2)
        sb = None
        if holes:  # (target, first, last) in sorted order; hole blocks are contiguous
            sb = ranges[:, :3]
        models = [(k, fs.nlam(k, lam_, relative)) for k in fast for lam_ in lams]
        batch = None
        for row in fs.path(models, blocks=sb, loo=criterion != "gap"):
            if row.batch != batch:  # materialise the bests of a finished batch: it can be freed
                _materialise(best_rows)
                batch = row.batch
            consider(row.kernel, row, "fast")
        _materialise(best_rows, lazy=True)
    if holes and len(fast) < len(kernels):
        blocks = [(int(order[j]), np.sort(order[B])) for j, B in hole_blocks(t[order], targets, centres=centres)]
    for kernel in kernels:
        if kernel in fast:
            continue
        for row in _DenseSolver(kernel, t, Y2).path(lams, relative=relative,
                                                    blocks=blocks if holes else None):
            consider(kernel, row, "dense")
    scores, best = [], None
    for kernel in kernels:
        if kernel not in best_rows:
            continue
        entry = best_rows[kernel]
        scores.append((str(kernel), entry.lam, entry.score))
        if best is None or entry.score < best[2]:
            best = (kernel, entry.lam, entry.score)
    if best is None:
        # n == null-space dimension for every kernel: only interpolation is possible
        kernel = kernels[0]
        fit = KernelRidge(kernel, 0.0, solver="dense").fit(t, Y2)
        return RidgeSelection(fit, kernel, 0.0, float("nan"), scores, {str(kernel): fit}, {}, None)
    fits, residuals, block = {}, {}, {}
    for kernel, entry in best_rows.items():
        sol = entry.solution() if callable(entry.solution) else entry.solution
        fits[str(kernel)] = KernelRidge._from_solution(kernel, sol, solver=solver, used=entry.used)
        if entry.held_out is not None:
            residuals[str(kernel)] = entry.held_out
        if entry.block is not None:
            block[str(kernel)] = entry.block
    kernel, lam_best, score = best
    return RidgeSelection(fits[str(kernel)], kernel, lam_best, score, scores, fits, residuals,
                          tests if holes else None, block)
