"""LCC: Lagrange coded computing over the reals."""

from __future__ import annotations

import numpy as np
from numpy.polynomial import chebyshev

from .._validation import check_int, check_nonnegative
from ..interpolation import barycentric_matrix, lagrange_weights
from ..robust import berlekamp_welch
from ._cache import DecoderEntry
from .base import CodingScheme, _row_blocks

__all__ = ["LCC"]

# error correction locates the liars on this many fixed random projections of the output coordinates
_N_PROJECTIONS = 3


class LCC(CodingScheme):
    """Lagrange Coded Computing for polynomial f of known degree.

    The encoder is the degree-(K-1) Lagrange polynomial through
    (alpha_k, x_k); for f a polynomial of degree ``degree``, worker outputs lie
    on a polynomial of degree (K-1)*degree, which any (K-1)*degree + 1
    returned workers determine exactly.

    Parameters
    ----------
    n_inputs, n_workers : int
    degree : int, default 1
        Degree of f. Decoding needs ``(n_inputs - 1) * degree + 1`` returns.
    n_adversaries : int, default 0
        A: correct up to A wrong (Byzantine) outputs among the returned, as
        in [1]_; decoding then needs ``(n_inputs - 1) * degree + 2 A + 1``
        returns (``min_returns``), so N must be at least that. The workers
        found wrong are left out and listed in ``Decoded.info["flagged"]``.
    adversary_rtol : float, default 1e-6
        With A > 0, a located worker is flagged when its output is off the
        polynomial fitted to the others by more than this times their
        largest absolute output; raise it for outputs computed in low
        precision.
    data_points, worker_points : str or array_like

    Notes
    -----
    The decoder fits the degree-D polynomial (D = (K-1)*degree) to all
    returned outputs by least squares in the Chebyshev basis (interpolation
    when exactly D + 1 return), which is exact for polynomial f and stable.
    For non-polynomial f it is an approximation with no guarantee.

    Error correction (A > 0). With at most A wrong outputs among |F| >= D
    + 2A + 1 returns, the honest outputs lie on one polynomial u of degree
    D; with the locator ``L(z) = prod_{e wrong} (z - beta_e)`` (degree A,
    padded with arbitrary factors when fewer than A lie), ``P = u L`` of
    degree D + A satisfies ``P(beta_i) = y_i L(beta_i)`` at every returned
    node (Berlekamp-Welch [2]_). Over the reals this is solved by
    :func:`gencc.robust.berlekamp_welch` (the Chebyshev basis, the
    singular vector of the smallest singular value) on three fixed
    Gaussian projections of the output coordinates, so that a liar is
    seen whatever coordinates it corrupts; each projection proposes the A
    nodes where ``|L|`` is smallest. Of the three proposals the one whose
    complement a degree-D least-squares fit explains best is kept, and of
    its A nodes those off that fit by more than ``adversary_rtol`` (relative)
    are flagged: exactly the liars for polynomial f with at most A of
    them. The decode is then the least-squares fit to the rest. For
    non-polynomial f every proposed node is off the fit and A workers are
    dropped.

    References
    ----------
    .. [1] Q. Yu, S. Li, N. Raviv, S. M. M. Kalan, M. Soltanolkotabi,
       S. Avestimehr, "Lagrange Coded Computing", AISTATS 2019.
    .. [2] L. R. Welch, E. R. Berlekamp, "Error correction for algebraic
       block codes", US Patent 4,633,470 (1986).

    Examples
    --------
    >>> import numpy as np, gencc
    >>> s = gencc.LCC(3, 9, degree=2, n_adversaries=1)  # needs 2 * 2 + 2 + 1 = 7 returns
    >>> X = np.array([[1.0], [2.0], [-1.0]])
    >>> Y = s.encode(X) ** 2
    >>> Y[5] = -7.0                                      # worker 5 lies
    >>> dec = s.decode_with_info(Y[1:8], range(1, 8))
    >>> dec.info["flagged"].tolist(), np.allclose(dec.estimate, X ** 2)
    ([5], True)
    """

    name = "lcc"

    def __init__(self, n_inputs, n_workers, *, degree=1, n_adversaries=0, adversary_rtol=1e-6,
                 data_points="chebyshev1", worker_points="chebyshev2"):
        super().__init__(n_inputs, n_workers, data_points=data_points, worker_points=worker_points)
        self.degree = check_int(degree, "degree")
        self.n_adversaries = check_int(n_adversaries, "n_adversaries", minimum=0)
        self.adversary_rtol = check_nonnegative(adversary_rtol, "adversary_rtol")
        if self.n_workers < self.min_returns:
            if self.n_adversaries:
                raise ValueError(
                    f"n_workers must be >= (n_inputs - 1) * degree + 2 * n_adversaries + 1 = {self.min_returns} "
                    f"for LCC with n_adversaries={self.n_adversaries}, got {self.n_workers}"
                )
            raise ValueError(
                f"n_workers must be >= (n_inputs - 1) * degree + 1 = {self.min_returns} for LCC, "
                f"got {self.n_workers}"
            )

    @property
    def _poly_degree(self) -> int:
        """D = (K - 1) deg, the degree of the honest outputs in beta."""
        return (self.n_inputs - 1) * self.degree

    @property
    def min_returns(self) -> int:
        """``(K - 1) deg + 2 A + 1``: the recovery threshold with A wrong outputs corrected."""
        return self._poly_degree + 2 * self.n_adversaries + 1

    @property
    def trusted_returns(self) -> int:
        """The recovery threshold (K - 1) deg + 2 A + 1: exact for polynomial f of that degree
        with at most A wrong outputs."""
        return self.min_returns

    def _screen(self, idx, Y2):
        """Locate up to ``n_adversaries`` wrong outputs (Berlekamp-Welch, class Notes):
        keep-mask over Y2's rows."""
        A = self.n_adversaries
        if A == 0:
            return None
        n = idx.size
        keep = np.ones(n, dtype=bool)
        if n < self.min_returns:  # only a systematic code with every systematic worker in
            return keep
        order = np.argsort(self.beta[idx], kind="stable")
        t, Ys = self.beta[idx][order], Y2[order]
        D = self._poly_degree
        G = np.random.default_rng(0).standard_normal((Ys.shape[1], _N_PROJECTIONS))
        loc, valid = berlekamp_welch(t, Ys @ G, D + A, A)
        V = chebyshev.chebvander(t, D)
        best = None
        for j in np.flatnonzero(valid):
            cand = np.argsort(loc[:, j], kind="stable")[:A]
            rest = np.setdiff1d(np.arange(n), cand)
            coef = np.linalg.lstsq(V[rest], Ys[rest], rcond=None)[0]
            scale = max(float(np.abs(Ys[rest]).max()), np.finfo(float).tiny)
            off = np.abs(Ys - V @ coef).max(axis=1) / scale  # (n,): each row's distance to the fit
            fit = float(off[rest].max())
            if best is None or fit < best[0]:
                best = (fit, cand, off)
        if best is None:  # every output the same: nothing is wrong
            return keep
        _, cand, off = best
        bad = cand[off[cand] > self.adversary_rtol]
        keep[order[bad]] = False
        return keep

    @property
    def caches_decoders(self) -> bool:
        return True

    def _encoder_matrix(self):
        return barycentric_matrix(self.alpha, lagrange_weights(self.alpha), self.beta)

    def _encode_free(self, X2):
        w = lagrange_weights(self.alpha)
        return np.vstack([barycentric_matrix(self.alpha, w, self.beta[rows]) @ X2
                          for rows in _row_blocks(self.n_workers, self.n_inputs)])

    def _decoder_entry_sorted(self, idx):
        return DecoderEntry(None, self._decoder_matrix_sorted(idx, None))

    def _decode_sorted(self, idx, Y2, want_info=True):
        # least squares on the outputs themselves: no (K, |F|) matrix on a direct decode
        D = self._poly_degree
        coef = np.linalg.lstsq(chebyshev.chebvander(self.beta[idx], D), Y2, rcond=None)[0]
        return chebyshev.chebvander(self.alpha, D) @ coef, {}

    def _decoder_matrix_sorted(self, idx, Y2):
        D = self._poly_degree
        V = chebyshev.chebvander(self.beta[idx], D)
        coef_map = np.linalg.lstsq(V, np.eye(idx.size), rcond=None)[0]
        return chebyshev.chebvander(self.alpha, D) @ coef_map
