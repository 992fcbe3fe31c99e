"""LCC: Lagrange coded computing over the reals."""

from __future__ import annotations

import numpy as np
from numpy.polynomial import chebyshev

from .._validation import check_int
from ..interpolation import barycentric_matrix, lagrange_weights
from ._cache import DecoderEntry
from .base import CodingScheme, _row_blocks

__all__ = ["LCC"]


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
    data_points, worker_points : str or array_like

    Notes
    -----
    The decoder fits the degree-D polynomial (D = (K-1)*degree) to all
    returned outputs by least squares in the Chebyshev basis (interpolation
    when exactly D + 1 return), which is exact for polynomial f and stable.
    For non-polynomial f it is an approximation with no guarantee.

    References
    ----------
    .. [1] Q. Yu, S. Li, N. Raviv, S. M. M. Kalan, M. Soltanolkotabi,
       S. Avestimehr, "Lagrange Coded Computing", AISTATS 2019.
    """

    name = "lcc"

    def __init__(self, n_inputs, n_workers, *, degree=1, data_points="chebyshev1", worker_points="chebyshev2"):
        super().__init__(n_inputs, n_workers, data_points=data_points, worker_points=worker_points)
        self.degree = check_int(degree, "degree")
        if self.n_workers < self.min_returns:
            raise ValueError(
                f"n_workers must be >= (n_inputs - 1) * degree + 1 = {self.min_returns} for LCC, "
                f"got {self.n_workers}"
            )

    @property
    def min_returns(self) -> int:
        return (self.n_inputs - 1) * self.degree + 1

    @property
    def trusted_returns(self) -> int:
        """The recovery threshold (K - 1) deg + 1: exact for polynomial f of that degree."""
        return self.min_returns

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
        D = self.min_returns - 1
        coef = np.linalg.lstsq(chebyshev.chebvander(self.beta[idx], D), Y2, rcond=None)[0]
        return chebyshev.chebvander(self.alpha, D) @ coef, {}

    def _decoder_matrix_sorted(self, idx, Y2):
        D = self.min_returns - 1
        V = chebyshev.chebvander(self.beta[idx], D)
        coef_map = np.linalg.lstsq(V, np.eye(idx.size), rcond=None)[0]
        return chebyshev.chebvander(self.alpha, D) @ coef_map
