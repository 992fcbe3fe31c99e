"""The interface every coding scheme implements.

A scheme maps K inputs to N coded inputs with a fixed linear encoder, and maps
the outputs of any returned subset of workers back to K estimates.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

import numpy as np

from .._validation import check_batch, check_int, check_returned, require_returns
from ..points import make_points, systematic_points

__all__ = ["CodingScheme", "Decoded"]


@dataclass
class Decoded:
    """A decoded batch and what the decoder knows about it.

    Attributes
    ----------
    estimate : ndarray, shape (K, *out_shape)
    info : dict
        Scheme-specific facts, e.g. the kernel and ridge chosen and
        ``"loo_mse"`` (or ``"error_estimate"``), the decoder's own estimate of
        its mean squared error. A systematic scheme adds ``"exact"``, a boolean
        mask of shape (K,): the inputs answered by their own returned worker,
        copied as is.
    """

    estimate: np.ndarray
    info: dict = field(default_factory=dict)

    @property
    def error_estimate(self) -> float | None:
        """The decoder's own mean-squared-error estimate, if it has one."""
        return self.info.get("error_estimate", self.info.get("loo_mse"))


class CodingScheme:
    """Base class of coding schemes over K inputs and N workers.

    Subclasses take their hyper-parameters as keyword arguments of
    ``__init__`` and store each under the same name (as in scikit-learn), and
    implement ``_encoder_matrix`` and ``_decode_sorted``.

    Parameters
    ----------
    n_inputs : int
        K, the number of inputs per batch.
    n_workers : int
        N, the number of workers.
    data_points : str or array_like, shape (K,)
        The points alpha_k on [-1, 1].
    worker_points : str or array_like, shape (N,)
        The points beta_n on [-1, 1], or ``"systematic"``: worker k < K sits
        on alpha_k and computes f(x_k) itself; workers K..N-1 are parities
        placed by :func:`gencc.points.systematic_points` (needs N >= K).

    Notes
    -----
    A systematic scheme (``worker_points="systematic"``) sends x_k unchanged
    to worker k for k < K (those rows of the encoder matrix are unit
    vectors, whatever the encoder's ridge) and the scheme's own encoding to
    the parity workers. The decoder returns the output of every returned
    systematic worker as is and decodes only the inputs whose systematic
    worker is missing; ``Decoded.info["exact"]``, a boolean mask of shape
    (K,), says which inputs were answered exactly. When every systematic
    worker returns, no decoding is done at all.
    """

    name = "scheme"
    # whether the worker points carry the code (False for replication/uncoded)
    _supports_systematic = True

    def __init__(self, n_inputs, n_workers, *, data_points="chebyshev1", worker_points="chebyshev2"):
        self.n_inputs = check_int(n_inputs, "n_inputs")
        self.n_workers = check_int(n_workers, "n_workers")
        if self.n_workers < self.n_inputs:
            raise ValueError(f"n_workers must be >= n_inputs = {self.n_inputs} (at least one worker per "
                             f"input), got {self.n_workers}")
        self.data_points = data_points
        self.worker_points = worker_points
        self.alpha = make_points(data_points, self.n_inputs, "data_points")
        if isinstance(worker_points, str) and worker_points == "systematic":
            if not self._supports_systematic:
                raise ValueError(f"worker_points='systematic' is not available for {type(self).__name__}")
            self.beta = systematic_points(self.alpha, self.n_workers)
        else:
            self.beta = make_points(worker_points, self.n_workers, "worker_points")
        self._E = None

    @property
    def systematic(self) -> bool:
        """Whether workers 0..K-1 compute f(x_k) on the inputs themselves."""
        return isinstance(self.worker_points, str) and self.worker_points == "systematic"

    # -- parameters ---------------------------------------------------------
    @classmethod
    def _param_names(cls) -> list[str]:
        names = []
        for klass in cls.__mro__:
            if klass is object:
                break
            sig = inspect.signature(klass.__init__)
            for p in list(sig.parameters.values())[1:]:
                if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL) or p.name in names:
                    continue
                names.append(p.name)
        return names

    def get_params(self) -> dict:
        """Constructor arguments of this scheme, by name."""
        return {k: getattr(self, k) for k in self._param_names() if hasattr(self, k)}

    def with_params(self, **params) -> "CodingScheme":
        """A new scheme of the same class with some parameters changed."""
        unknown = set(params) - set(self._param_names())
        if unknown:
            raise TypeError(f"{type(self).__name__} has no parameters {sorted(unknown)}")
        return type(self)(**{**self.get_params(), **params})

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items() if not isinstance(v, np.ndarray))
        return f"{type(self).__name__}({args})"

    # -- capacity -----------------------------------------------------------
    @property
    def min_returns(self) -> int:
        """Smallest number of returned workers this scheme decodes from at all."""
        return 1

    @property
    def trusted_returns(self) -> int:
        """Fewest returned workers whose decode this scheme stands behind.

        K for the approximate codes (GCC, LeTCC, BACC): from fewer than K
        samples a curve cannot resolve K independent outputs, and measured on
        lenet5 (K = 4, N = 12) a decode from 6 or fewer returns agreed with
        f's argmax on only 0.3-0.56 of inputs against 0.92 from 9. The exact
        codes override it with their recovery threshold.
        """
        return max(self.n_inputs, self.min_returns)

    def can_decode(self, returned) -> bool:
        """Whether a decode from the workers ``returned`` is one the scheme stands behind.

        Parameters
        ----------
        returned : sequence of int
            Worker indices.

        Returns
        -------
        bool
        """
        returned = set(int(n) for n in returned)
        return len(returned) >= self.trusted_returns or self._all_systematic(returned)

    def is_complete(self, returned) -> bool:
        """Whether more returns than ``returned`` could not improve the decode:
        all N are in, or, for a systematic code, every systematic worker."""
        returned = set(int(n) for n in returned)
        return len(returned) >= self.n_workers or self._all_systematic(returned)

    def _all_systematic(self, returned: set) -> bool:
        return self.systematic and all(k in returned for k in range(self.n_inputs))

    # -- what each worker computes ------------------------------------------
    def worker_function(self, n, f):
        """The function worker ``n`` applies to its coded input.

        Parameters
        ----------
        n : int
            Worker index in [0, N).
        f : callable
            The function being computed, vectorised.

        Returns
        -------
        callable
            ``f`` itself for every scheme here except :class:`~gencc.ParM`,
            whose parity worker runs its parity model.

        Notes
        -----
        :func:`gencc.evaluate` honours this hook; the runtime builds each
        worker's model from :meth:`worker_model`.
        """
        n = check_int(n, "n", minimum=0)
        if n >= self.n_workers:
            raise ValueError(f"n must index a worker in [0, {self.n_workers}), got {n}")
        return f

    def worker_model(self, n, model):
        """The model factory the runtime gives worker ``n``: ``model`` itself,
        unless the worker computes another function (ParM's parity worker).

        Parameters
        ----------
        n : int
            Worker index in [0, N).
        model : factory, torch module or "module:attr"
            What the runtime builds f from.

        Returns
        -------
        factory, torch module or "module:attr"
        """
        return model

    # -- encoding -----------------------------------------------------------
    def encoder_matrix(self) -> np.ndarray:
        """The linear encoder: coded = E @ X, shape (N, K)."""
        if self._E is None:
            E = np.array(self._encoder_matrix(), dtype=np.float64)
            if self.systematic:  # x_k itself, not a (possibly smoothed) u_enc(alpha_k)
                E[: self.n_inputs] = np.eye(self.n_inputs)
            self._E = E
            self._E.setflags(write=False)
        return self._E

    def encode(self, X) -> np.ndarray:
        """Encode a batch.

        Parameters
        ----------
        X : array_like, shape (K, *in_shape)

        Returns
        -------
        coded : ndarray, shape (N, *in_shape)
            Row n is the input sent to worker n.
        """
        X2, shape = check_batch(X, "X", self.n_inputs)
        return (self.encoder_matrix() @ X2).reshape((self.n_workers, *shape))

    # -- decoding -----------------------------------------------------------
    def _prepare(self, Y, returned):
        idx = check_returned(returned, self.n_workers)
        if not (self.systematic and np.count_nonzero(idx < self.n_inputs) == self.n_inputs):
            require_returns(idx.size, self.min_returns, type(self).__name__)  # else nothing to decode
        Y2 = shape = None
        if Y is not None:
            Y2, shape = check_batch(Y, "Y", idx.size)
        order = np.argsort(self.beta[idx], kind="stable")
        return idx, order, Y2, shape

    def decode_with_info(self, Y, returned) -> Decoded:
        """Decode and report what the decoder knows.

        Parameters
        ----------
        Y : array_like, shape (len(returned), *out_shape)
            ``Y[i]`` is the output of worker ``returned[i]``.
        returned : sequence of int
            Distinct worker indices in [0, N), in any order.

        Returns
        -------
        Decoded
            ``estimate`` has shape (K, *out_shape).
        """
        idx, order, Y2, shape = self._prepare(Y, returned)
        if not self.systematic:
            est, info = self._decode_sorted(idx[order], Y2[order])
            return Decoded(est.reshape((self.n_inputs, *shape)), info)
        K = self.n_inputs
        sys_ret = idx < K
        exact = np.zeros(K, dtype=bool)
        exact[idx[sys_ret]] = True
        if exact.all():  # every systematic worker returned: nothing to decode
            est, info = np.empty((K, Y2.shape[1])), {"error_estimate": 0.0}
        else:
            est, info = self._decode_sorted(idx[order], Y2[order])
            est = np.array(est, dtype=np.float64).reshape(K, -1)
        est[idx[sys_ret]] = Y2[sys_ret]  # the exact outputs, not the decoder's smoothed ones
        info["exact"] = exact
        return Decoded(est.reshape((K, *shape)), info)

    def decode(self, Y, returned) -> np.ndarray:
        """Estimate f(x_1..x_K) from the returned workers' outputs.

        Parameters
        ----------
        Y : array_like, shape (len(returned), *out_shape)
        returned : sequence of int

        Returns
        -------
        estimate : ndarray, shape (K, *out_shape)
        """
        return self.decode_with_info(Y, returned).estimate

    def decoder_matrix(self, returned, Y=None) -> np.ndarray:
        """The linear decoder for this returned set: estimate = D @ Y.

        Parameters
        ----------
        returned : sequence of int
        Y : array_like, optional
            Needed only by schemes whose decoder adapts to the data.

        Returns
        -------
        D : ndarray, shape (K, len(returned))
            Columns in the order of ``returned``.
        """
        idx, order, Y2, _ = self._prepare(Y, returned)
        K = self.n_inputs
        sys_cols = np.flatnonzero(idx < K) if self.systematic else np.empty(0, dtype=int)
        if sys_cols.size == K:
            D = np.zeros((K, idx.size))
        else:
            D_sorted = self._decoder_matrix_sorted(idx[order], None if Y2 is None else Y2[order])
            D = np.empty_like(D_sorted)
            D[:, order] = D_sorted
        D[idx[sys_cols]] = 0.0
        D[idx[sys_cols], sys_cols] = 1.0
        return D

    def _decode_sorted(self, idx, Y2):
        return self._decoder_matrix_sorted(idx, Y2) @ Y2, {}

    def _encoder_matrix(self) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _decoder_matrix_sorted(self, idx, Y2) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError
