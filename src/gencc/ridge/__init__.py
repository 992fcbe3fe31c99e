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

The package holds one concept a module: :mod:`.common` (floors, crossovers, the choice of
solver), :mod:`.dense` and :mod:`.fast` (the two solvers), :mod:`.estimator`
(:class:`KernelRidge`), :mod:`.path` (many ridges from one factorisation), :mod:`.holes`
(held-out holes and their error estimate) and :mod:`.selection` (:func:`select_ridge`).
"""

from .common import FAST_BATCH_BYTES, FAST_MIN_N, FAST_MIN_N_SELECT, SOLVERS
from .estimator import KernelRidge
from .holes import hole_blocks, hole_residuals, hole_rmse
from .path import PathRow, ridge_path
from .selection import CRITERIA, DEFAULT_RIDGE_GRID, RidgeSelection, select_ridge

__all__ = ["KernelRidge", "select_ridge", "RidgeSelection", "DEFAULT_RIDGE_GRID", "hole_blocks", "hole_residuals",
           "hole_rmse", "ridge_path", "PathRow", "CRITERIA", "SOLVERS", "FAST_MIN_N", "FAST_MIN_N_SELECT",
           "FAST_BATCH_BYTES"]
