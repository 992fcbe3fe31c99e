"""A bounded, thread-safe, least-recently-used cache of decoders keyed by the returned set.

A scheme whose decoder does not depend on the outputs (fixed-kernel GCC,
LeTCC, BACC, LCC) decodes a returned set F with a fixed (K, |F|) matrix.
Once that matrix is cached, a repeated returned set costs one matrix product.
"""

from __future__ import annotations

import math

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..ridge import hole_rmse

__all__ = ["DecoderEntry", "DecoderCache", "CacheInfo", "DEFAULT_DECODER_CACHE", "DEFAULT_DECODER_CACHE_BYTES"]

# Returned sets remembered per scheme, and the memory they may hold together.
DEFAULT_DECODER_CACHE = 32
DEFAULT_DECODER_CACHE_BYTES = 256 * 2**20


@dataclass(frozen=True)
class DecoderEntry:
    """The decoder of one returned set, columns in the scheme's sorted order.

    Attributes
    ----------
    rows : ndarray of int, shape (r,), or None
        The inputs this entry decodes (None: all K). A systematic scheme
        decodes only the inputs whose systematic worker is missing.
    D : ndarray, shape (r, |F|)
        estimate[rows] = D @ Y_sorted.
    loo : ndarray, shape (|F|, |F|), or None
        Leave-one-out residuals as a linear map of the outputs,
        ``loo @ Y_sorted``; None when the scheme reports no ``loo_mse``.
    loo_defined : bool
        False where the scheme reports ``loo_mse`` as NaN (too few returns).
    info : dict
        The parts of the info dict that do not depend on the outputs.
    holes : ndarray, shape (n_tests, |F|), or None
        Hole-test residuals as a linear map of the outputs
        (:func:`gencc.ridge.hole_residuals` of the identity), for the
        per-input error estimates ``rmse`` and ``rmse_p90``.
    tests : ndarray of int, shape (n_pairs, 2), or None
        Pairs (input k, row of ``holes``).
    error_factor : float
        ``rmse_p90 / rmse``.
    n_targets : int
        K (``rmse`` has one entry per input, decoded by this entry or not).
    loo_stands_for_holes : bool
        Every hole of the returned set is one node wide, so the leave-one-out
        error stands for the hole tests where none can be cut (else: inf).
    """

    rows: np.ndarray | None
    D: np.ndarray
    loo: np.ndarray | None = None
    loo_defined: bool = True
    info: dict = field(default_factory=dict)
    holes: np.ndarray | None = None
    tests: np.ndarray | None = None
    error_factor: float = float("nan")
    n_targets: int = 0
    loo_stands_for_holes: bool = True

    @property
    def nbytes(self) -> int:
        return int(self.D.nbytes + sum(0 if a is None else a.nbytes for a in (self.loo, self.holes)))

    def info_for(self, Y2) -> dict:
        """The info dict for outputs ``Y2`` (shape (|F|, p)), as the uncached decode gives it."""
        info = dict(self.info)
        if self.loo is not None:
            info["loo_mse"] = float(np.mean((self.loo @ Y2) ** 2)) if self.loo_defined else float("nan")
        if self.holes is not None:
            no_test = no_test_mse(info.get("loo_mse", float("nan")), self.loo_stands_for_holes)
            rmse = hole_rmse(self.holes @ Y2, self.tests, self.n_targets, no_test)
            info["rmse"], info["rmse_p90"] = rmse, self.error_factor * rmse
        return info



def no_test_mse(loo_mse: float, single_holes: bool) -> float:
    """The MSE to assume for every input when no hole test can be cut: the leave-one-out error
    where every hole is one node wide (it tests exactly those), else inf (no estimate)."""
    return loo_mse if single_holes else math.inf


class CacheInfo(NamedTuple):
    """Counters of a :class:`DecoderCache` (as ``functools.lru_cache``'s ``cache_info``)."""

    hits: int
    misses: int
    maxsize: int
    currsize: int
    nbytes: int
    max_bytes: int


class DecoderCache:
    """LRU map from a returned set to its :class:`DecoderEntry`.

    Parameters
    ----------
    maxsize : int
        Returned sets kept (0 disables the cache).
    max_bytes : int
        Memory the entries may hold together; an entry larger than this is
        never stored.

    Notes
    -----
    Admission: a returned set is decoded directly the first time it is seen
    and its decoder is built and stored the second time (its key is
    remembered among the last ``4 * maxsize`` unadmitted sets). Under random
    stragglers a set rarely repeats, and building the (K, |F|) matrix costs
    more than one direct decode; a set that does repeat pays the build once.
    :meth:`get` with ``admit=True`` stores at once (``decoder_matrix``, which
    computes the matrix anyway).

    Every operation on the map holds one lock, so the cache may be shared by
    threads (the runtime decodes from a dispatcher thread). Entries are built
    outside the lock: two threads missing the same set at once both build
    it, and the second stores an identical entry.
    """

    def __init__(self, maxsize: int = DEFAULT_DECODER_CACHE, max_bytes: int = DEFAULT_DECODER_CACHE_BYTES):
        self.maxsize = int(maxsize)
        self.max_bytes = int(max_bytes)
        self._lock = threading.Lock()
        self._entries: OrderedDict = OrderedDict()
        self._seen: OrderedDict = OrderedDict()
        self._nbytes = 0
        self.hits = 0
        self.misses = 0

    def __getstate__(self):  # schemes travel to worker processes: send the settings, not the entries or lock
        return {"maxsize": self.maxsize, "max_bytes": self.max_bytes}

    def __setstate__(self, state):
        self.__init__(state["maxsize"], state["max_bytes"])

    def info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(self.hits, self.misses, self.maxsize, len(self._entries), self._nbytes, self.max_bytes)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._seen.clear()
            self._nbytes = 0
            self.hits = self.misses = 0

    def resize(self, maxsize: int, max_bytes: int) -> None:
        with self._lock:
            self.maxsize, self.max_bytes = int(maxsize), int(max_bytes)
            self._evict()

    def _evict(self) -> None:
        while self._entries and (len(self._entries) > self.maxsize or self._nbytes > self.max_bytes):
            _, old = self._entries.popitem(last=False)
            self._nbytes -= old.nbytes
        while len(self._seen) > 4 * self.maxsize:
            self._seen.popitem(last=False)

    def get(self, key, build, nbytes_floor: int, *, admit: bool = False):
        """The entry for ``key``, built by ``build()`` when admitted; None to decode directly.

        Parameters
        ----------
        key : hashable
        build : callable () -> DecoderEntry
        nbytes_floor : int
            A lower bound of the entry's size, checked before building (an
            entry that cannot fit is never built); the built entry's own
            ``nbytes`` is checked again before it is stored.
        admit : bool
            Build and store on the first request, not the second.
        """
        if self.maxsize <= 0 or nbytes_floor > self.max_bytes:
            return None
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return entry
            self.misses += 1
            if not admit and key not in self._seen:
                self._seen[key] = None
                self._evict()
                return None
            self._seen.pop(key, None)
        entry = build()
        with self._lock:
            if key not in self._entries and entry.nbytes <= self.max_bytes:
                self._entries[key] = entry
                self._nbytes += entry.nbytes
                self._evict()
        return entry
