"""Point sets on [-1, 1] for data points (alpha) and worker points (beta).

Every function returns the points sorted in increasing order, as float64.
"""

from __future__ import annotations

import numpy as np

from ._validation import check_int

__all__ = ["chebyshev1", "chebyshev2", "equispaced", "make_points", "parity_points", "systematic_points",
           "POINT_SETS"]


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
        if spec == "systematic":
            raise ValueError(
                f"{name}='systematic' needs the data points: give it to a scheme (GCC, LeTCC, BACC, LCC) "
                "or call systematic_points(alpha, n)"
            )
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


def _neighbour_gaps(alpha, pts):
    """Distances (d_l, d_r) from each alpha_k to its nearest other point of ``pts``
    on each side; 2 where a side has none (extrapolation). Shapes (K,)."""
    pts = np.sort(pts)
    i = np.searchsorted(pts, alpha, side="left")
    j = np.searchsorted(pts, alpha, side="right")
    d_l = np.where(i > 0, alpha - pts[np.maximum(i - 1, 0)], 2.0)
    d_r = np.where(j < pts.size, pts[np.minimum(j, pts.size - 1)] - alpha, 2.0)
    return d_l, d_r


def parity_points(alpha, n_parity: int, *, grid_size: int = 2001, sep: float = 0.1) -> np.ndarray:
    """Parity worker points of a systematic code, placed greedily (see Notes).

    Parameters
    ----------
    alpha : array_like, shape (K,)
        The data points, distinct, inside [-1, 1].
    n_parity : int
        N - K, >= 0.
    grid_size : int, default 2001
        Candidate positions: this many equispaced points on [-1, 1]; raise
        it when the gaps of alpha approach 2 / grid_size (K of a few hundred).
    sep : float, default 0.1
        A parity keeps at least ``sep`` times the gap of ``[-1, alpha, 1]``
        it lies in away from every alpha_k.

    Returns
    -------
    points : ndarray, shape (n_parity,)
        Sorted increasingly, distinct from each other and from alpha.

    Notes
    -----
    When worker k straggles, input k is decoded by the decoder's fit through
    the other returned points, at alpha_k. For a piecewise-linear fit the
    error there is bounded by ``|u''| d_l d_r / 2``, with d_l and d_r the
    distances from alpha_k to its nearest returned points on each side. Each
    parity in turn goes to the candidate that most lowers the mean over k of
    ``d_l d_r`` (one systematic worker missing; ties to the leftmost). Left
    alone this puts a parity next to alpha_k, a near copy of x_k: best for
    x sin x, but on the MLP the nearly coincident nodes cost the other
    missing inputs; ``sep`` keeps parities off the data points.

    Measured (GCC's default decoder, alpha = Chebyshev first kind; MSE of
    the inputs whose systematic worker straggled; x sin x on d = 4, inputs
    uniform on [-3, 3], and a random 784-64-10 tanh MLP on uniform [0, 1]
    inputs; (K, N) in (4,5), (4,6), (4,8), (8,10), (8,12), (8,16), S =
    1..N-K random stragglers, 600 seeded rounds each;
    ``benchmarks/systematic_placement.py``). Geometric mean over the 21
    settings of each rule's degraded MSE over the best rule's, x sin x /
    MLP: this rule 1.30 / 1.32; sep = 0.25: 1.56 / 1.43; no separation
    (near copies): 1.18 / 1.77; Chebyshev second-kind parities 1.93 / 1.14;
    equispaced 2.14 / 1.32; equispaced inside [alpha_0, alpha_{K-1}]
    1.33 / 2.82; midpoints of the widest gaps 1.73 / 3.61; nested Chebyshev
    angle midpoints 1.88 / 1.93; minimising the widest hole a missing
    worker leaves 1.32 / 2.04; Chebyshev second kind of N with the K points
    nearest alpha moved onto it 1.92 / 1.20. No rule wins on both functions
    (x sin x wants parities inside, the MLP at the ends); this one has the
    smallest worst case. Its weak spot: x sin x at K = 8 with 2 or 4
    parities, 1.7 and 1.4 against 0.85 and 0.78 for the best rules there.

    Examples
    --------
    >>> parity_points(chebyshev1(4), 2).round(3)
    array([-0.932,  0.932])
    """
    alpha = np.sort(np.asarray(alpha, dtype=np.float64))
    n_parity = check_int(n_parity, "n_parity", minimum=0)
    grid = np.linspace(-1.0, 1.0, check_int(grid_size, "grid_size", minimum=3))
    edges = np.concatenate([[-1.0], alpha, [1.0]])
    i = np.clip(np.searchsorted(edges, grid) - 1, 0, edges.size - 2)
    dist = np.min(np.abs(grid[:, None] - alpha[None, :]), axis=1)
    grid = grid[(dist > 0) & (dist >= sep * (edges[i + 1] - edges[i]))]
    par: list[float] = []
    for _ in range(n_parity):
        if grid.size == 0:
            raise ValueError(f"n_parity={n_parity} leaves no room for distinct parity points; raise grid_size")
        d_l, d_r = _neighbour_gaps(alpha, np.concatenate([alpha, par]))
        off = alpha[None, :] - grid[:, None]  # (G, K): candidate p left of alpha_k when > 0
        d_l = np.where((off > 0) & (off < d_l), off, d_l)
        d_r = np.where((off < 0) & (-off < d_r), -off, d_r)
        h = d_l * d_r
        scores = h.mean(axis=1) + 1e-3 * h.max(axis=1)
        scores = np.round(scores / scores.min(), 9)  # mirror-image ties go to the leftmost
        best = int(np.argmin(scores))
        par.append(float(grid[best]))
        grid = np.delete(grid, best)
    return np.sort(np.asarray(par, dtype=np.float64))


def systematic_points(alpha, n_workers: int) -> np.ndarray:
    """Worker points of a systematic code: the data points, then the parities.

    Parameters
    ----------
    alpha : array_like, shape (K,)
        The data points.
    n_workers : int
        N >= K.

    Returns
    -------
    beta : ndarray, shape (N,)
        ``beta[:K] == alpha`` (worker k < K computes f(x_k)), then
        ``parity_points(alpha, N - K)`` in increasing order. Not sorted as a
        whole: the worker index says which input a systematic worker holds.
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    n_workers = check_int(n_workers, "n_workers")
    if n_workers < alpha.size:
        raise ValueError(f"n_workers must be >= n_inputs = {alpha.size} for a systematic code, got {n_workers}")
    return np.concatenate([alpha, parity_points(alpha, n_workers - alpha.size)])
