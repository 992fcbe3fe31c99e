"""One row of a ridge path: a fit of one kernel at one ridge, as the solvers hand it to the selection."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

__all__ = ["PathRow"]


@dataclass(eq=False)
class PathRow:
    """A fit of one kernel at one ridge (:func:`~gencc.ridge.ridge_path`, the selection's candidates).

    Attributes
    ----------
    lam : float
        The effective ridge (objective normalised by 1/n).
    c : ndarray, shape (n, m), or None
        Kernel coefficients; ``c / a[:, None]`` are the leave-one-out residuals.
    a : ndarray, shape (n,), or None
        ``diag(A)`` with ``A = Z (Z^T G Z + n lam I)^{-1} Z^T``.
    pred : ndarray, shape (len(targets), m), or None
        Predictions at the targets, when asked for.
    block : ndarray, shape (len(blocks), m), or None
        The residual ``y_j - u_{-B}(t_j)`` per leave-block-out set, when asked for.
    kernel : Kernel or None
        The row's kernel (the linear-time solver serves several in one batch).
    batch : int
        Which batch of filters computed it (rows of one batch share their memory).
    solution : callable or None
        ``solution()`` (the linear-time solver: ``solution(lazy=False)``) builds the
        fitted solution; None once the row is handed to a caller of :func:`ridge_path`.
    """

    lam: float
    c: np.ndarray | None = None
    a: np.ndarray | None = None
    pred: np.ndarray | None = None
    block: np.ndarray | None = None
    kernel: object = None
    batch: int = 0
    solution: Callable | None = field(default=None, repr=False)
