"""Fits of one kernel for several ridges from one factorisation (:func:`ridge_path`)."""

from __future__ import annotations

import numpy as np

from ..kernels import Kernel
from .common import _use_fast
from .dense import _DenseSolver
from .fast import _FastSolver
from .path_row import PathRow

__all__ = ["ridge_path", "PathRow"]


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
    list of PathRow, one per ridge
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
                row.solution = None
            return rows
    rows = _DenseSolver(kernel, t, Y2).path(lams, relative=relative, targets=targets, blocks=blocks)
    for row in rows:
        row.solution = None
    return rows
