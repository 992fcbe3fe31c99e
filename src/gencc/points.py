"""Point sets on [-1, 1] for data points (alpha) and worker points (beta).

Every function returns the points sorted in increasing order, as float64.
"""

from __future__ import annotations

import numpy as np

from ._validation import check_int

__all__ = ["chebyshev1", "chebyshev2", "equispaced", "make_points", "POINT_SETS"]


def chebyshev1(n: int) -> np.ndarray:
    """Chebyshev points of the first kind, ``cos((2j+1) pi / (2n))``, j = 0..n-1.

    Interior points (the endpoints are never included); the default for the
    data points alpha.

    Parameters
    ----------
    n : int
        Number of points, n >= 1.

    Returns
    -------
    points : ndarray, shape (n,)
        Sorted increasingly.

    Examples
    --------
    >>> chebyshev1(2).round(4)
    array([-0.7071,  0.7071])
    """
    n = check_int(n, "n")
    j = np.arange(n)
    return np.sort(np.cos((2 * j + 1) * np.pi / (2 * n)))


def chebyshev2(n: int) -> np.ndarray:
    """Chebyshev points of the second kind, ``cos(j pi / (n-1))``, j = 0..n-1.

    Includes both endpoints; the BACC paper's convention and the default for
    the worker points beta. For n = 1 the single point is 0.

    Parameters
    ----------
    n : int
        Number of points, n >= 1.

    Returns
    -------
    points : ndarray, shape (n,)
        Sorted increasingly.

    Examples
    --------
    >>> chebyshev2(3)
    array([-1.,  0.,  1.])
    """
    n = check_int(n, "n")
    if n == 1:
        return np.zeros(1)
    j = np.arange(n)
    pts = np.cos(j * np.pi / (n - 1))
    pts[np.abs(pts) < 1e-15] = 0.0
    return np.sort(pts)


def equispaced(n: int) -> np.ndarray:
    """``n`` equispaced points from -1 to 1 inclusive (0 for n = 1).

    Examples
    --------
    >>> equispaced(3)
    array([-1.,  0.,  1.])
    """
    n = check_int(n, "n")
    if n == 1:
        return np.zeros(1)
    return np.linspace(-1.0, 1.0, n)


POINT_SETS = {"chebyshev1": chebyshev1, "chebyshev2": chebyshev2, "equispaced": equispaced}


def make_points(spec, n: int, name: str = "points") -> np.ndarray:
    """Resolve a point-set choice to ``n`` sorted points on [-1, 1].

    Parameters
    ----------
    spec : {"chebyshev1", "chebyshev2", "equispaced"} or array_like, shape (n,)
        A named point set or explicit points (finite, distinct, inside [-1, 1]).
    n : int
        Number of points wanted.
    name : str
        Argument name for error messages.

    Returns
    -------
    points : ndarray, shape (n,)
        Sorted increasingly.
    """
    if isinstance(spec, str):
        try:
            return POINT_SETS[spec](n)
        except KeyError:
            raise ValueError(
                f"{name} must be one of {sorted(POINT_SETS)} or an array of {n} points, got {spec!r}"
            ) from None
    pts = np.asarray(spec, dtype=np.float64)
    if pts.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), got {pts.shape}")
    if not np.all(np.isfinite(pts)) or np.any(np.abs(pts) > 1):
        raise ValueError(f"{name} must be finite and inside [-1, 1]")
    pts = np.sort(pts)
    if np.any(np.diff(pts) <= 0):
        raise ValueError(f"{name} must be distinct, got repeated points")
    return pts
