"""BACC: Berrut approximated coded computing."""

from __future__ import annotations

import numpy as np

from ..interpolation import barycentric_matrix, berrut_weights
from ._cache import DecoderEntry
from .base import CodingScheme, _row_blocks

__all__ = ["BACC"]


class BACC(CodingScheme):
    """Berrut Approximated Coded Computing.

    The encoder is Berrut's rational interpolant through (alpha_k, x_k)
    evaluated at the worker points; the decoder is Berrut's interpolant
    through the returned (beta_n, y_n), with the alternating signs following
    each returned worker's rank in the sorted returned set, evaluated at alpha.

    Parameters
    ----------
    n_inputs, n_workers : int
    data_points, worker_points : str or array_like
        Defaults: Chebyshev first kind (alpha) and second kind (beta), as in [1]_.

    References
    ----------
    .. [1] T. Jahani-Nezhad, M. A. Maddah-Ali, "Berrut Approximated Coded
       Computing: Straggler Resistance Beyond Polynomial Computing",
       IEEE TPAMI 45(1), 2023.

    Examples
    --------
    >>> import numpy as np, gencc
    >>> s = gencc.BACC(n_inputs=2, n_workers=5)
    >>> s.encoder_matrix().shape
    (5, 2)
    """

    name = "bacc"

    @property
    def caches_decoders(self) -> bool:
        return True

    def _encoder_matrix(self):
        return barycentric_matrix(self.alpha, berrut_weights(self.n_inputs), self.beta)

    def _encode_free(self, X2):
        w = berrut_weights(self.n_inputs)
        return np.vstack([barycentric_matrix(self.alpha, w, self.beta[rows]) @ X2
                          for rows in _row_blocks(self.n_workers, self.n_inputs)])

    def _decoder_matrix_sorted(self, idx, Y2):
        return barycentric_matrix(self.beta[idx], berrut_weights(idx.size), self.alpha)

    def _decoder_entry_sorted(self, idx):
        n = idx.size
        loo = _loo_matrix(self.beta[idx]) if n >= 3 else np.zeros((n, n))
        return DecoderEntry(None, self._decoder_matrix_sorted(idx, None), loo, n >= 3)

    def _decode_sorted(self, idx, Y2, want_info=True):
        # the (K, |F|) interpolation map in blocks of rows: never more than 8 MiB of it at once
        t, w = self.beta[idx], berrut_weights(idx.size)
        est = np.vstack([barycentric_matrix(t, w, self.alpha[rows]) @ Y2 for rows in _row_blocks(self.n_inputs, idx.size)])
        return est, ({"loo_mse": self._loo_mse(idx, Y2)} if want_info else {})  # decode() needs no O(|F|^2) LOO

    def _loo_mse(self, idx, Y2) -> float:
        """Mean squared error of predicting each returned output from the others
        with the same interpolant: the decoder's own error estimate (NaN below 3 returns)."""
        n = idx.size
        if n < 3:
            return float("nan")
        t = self.beta[idx]
        sq = 0.0
        for rows in _row_blocks(n, n):
            sq += float(np.sum((_loo_matrix(t, rows) @ Y2) ** 2))
        return sq / Y2.size


def _loo_matrix(t, rows=slice(None)):
    """Leave-one-out residuals of Berrut's interpolant as a linear map: (len(rows), n).

    Row i predicts node i from the other n - 1 (sorted) nodes with Berrut's
    weights of the reduced set, (-1)^j for j < i and (-1)^(j-1) for j > i,
    and subtracts y_i: ``residuals = L @ Y``.
    """
    n = t.size
    i = np.arange(n)[rows][:, None]
    j = np.arange(n)[None, :]
    sign = np.where(j % 2 == 0, 1.0, -1.0) * np.where(j < i, 1.0, -1.0)
    diff = t[i] - t[None, :]
    self_ = j == i
    C = np.where(self_, 0.0, sign / np.where(self_, 1.0, diff))
    L = C / C.sum(axis=1, keepdims=True)
    L[self_] = -1.0
    return L
