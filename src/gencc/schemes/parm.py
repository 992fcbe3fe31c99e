"""ParM: one summation parity worker that runs a learned parity model."""

from __future__ import annotations

import numpy as np

from .._validation import check_batch, check_int, check_returned
from ..errors import MissingOutputsError
from .base import CodingScheme, Decoded

__all__ = ["ParM"]


class ParM(CodingScheme):
    """Parity models (ParM): K systematic workers and one parity worker.

    Worker k < K computes f(x_k) on x_k itself. Worker K receives the sum
    x_1 + ... + x_K and runs the parity model F_P, trained so that
    F_P(x_1 + ... + x_K) ~ f(x_1) + ... + f(x_K). One missing systematic
    output f(x_j) is estimated by subtraction:
    F_P(sum) - sum_{i != j} f(x_i). N = K + 1; one straggler is tolerated.

    Parameters
    ----------
    n_inputs : int
        K >= 1, the number of inputs per batch (ParM's k).
    parity_model : callable or None
        F_P, vectorised like f: (n, *in_shape) -> (n, *out_shape). ``None``:
        the parity worker runs f itself, which is exact for linear f and
        the untrained baseline otherwise. Trained parity models of the
        digit classifiers: :func:`gencc.workloads.parity.parity_model`, or
        the whole scheme from :func:`gencc.workloads.parity.parm_for_workload`.

    Notes
    -----
    Decoding: the output of every returned systematic worker is copied as
    is (``Decoded.info["exact"]`` marks them); if exactly one systematic
    output is missing and the parity worker returned, it is reconstructed
    by subtraction; any other missing input raises
    :class:`~gencc.errors.MissingOutputsError` listing it, with the partial
    result attached, as :class:`~gencc.Replication` does. Hence
    :meth:`can_decode` holds from one return on (inputs fail one by one)
    and :meth:`is_complete` once every systematic worker or any K of the
    K + 1 workers returned (ParM decodes as soon as K are in; a late
    systematic worker would turn the reconstructed output into the exact
    one).

    The parity worker runs a different function from the others:
    :meth:`worker_function` says so and :func:`gencc.evaluate` honours it.
    The runtime builds the parity model on worker K
    (:meth:`worker_model`) and re-sends a parity task only to a worker that
    runs the parity model.

    References
    ----------
    J. Kosaian, K. V. Rashmi, S. Venkataraman, "Parity Models: Erasure-Coded
    Resilience for Prediction Serving Systems", SOSP 2019.

    Examples
    --------
    >>> import numpy as np, gencc
    >>> s = gencc.ParM(n_inputs=3)
    >>> s.encoder_matrix()
    array([[1., 0., 0.],
           [0., 1., 0.],
           [0., 0., 1.],
           [1., 1., 1.]])
    >>> X = np.arange(6.0).reshape(3, 2)
    >>> Y = s.encode(X) * 2  # a linear f: the parity model None is exact
    >>> s.decode(Y[[0, 2, 3]], [0, 2, 3])
    array([[ 0.,  2.],
           [ 4.,  6.],
           [ 8., 10.]])
    """

    name = "parm"

    def __init__(self, n_inputs, parity_model=None):
        n_inputs = check_int(n_inputs, "n_inputs")
        if parity_model is not None and not callable(parity_model):
            raise TypeError(f"parity_model must be a callable (n, ...) -> (n, ...) or None, "
                            f"got {type(parity_model).__name__}")
        super().__init__(n_inputs, n_inputs + 1, worker_points="systematic")
        self.parity_model = parity_model

    @classmethod
    def _param_names(cls) -> list[str]:
        return ["n_inputs", "parity_model"]

    # -- capacity -----------------------------------------------------------
    @property
    def parity_worker(self) -> int:
        """Index of the parity worker (K)."""
        return self.n_inputs

    @property
    def trusted_returns(self) -> int:
        """1: copied outputs are exact; inputs left without an answer fail explicitly."""
        return 1

    def is_complete(self, returned) -> bool:
        """True once every systematic worker, or any K of the K + 1 workers, returned."""
        returned = set(int(n) for n in returned)
        return len(returned) >= self.n_inputs or self._all_systematic(returned)

    def available(self, returned) -> np.ndarray:
        """Boolean mask (K,): which inputs a decode from ``returned`` answers."""
        idx = check_returned(returned, self.n_workers)
        mask = np.zeros(self.n_inputs, dtype=bool)
        mask[idx[idx < self.n_inputs]] = True
        if np.count_nonzero(~mask) == 1 and self.parity_worker in idx:
            mask[:] = True
        return mask

    # -- what each worker computes --------------------------------------------
    def worker_function(self, n, f):
        """f for the systematic workers, the parity model for worker K.

        Parameters
        ----------
        n : int
        f : callable

        Returns
        -------
        callable
            ``parity_model`` for n = K (f when it is None), else f.
        """
        f = super().worker_function(n, f)
        return self.parity_model if n == self.parity_worker and self.parity_model is not None else f

    def worker_model(self, n, model):
        """What the runtime builds on worker n: the parity model on worker K.

        The parity model travels to the worker process by pickling (a
        committed parity model pickles as a reference to its checkpoint)."""
        if n == self.parity_worker and self.parity_model is not None:
            return _Built(self.parity_model)
        return model

    # -- encoding / decoding --------------------------------------------------
    def _encoder_matrix(self):
        return np.vstack([np.eye(self.n_inputs), np.ones((1, self.n_inputs))])

    def decoder_matrix(self, returned, Y=None) -> np.ndarray:
        """The linear decoder for this returned set: estimate = D @ Y.

        Parameters
        ----------
        returned : sequence of int
        Y : ignored
            Accepted for the common signature.

        Returns
        -------
        D : ndarray, shape (K, len(returned))
            Columns in the order of ``returned``; the row of an input no
            decode can answer is zero.
        """
        idx = check_returned(returned, self.n_workers)
        K = self.n_inputs
        D = np.zeros((K, idx.size))
        sys_cols = np.flatnonzero(idx < K)
        D[idx[sys_cols], sys_cols] = 1.0
        missing = np.setdiff1d(np.arange(K), idx[sys_cols])
        parity = np.flatnonzero(idx == self.parity_worker)
        if missing.size == 1 and parity.size:
            D[missing[0], parity[0]] = 1.0
            D[missing[0], sys_cols] = -1.0
        return D

    def decode_with_info(self, Y, returned) -> Decoded:
        """Copy the systematic outputs; reconstruct one missing output from the parity.

        Parameters
        ----------
        Y : array_like, shape (len(returned), *out_shape)
        returned : sequence of int

        Returns
        -------
        Decoded
            ``info["exact"]`` (K,) marks the copied outputs;
            ``info["reconstructed"]`` is the index of the input rebuilt from
            the parity, or None.

        Raises
        ------
        MissingOutputsError
            When some inputs cannot be answered (two or more systematic
            workers missing, or one missing along with the parity worker).
        """
        idx = check_returned(returned, self.n_workers)
        K = self.n_inputs
        Y2, shape = check_batch(Y, "Y", idx.size)
        est = self.decoder_matrix(idx) @ Y2
        exact = np.zeros(K, dtype=bool)
        exact[idx[idx < K]] = True
        mask = self.available(idx)
        rebuilt = np.flatnonzero(mask & ~exact)
        info = {"exact": exact, "reconstructed": int(rebuilt[0]) if rebuilt.size else None,
                "copies_returned": exact.astype(np.int64)}
        if exact.all():
            info["error_estimate"] = 0.0
        est = est.reshape((K, *shape))
        if not mask.all():
            missing = np.flatnonzero(~mask)
            partial = est.copy()
            partial[missing] = np.nan
            raise MissingOutputsError(
                f"{type(self).__name__}: inputs {missing.tolist()} have no returned systematic worker and "
                f"the parity cannot rebuild them ({K - int(exact.sum())} systematic outputs missing, parity "
                f"{'returned' if self.parity_worker in idx else 'missing'})",
                missing=missing, partial=partial, n_returned=idx.size, n_required=K, info=info,
            )
        return Decoded(est, info)

    def _decode(self, Y, returned, want_info):
        return ParM.decode_with_info(self, Y, returned)


class _Built:
    """A zero-argument factory returning an already built function (picklable if it is)."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self):
        return self.fn

    def __eq__(self, other):
        return isinstance(other, _Built) and other.fn is self.fn

    def __hash__(self):
        return id(self.fn)
