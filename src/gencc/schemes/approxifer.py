"""ApproxIFER: Berrut coded computing that locates and drops Byzantine workers."""

from __future__ import annotations

import numpy as np

from .._validation import check_int
from ..robust import berlekamp_welch
from .bacc import BACC

__all__ = ["ApproxIFER"]

# above this many output coordinates the vote runs on this many fixed random projections of them
_MAX_VOTES = 256


class ApproxIFER(BACC):
    """ApproxIFER: Berrut coding with adversary location by rational fits and a vote.

    Encodes and decodes as :class:`BACC` (Berrut's rational interpolant
    through (alpha_k, x_k), evaluated at the worker points; Berrut's
    interpolant through the kept (beta_n, y_n), evaluated at alpha). With
    ``n_adversaries`` A > 0 the decoder first locates A returned workers as
    wrong and leaves them out (see Notes); ``Decoded.info["flagged"]`` lists
    them, as for ``GCC(robust=True)``.

    Parameters
    ----------
    n_inputs, n_workers : int
        K and N.
    n_adversaries : int, default 1
        A, the number of wrong outputs to locate and drop. Decoding then
        needs ``2 K + 2 A - 1`` returned workers (``min_returns``), so N
        must be at least that. A = 0 decodes exactly as :class:`BACC`.
    data_points, worker_points : str or array_like
        As for :class:`BACC`: Chebyshev first kind (alpha) and second kind
        (beta) by default.

    Notes
    -----
    Berrut's interpolant through K points is a rational function of type
    (K - 1, K - 1), so for linear f each output coordinate of the honest
    workers lies on a rational function p / q of that type in beta, and
    for smooth f close to one. With A wrong outputs at the nodes in E and
    the locator ``L(z) = prod_{e in E} (z - beta_e)``, the polynomials
    ``P = p L`` and ``Q = q L`` of degree K + A - 1 satisfy
    ``P(beta_i) = y_i Q(beta_i)`` at every returned node: a homogeneous
    linear system of |F| equations in 2 (K + A) unknowns, determined up to
    scale when ``|F| >= 2 K + 2 A - 1``, i.e. ``N >= 2 K + 2 A + S - 1``
    with S stragglers [1]_. For each output coordinate (or, above 256
    coordinates, for each of 256 fixed Gaussian projections of them),
    :func:`gencc.robust.berlekamp_welch` solves it by least squares in the
    Chebyshev basis, and the A nodes where ``|Q|`` is smallest are that
    coordinate's located workers. The A workers located by the most
    coordinates (ties to the smaller total ``|Q|``) are dropped, and the
    rest decoded with Berrut's interpolant. It always drops A workers:
    with fewer liars than A, honest ones go too.

    Choices of ours within [1]_'s scheme, for stability over the reals:
    the fit in the Chebyshev basis solved by the singular value
    decomposition, the standardisation of each coordinate, and locating by
    the smallest ``|Q|`` at the nodes rather than by the roots of Q.

    References
    ----------
    .. [1] M. Soleymani, R. E. Ali, H. Mahdavifar, A. S. Avestimehr,
       "ApproxIFER: A Model-Agnostic Approach to Resilient and Robust
       Prediction Serving Systems", AAAI 2022.
    .. [2] T. Jahani-Nezhad, M. A. Maddah-Ali, "Berrut Approximated Coded
       Computing: Straggler Resistance Beyond Polynomial Computing",
       IEEE TPAMI 45(1), 2023.

    Examples
    --------
    >>> import numpy as np, gencc
    >>> s = gencc.ApproxIFER(n_inputs=2, n_workers=8, n_adversaries=1)
    >>> s.min_returns
    5
    >>> X = np.array([[0.5], [-1.0]])
    >>> Y = 2.0 * s.encode(X)          # a linear f: exactly rational in beta
    >>> Y[3] = 40.0                    # worker 3 lies
    >>> dec = s.decode_with_info(Y, range(8))
    >>> dec.info["flagged"].tolist()
    [3]
    >>> rest = [0, 1, 2, 4, 5, 6, 7]   # the decode is Berrut's from the others
    >>> np.allclose(dec.estimate, gencc.BACC(2, 8).decode(Y[rest], rest), rtol=0, atol=1e-12)
    True
    """

    name = "approxifer"

    def __init__(self, n_inputs, n_workers, *, n_adversaries=1, data_points="chebyshev1",
                 worker_points="chebyshev2"):
        super().__init__(n_inputs, n_workers, data_points=data_points, worker_points=worker_points)
        self.n_adversaries = check_int(n_adversaries, "n_adversaries", minimum=0)
        if self.n_workers < self.min_returns:
            raise ValueError(
                f"n_workers must be >= 2 * n_inputs + 2 * n_adversaries - 1 = {self.min_returns} for "
                f"ApproxIFER with n_adversaries={self.n_adversaries}, got {self.n_workers}"
            )

    @property
    def min_returns(self) -> int:
        """``2 K + 2 A - 1`` returns locate A adversaries; 1 when A = 0 (plain Berrut)."""
        if self.n_adversaries == 0:
            return 1
        return 2 * self.n_inputs + 2 * self.n_adversaries - 1

    def _screen(self, idx, Y2):
        """Locate ``n_adversaries`` returned workers by Berlekamp-Welch rational fits and a vote
        across output coordinates (class Notes): keep-mask over Y2's rows."""
        A = self.n_adversaries
        if A == 0:
            return None
        keep = np.ones(idx.size, dtype=bool)
        if idx.size < self.min_returns:  # only a systematic code with every systematic worker in
            return keep
        order = np.argsort(self.beta[idx], kind="stable")
        Ys = Y2[order]
        if Ys.shape[1] > _MAX_VOTES:
            G = np.random.default_rng(0).standard_normal((Ys.shape[1], _MAX_VOTES))
            Ys = Ys @ G
        D = self.n_inputs + A - 1
        loc, valid = berlekamp_welch(self.beta[idx][order], Ys, D, D)
        if not valid.any():  # every coordinate constant across the returns: nothing to locate
            return keep
        loc = loc[:, valid]
        votes = np.zeros(idx.size)
        located = np.argsort(loc, axis=0, kind="stable")[:A]  # (A, m'): each coordinate's A smallest |Q|
        np.add.at(votes, located.ravel(), 1.0)
        bad = np.lexsort((loc.sum(axis=1), -votes))[:A]
        keep[order[bad]] = False
        return keep
