"""The interface every coding scheme implements.

A scheme maps K inputs to N coded inputs with a fixed linear encoder, and maps
the outputs of any returned subset of workers back to K estimates.
"""

from __future__ import annotations

import inspect
import dataclasses
from dataclasses import dataclass, field

import numpy as np

from .._validation import check_batch, check_int, check_returned, check_stack, require_returns
from ..points import make_points, systematic_points
from ._cache import DEFAULT_DECODER_CACHE, DEFAULT_DECODER_CACHE_BYTES, CacheInfo, DecoderCache, DecoderEntry

__all__ = ["CodingScheme", "Decoded", "ENCODER_MATRIX_BYTES"]

# encode() keeps and multiplies by the (N, K) encoder matrix while it holds at
# most this many bytes; above it, schemes with a matrix-free encoder use it.
ENCODER_MATRIX_BYTES = 64 * 2**20
# elements (8 MiB of float64) of a linear map formed at once on the matrix-free paths (smaller blocks
# measured faster: the temporaries stay in cache)
_BLOCK_ELEMENTS = 2**20
_LOOKUP = object()  # _decode2: look the decoder up in the cache


def _row_blocks(n_rows: int, n_cols: int):
    """Slices of [0, n_rows) whose (rows, n_cols) block holds at most _BLOCK_ELEMENTS elements."""
    step = max(1, _BLOCK_ELEMENTS // max(n_cols, 1))
    return [slice(i, min(i + step, n_rows)) for i in range(0, n_rows, step)]


def _stack_columns(Y3):
    """(B, n, p) -> (n, B*p): batch b's columns are b*p .. (b+1)*p - 1."""
    B, n, p = Y3.shape
    return np.ascontiguousarray(Y3.transpose(1, 0, 2)).reshape(n, B * p)


def _unstack_columns(M, B):
    """(r, B*p) -> (B, r, p), the inverse of :func:`_stack_columns`."""
    r = M.shape[0]
    return M.reshape(r, B, -1).transpose(1, 0, 2)


def _zero_exact(info, exact):
    """Inputs answered by their own worker have no decoding error."""
    for key in ("rmse", "rmse_p90"):
        if key in info:
            info[key] = np.where(exact, 0.0, info[key])


@dataclass
class Decoded:
    """A decoded batch and what the decoder knows about it.

    Attributes
    ----------
    estimate : ndarray, shape (K, *out_shape)
    info : dict
        Scheme-specific facts, e.g. the kernel and ridge chosen and
        ``"loo_mse"`` (or ``"error_estimate"``), the decoder's own estimate of
        its mean squared error. A robust decode (``GCC(robust=True)``,
        :class:`~gencc.ApproxIFER`, ``LCC(n_adversaries=A)`` with A > 0)
        adds ``"flagged"``, the sorted worker indices it judged wrong and
        left out (int64, possibly empty). A systematic scheme adds ``"exact"``, a boolean
        mask of shape (K,): the inputs answered by their own returned worker,
        copied as is. GCC and LeTCC add ``"rmse"`` and ``"rmse_p90"``, shape
        (K,): each input's estimated root-mean-squared error and a bound its
        true RMSE stays under for about 90% of decoded inputs (0 for exact
        inputs; see :class:`~gencc.GCC`).
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
        self._cache = DecoderCache(DEFAULT_DECODER_CACHE, DEFAULT_DECODER_CACHE_BYTES)
        self.encoder_matrix_bytes = ENCODER_MATRIX_BYTES

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
        """A new scheme of the same class with some parameters changed.

        The new scheme keeps this one's decoder-cache settings
        (:meth:`set_decoder_cache`) with an empty cache."""
        unknown = set(params) - set(self._param_names())
        if unknown:
            raise TypeError(f"{type(self).__name__} has no parameters {sorted(unknown)}")
        new = type(self)(**{**self.get_params(), **params})
        new.set_decoder_cache(self._cache.maxsize, max_bytes=self._cache.max_bytes)
        new.encoder_matrix_bytes = self.encoder_matrix_bytes
        return new

    # -- decoder cache --------------------------------------------------------
    @property
    def caches_decoders(self) -> bool:
        """Whether this scheme's decoder is a fixed matrix per returned set, and so cacheable.

        True for BACC, LCC, LeTCC and GCC with a fixed kernel and ridge; False
        for GCC's automatic selection (``adaptive``), whose decoder depends
        on the outputs, and for replication and ParM, which copy outputs."""
        return False

    def set_decoder_cache(self, maxsize: int = DEFAULT_DECODER_CACHE, *,
                          max_bytes: int = DEFAULT_DECODER_CACHE_BYTES) -> "CodingScheme":
        """Bound this scheme's decoder cache (a setting, not a parameter: it never changes an estimate
        beyond round-off, so it is not in :meth:`get_params` or the repr).

        Parameters
        ----------
        maxsize : int, default 32
            Returned sets whose (K, |F|) decoder is kept, least recently used
            dropped first; 0 disables the cache.
        max_bytes : int, default 256 MiB
            Memory the entries may hold together. An entry holds the
            decoder (K, |F|) and, for schemes that report ``loo_mse``, the
            leave-one-out map (|F|, |F|), in float64; a larger entry is
            never built and that set is decoded directly.

        Returns
        -------
        self

        Notes
        -----
        A set is decoded directly the first time it is seen and its decoder
        is built and stored the second time; from then on a decode is one
        matrix product (``decode``) or two (``decode_with_info``, which also
        computes the leave-one-out error). The cached product equals the
        direct fit up to round-off amplified by the fit's conditioning
        (relative 1e-12 to 1e-9 for the near-interpolating default ridges).
        """
        maxsize = check_int(maxsize, "maxsize", minimum=0)
        max_bytes = check_int(max_bytes, "max_bytes", minimum=0)
        self._cache.resize(maxsize, max_bytes)
        return self

    def decoder_cache_info(self) -> CacheInfo:
        """Hits, misses, entries and bytes of the decoder cache."""
        return self._cache.info()

    def clear_decoder_cache(self) -> None:
        """Drop every cached decoder (and reset the counters)."""
        self._cache.clear()

    def _decoder_entry_sorted(self, idx) -> DecoderEntry:  # pragma: no cover - abstract
        """The decoder of the returned set ``idx`` (sorted by beta) as a :class:`DecoderEntry`
        with ``rows=None``; implemented by the schemes where :attr:`caches_decoders`."""
        raise NotImplementedError

    def _entry(self, idx_sorted, *, admit=False):
        """The cached decoder of this sorted returned set, or None to decode directly."""
        if not self.caches_decoders:
            return None
        K, n = self.n_inputs, idx_sorted.size
        rows = None
        if self.systematic:
            rows = np.setdiff1d(np.arange(K), idx_sorted[idx_sorted < K])
        floor = 8 * ((K if rows is None else rows.size) * n + n * n)  # D and loo; the hole tests come on top

        def build():
            e = self._decoder_entry_sorted(idx_sorted)
            D = e.D if rows is None else e.D[rows]
            D = np.ascontiguousarray(D, dtype=np.float64)
            D.setflags(write=False)
            if e.loo is not None:
                e.loo.setflags(write=False)
            if e.holes is not None:
                e.holes.setflags(write=False)
            return dataclasses.replace(e, rows=rows, D=D, info=dict(e.info))

        return self._cache.get(idx_sorted.tobytes(), build, floor, admit=admit)

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

    def available(self, returned) -> np.ndarray:
        """Boolean mask (K,): which inputs a decode from the workers ``returned`` answers.

        Every input for a code whose decode is a curve through the returned
        points (GCC, LeTCC, BACC, LCC): it answers all K once it decodes at
        all (``min_returns``), none before. Replication and ParM override it:
        an input none of whose workers returned gets no answer.

        Parameters
        ----------
        returned : sequence of int
            Worker indices.

        Returns
        -------
        ndarray of bool, shape (K,)
        """
        n = len(set(int(w) for w in returned))
        return np.full(self.n_inputs, n >= self.min_returns)

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

        Notes
        -----
        While the (N, K) encoder matrix fits in ``encoder_matrix_bytes``
        (default 64 MiB; an attribute of the scheme) it is built once and
        kept, and encoding is one product. Above that, a scheme with a
        matrix-free encoder uses it (GCC and LeTCC fit the encoder's kernel
        ridge regression to X and evaluate it at the worker points; BACC and
        LCC evaluate their interpolant in blocks of rows; replication copies
        rows), so no (N, K) matrix is formed. Both give the same coded inputs
        up to round-off amplified by the encoder's conditioning.
        """
        X2, shape = check_batch(X, "X", self.n_inputs)
        return self._encode2(X2).reshape((self.n_workers, *shape))

    def encode_many(self, X) -> np.ndarray:
        """Encode B batches at once: one product (or one fit) for all of them.

        Parameters
        ----------
        X : array_like, shape (B, K, *in_shape)
            ``X[b]`` is batch b.

        Returns
        -------
        coded : ndarray, shape (B, N, *in_shape)
            ``coded[b]`` equals ``encode(X[b])`` up to round-off.
        """
        X3, shape = check_stack(X, "X", self.n_inputs, "inputs")
        B = X3.shape[0]
        C = self._encode2(_stack_columns(X3))
        return _unstack_columns(C, B).reshape((B, self.n_workers, *shape))

    def _encode2(self, X2):
        """(K, p) -> (N, p), by the cached matrix or matrix-free (see :meth:`encode`)."""
        if self._E is None and 8 * self.n_workers * self.n_inputs > self.encoder_matrix_bytes:
            out = self._encode_free(X2)
            if out is not None:
                out = np.asarray(out, dtype=np.float64).reshape(self.n_workers, -1)
                if self.systematic:
                    out[: self.n_inputs] = X2
                return out
        return self.encoder_matrix() @ X2

    def _encode_free(self, X2):
        """Matrix-free encoder, (K, p) -> (N, p); None where the scheme has none."""
        return None

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

    def _decode2(self, idx, order, Y2, want_info: bool, entry=_LOOKUP):
        """Decode flattened outputs Y2 (|F|, p), rows in the order of ``idx``.

        ``entry``: the cached decoder to use, None to decode directly, or
        looked up in the cache by default. Returns (estimate (K, p), info);
        info is complete only when ``want_info``."""
        K = self.n_inputs
        flagged = None
        keep = self._screen(idx, Y2)
        if keep is not None:  # a robust decode: drop the flagged workers, decode the rest
            flagged = np.sort(idx[~keep])
            if flagged.size:
                idx, Y2 = idx[keep], Y2[keep]
                order = np.argsort(self.beta[idx], kind="stable")
        exact = None
        if self.systematic:
            sys_ret = idx < K
            exact = np.zeros(K, dtype=bool)
            exact[idx[sys_ret]] = True
        if exact is not None and exact.all():  # every systematic worker returned: nothing to decode
            est, info = np.empty((K, Y2.shape[1])), {"error_estimate": 0.0, "rmse": np.zeros(K),
                                                     "rmse_p90": np.zeros(K)}
        else:
            in_order = bool(np.all(order[1:] > order[:-1]))  # already sorted by beta: no copy
            idx_s, Ys = (idx, Y2) if in_order else (idx[order], Y2[order])
            if entry is _LOOKUP:
                entry = self._entry(idx_s)
            if entry is None:
                est, info = self._decode_sorted(idx_s, Ys, want_info)
                est = np.array(est, dtype=np.float64).reshape(K, -1)
            else:
                if entry.rows is None:
                    est = entry.D @ Ys
                else:
                    est = np.empty((K, Y2.shape[1]))
                    est[entry.rows] = entry.D @ Ys
                info = entry.info_for(Ys) if want_info else {}
        if exact is not None:
            est[idx[sys_ret]] = Y2[sys_ret]  # the exact outputs, not the decoder's smoothed ones
            info["exact"] = exact
            _zero_exact(info, exact)
        if flagged is not None:
            info["flagged"] = flagged
        return est, info

    def _screen(self, idx, Y2):
        """Robust decoding hook: a boolean mask over the rows of Y2 (|F|, p), in the order of
        ``idx``, of the workers to keep, or None when the scheme does not screen."""
        return None

    def _decode(self, Y, returned, want_info: bool) -> Decoded:
        idx, order, Y2, shape = self._prepare(Y, returned)
        est, info = self._decode2(idx, order, Y2, want_info)
        return Decoded(est.reshape((self.n_inputs, *shape)), info)

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
        return self._decode(Y, returned, True)

    def decode(self, Y, returned) -> np.ndarray:
        """Estimate f(x_1..x_K) from the returned workers' outputs.

        Parameters
        ----------
        Y : array_like, shape (len(returned), *out_shape)
        returned : sequence of int

        Returns
        -------
        estimate : ndarray, shape (K, *out_shape)

        Notes
        -----
        Equals ``decode_with_info(Y, returned).estimate``; with a cached
        decoder it skips the info's leave-one-out error, so it costs one
        (K, |F|) @ (|F|, m) product. Use :meth:`decode_many` for B batches
        that share a returned set.
        """
        return self._decode(Y, returned, False).estimate

    def decode_many(self, Y, returned) -> np.ndarray:
        """Decode B batches that share one returned set.

        Parameters
        ----------
        Y : array_like, shape (B, len(returned), *out_shape)
            ``Y[b, i]`` is worker ``returned[i]``'s output for batch b.
        returned : sequence of int

        Returns
        -------
        estimate : ndarray, shape (B, K, *out_shape)
            ``estimate[b]`` equals ``decode(Y[b], returned)`` up to round-off.

        Notes
        -----
        A scheme with a fixed decoder (:attr:`caches_decoders`) decodes the B
        batches as one: their outputs are stacked into (|F|, B*m) columns
        and decoded by one cached (K, |F|) product, or one fit on a cold
        returned set. GCC's automatic selection (``GCC.adaptive``) chooses a
        kernel per batch, exactly as the per-batch loop does; so do
        replication and ParM, whose decodes copy outputs.
        """
        if self._joint_many:
            return self._decode_joint(Y, returned)
        return np.stack([d.estimate for d in self._decode_many(Y, returned, False)])

    def decode_many_with_info(self, Y, returned) -> list:
        """:meth:`decode_many` with each batch's :class:`Decoded` (its own info).

        Parameters
        ----------
        Y : array_like, shape (B, len(returned), *out_shape)
        returned : sequence of int

        Returns
        -------
        list of Decoded, length B
            Entry b equals ``decode_with_info(Y[b], returned)`` up to round-off
            (``loo_mse`` is batch b's own). With a cached decoder all B
            estimates and leave-one-out residuals come from one product each.
        """
        return self._decode_many(Y, returned, True)

    @property
    def _screens(self) -> bool:
        """Whether decodes screen the returned outputs first (``GCC(robust=True)``,
        ApproxIFER and LCC with ``n_adversaries`` > 0)."""
        return bool(getattr(self, "robust", False)) or (getattr(self, "n_adversaries", 0) or 0) > 0

    @property
    def _joint_many(self) -> bool:  # a screening decode screens each batch on its own
        return self.caches_decoders and not self._screens

    def _decode_joint(self, Y, returned):
        idx = check_returned(returned, self.n_workers)
        Y3, shape = check_stack(Y, "Y", idx.size, "worker outputs (one per returned worker)")
        B = Y3.shape[0]
        idx, order, _, _ = self._prepare(None, idx)
        est, _ = self._decode2(idx, order, _stack_columns(Y3), False)
        return _unstack_columns(est, B).reshape((B, self.n_inputs, *shape))

    def _decode_many(self, Y, returned, want_info):
        idx = check_returned(returned, self.n_workers)
        Y3, shape = check_stack(Y, "Y", idx.size, "worker outputs (one per returned worker)")
        B, K = Y3.shape[0], self.n_inputs
        if not self._joint_many:
            return [self._decode(y.reshape((idx.size, *shape)), idx, want_info) for y in Y3]
        idx, order, _, _ = self._prepare(None, idx)
        if self.systematic and np.count_nonzero(idx < K) == K:
            entry = None  # nothing to decode
        else:
            entry = self._entry(idx[order])
        if entry is None:  # decoded directly: one batch at a time, each with its own info
            out = []
            for y in Y3:
                est, info = self._decode2(idx, order, y, want_info, entry=None)
                out.append(Decoded(est.reshape((K, *shape)), info))
            return out
        est, _ = self._decode2(idx, order, _stack_columns(Y3), False, entry=entry)
        est3 = _unstack_columns(est, B)
        out = []
        for b in range(B):
            info = entry.info_for(Y3[b][order]) if want_info else {}
            if self.systematic:
                exact = np.zeros(K, dtype=bool)
                exact[idx[idx < K]] = True
                info["exact"] = exact
                _zero_exact(info, exact)
            out.append(Decoded(est3[b].reshape((K, *shape)), info))
        return out

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
            Columns in the order of ``returned``. A scheme that caches
            decoders stores it (and answers later decodes from it).
        """
        idx, order, Y2, _ = self._prepare(Y, returned)
        K = self.n_inputs
        sys_cols = np.flatnonzero(idx < K) if self.systematic else np.empty(0, dtype=int)
        if sys_cols.size == K:
            D = np.zeros((K, idx.size))
        else:
            entry = self._entry(idx[order], admit=True)
            if entry is not None:
                D_sorted = np.zeros((K, idx.size))
                D_sorted[slice(None) if entry.rows is None else entry.rows] = entry.D
            else:
                D_sorted = self._decoder_matrix_sorted(idx[order], None if Y2 is None else Y2[order])
            D = np.empty_like(D_sorted)
            D[:, order] = D_sorted
        D[idx[sys_cols]] = 0.0
        D[idx[sys_cols], sys_cols] = 1.0
        return D

    def _decode_sorted(self, idx, Y2, want_info=True):
        """Direct decode of sorted outputs (|F|, p): (estimate (K, p), info); ``want_info=False``
        lets a scheme skip info that costs more than the estimate."""
        return self._decoder_matrix_sorted(idx, Y2) @ Y2, {}

    def _encoder_matrix(self) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _decoder_matrix_sorted(self, idx, Y2) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError
