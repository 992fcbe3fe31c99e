"""BACC: Berrut approximated coded computing."""

from __future__ import annotations

import numpy as np

from ..interpolation import barycentric_matrix, berrut_weights
from .base import CodingScheme

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

    def _encoder_matrix(self):
        return barycentric_matrix(self.alpha, berrut_weights(self.n_inputs), self.beta)

    def _decoder_matrix_sorted(self, idx, Y2):
        return barycentric_matrix(self.beta[idx], berrut_weights(idx.size), self.alpha)

    def _decode_sorted(self, idx, Y2):
        return self._decoder_matrix_sorted(idx, Y2) @ Y2, {"loo_mse": self._loo_mse(idx, Y2)}

    def _loo_mse(self, idx, Y2) -> float:
        """Mean squared error of predicting each returned output from the others
        with the same interpolant: the decoder's own error estimate (NaN below 3 returns)."""
        n = idx.size
        if n < 3:
            return float("nan")
        t = self.beta[idx]
        sq = 0.0
        for i in range(n):
            keep = np.arange(n) != i
            B = barycentric_matrix(t[keep], berrut_weights(n - 1), t[i : i + 1])
            sq += float(np.sum((B @ Y2[keep] - Y2[i]) ** 2))
        return sq / Y2.size
