"""Uncoded execution and replication: the baselines with no coding."""

from __future__ import annotations

import numpy as np

from .._validation import check_int
from ..errors import MissingOutputsError
from .base import CodingScheme

__all__ = ["Replication", "Uncoded"]


class Replication(CodingScheme):
    """Each input is sent unchanged to several workers; the first copy wins.

    Worker n computes input ``n % K``, so every input has ``N // K`` or
    ``N // K + 1`` copies.

    Parameters
    ----------
    n_inputs : int
        K.
    n_workers : int
        N >= K.

    Notes
    -----
    An input none of whose copies returned is missing: :meth:`decode` raises
    :class:`~gencc.errors.MissingOutputsError` listing it (with the partial
    result attached), never a silent NaN.

    Examples
    --------
    >>> import gencc
    >>> gencc.Replication(n_inputs=2, n_workers=4).assignment
    array([0, 1, 0, 1])
    """

    name = "replication"
    _supports_systematic = False  # already sends x_k itself: its worker points carry no code

    def __init__(self, n_inputs, n_workers, *, data_points="chebyshev1", worker_points="chebyshev2"):
        n_inputs = check_int(n_inputs, "n_inputs")
        n_workers = check_int(n_workers, "n_workers")
        if n_workers < n_inputs:
            raise ValueError(f"n_workers must be >= n_inputs = {n_inputs} for replication, got {n_workers}")
        super().__init__(n_inputs, n_workers, data_points=data_points, worker_points=worker_points)
        self.assignment = np.arange(self.n_workers) % self.n_inputs

    @property
    def copies(self) -> int:
        """Smallest number of copies of any input."""
        return self.n_workers // self.n_inputs

    def _encoder_matrix(self):
        E = np.zeros((self.n_workers, self.n_inputs))
        E[np.arange(self.n_workers), self.assignment] = 1.0
        return E

    def available(self, returned) -> np.ndarray:
        """Boolean mask (K,): which inputs have at least one returned copy."""
        mask = np.zeros(self.n_inputs, dtype=bool)
        mask[self.assignment[np.asarray(returned, dtype=np.int64)]] = True
        return mask

    @property
    def trusted_returns(self) -> int:
        """1: every returned copy is exact; inputs with no copy fail explicitly."""
        return 1

    def is_complete(self, returned) -> bool:
        """True once every input has a copy: further copies are identical."""
        return len(returned) > 0 and bool(self.available(returned).all())

    def _decoder_matrix_sorted(self, idx, Y2):
        D = np.zeros((self.n_inputs, idx.size))
        first = {}
        for col, w in enumerate(idx):
            first.setdefault(self.assignment[w], col)
        for k, col in first.items():
            D[k, col] = 1.0
        return D

    def _encode2(self, X2):
        return X2[self.assignment]  # worker n gets a copy of x_{assignment[n]}: a gather, no (N, K) product

    def _decode_sorted(self, idx, Y2, want_info=True):
        # a copy per input: the first returned worker holding it (a gather, not a product)
        ks, first = np.unique(self.assignment[idx], return_index=True)
        est = np.zeros((self.n_inputs, Y2.shape[1]))
        est[ks] = Y2[first]
        return est, {}

    def _decode(self, Y, returned, want_info):
        idx, order, Y2, shape = self._prepare(Y, returned)
        mask = self.available(idx)
        decoded = super()._decode(Y, returned, want_info)
        decoded.info["error_estimate"] = 0.0  # a returned copy is f's own output
        decoded.info["exact"] = mask
        decoded.info["copies_returned"] = np.bincount(self.assignment[idx], minlength=self.n_inputs)
        if not mask.all():
            missing = np.flatnonzero(~mask)
            partial = decoded.estimate.copy()
            partial[missing] = np.nan
            raise MissingOutputsError(
                f"{type(self).__name__}: no returned worker computed inputs {missing.tolist()}",
                missing=missing, partial=partial, n_returned=idx.size, n_required=self.n_inputs,
                info=decoded.info,
            )
        return decoded


class Uncoded(Replication):
    """Uncoded execution: K workers, worker k computes input k, wait for all.

    Parameters
    ----------
    n_inputs : int
        K; the number of workers is K too.
    n_workers : int, optional
        Must equal ``n_inputs`` if given (accepted so all schemes share a signature).
    """

    name = "uncoded"

    def __init__(self, n_inputs, n_workers=None, *, data_points="chebyshev1", worker_points="chebyshev2"):
        n_inputs = check_int(n_inputs, "n_inputs")
        if n_workers is not None and n_workers != n_inputs:
            raise ValueError(f"n_workers must equal n_inputs = {n_inputs} for uncoded execution, got {n_workers}")
        super().__init__(n_inputs, n_inputs, data_points=data_points, worker_points=worker_points)
