"""One batch in the runtime: its state while workers compute, and its result."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ..errors import ErrorBoundExceededError, MissingOutputsError
from .request import AnswerInfo

__all__ = ["BatchResult"]


@dataclass
class BatchResult:
    """The decoded outputs of one batch and how they were obtained.

    Attributes
    ----------
    batch : int
    outputs : ndarray, shape (B*K, *out_shape)
        One row per input of the batch, in the order submitted (B = the
        batch's micro-batch size, 1 without micro-batching; input ``b*K + k``
        is input k of the b-th of the B coded batches). Rows listed in
        ``missing`` are NaN and must not be used: :meth:`output` raises for
        them.
    missing : tuple of int
        Inputs no returned worker answered (replication/uncoded only).
    returned : tuple of int
        Workers (coded-input slots) whose results were decoded.
    failed : dict of int -> str
        Slots treated as erasures, with the reason (crash, hang, error, nan,
        wrong shape). Slots merely too late are in neither.
    latencies : dict of int -> float
        Seconds from dispatch to arrival, per returned slot.
    compute_seconds : dict of int -> float
        Seconds each returned slot's worker reported for its task (f on B
        coded inputs, plus any injected delay).
    micro_batch : int
        B: coded inputs per task.
    wall_time, encode_time, decode_time : float
        Seconds.
    error_estimate : float or None
        The decoder's own estimate of its mean squared error (leave-one-out
        for GCC, LeTCC and BACC; 0 for replicated copies; None where the
        scheme has none). Compare it with ``max_error`` of the executor, or
        with your own quality floor.
    decode_info : dict
        The scheme's decode info; a systematic scheme's ``"exact"`` is a
        boolean mask over the B*K inputs (answered by their own worker).
    flagged : tuple of int
        Returned slots whose outputs the decoder judged wrong (Byzantine) and
        decoded without (``decode_info["flagged"]`` of a robust decode, e.g.
        ``GCC(robust=True)``); they stay in ``returned``. Empty for schemes
        without a robust decode. The executor's ``stats["flagged"]`` sums
        them over answered batches (what :meth:`submit_one` callers can see).
    trusted : bool
        Whether the decode used at least the scheme's ``trusted_returns``
        results (flagged ones not counted). False only where ``n_min`` let
        a batch be decoded from fewer; its decoded rows are guesses.
    rmse, rmse_p90 : ndarray, shape (B*K,), or None
        Each input's own error estimate and 90% bound (root-mean-squared,
        ``Decoded.info["rmse"]`` and ``["rmse_p90"]``; 0 for exact answers);
        None where the scheme has no per-input estimate. With B > 1 one
        estimate per input position k, pooled over the B coded batches.
    refused : tuple of int
        Inputs refused by the executor's ``max_error`` (``rmse_p90 ** 2`` above
        it): their rows of ``outputs`` are NaN and :meth:`output` raises
        :class:`~gencc.errors.ErrorBoundExceededError` for them.
    max_error : float or None
        The executor's ``max_error`` when this batch was decoded.
    """

    batch: int
    outputs: np.ndarray
    missing: tuple = ()
    returned: tuple = ()
    failed: dict = field(default_factory=dict)
    latencies: dict = field(default_factory=dict)
    compute_seconds: dict = field(default_factory=dict)
    micro_batch: int = 1
    wall_time: float = 0.0
    encode_time: float = 0.0
    decode_time: float = 0.0
    error_estimate: float | None = None
    decode_info: dict = field(default_factory=dict, repr=False)
    flagged: tuple = ()
    trusted: bool = True
    rmse: np.ndarray | None = field(default=None, repr=False)
    rmse_p90: np.ndarray | None = field(default=None, repr=False)
    refused: tuple = ()
    max_error: float | None = None

    def answer_info(self, k: int) -> AnswerInfo:
        """How input k's output was obtained (what its :meth:`submit_one` future's ``info`` says)."""
        exact = self.decode_info.get("exact")
        if exact is not None and bool(exact[k]):
            return AnswerInfo(True, 0.0, True, len(self.returned), self.batch, 0.0, 0.0)
        rmse = None if self.rmse is None else float(self.rmse[k])
        p90 = None if self.rmse_p90 is None else float(self.rmse_p90[k])
        return AnswerInfo(False, self.error_estimate, self.trusted, len(self.returned), self.batch, rmse, p90)

    def output(self, k: int) -> np.ndarray:
        """Output of input k; MissingOutputsError if it has none, ErrorBoundExceededError if it
        was refused by ``max_error``."""
        if k in self.missing:
            raise MissingOutputsError(f"batch {self.batch}: input {k} has no answer",
                                      missing=np.array([k]), partial=None,
                                      n_returned=len(self.returned), n_required=0)
        if k in self.refused:
            raise ErrorBoundExceededError(self.batch, k, float(self.rmse_p90[k]), float(self.max_error))
        return self.outputs[k]


class BatchState:
    """What the executor tracks about a batch until it is decoded or failed."""

    def __init__(self, index, coded, faults, t0, future, encode_time, size=1):
        self.index = index
        self.size = size  # B: coded inputs per task
        self.coded = coded
        self.faults = faults
        self.t0 = t0
        self.future = future
        self.encode_time = encode_time
        self.results: dict[int, np.ndarray] = {}  # slot -> output
        self.latencies: dict[int, float] = {}
        self.compute_seconds: dict[int, float] = {}
        self.answered_by: dict[int, int] = {}  # slot -> the worker whose result it is
        self.failed: dict[int, str] = {}
        self.outstanding: dict[int, int] = {}  # slot -> worker computing it
        self.redispatched: set[int] = set()
        self.on_early = None  # callable(rows, outputs, batch) answering inputs before the decode
        self.early_done: set[int] = set()  # inputs (0..K-1) answered early
        self.sent_at: dict[int, float] = {}  # slot -> when first sent, where not t0 (direct dispatch)

    def usable(self, out_shape) -> dict[int, np.ndarray]:
        """Results of the expected shape: (B, *out_shape) once ``out_shape`` (one
        input's output) is known, else the most common shape among the results
        (a lone wrong shape never wins)."""
        if out_shape is None:
            if not self.results:
                return {}
            expected = Counter(y.shape for y in self.results.values()).most_common(1)[0][0]
        else:
            expected = (self.size, *out_shape)
        return {s: y for s, y in self.results.items() if y.shape == expected}

    def erase(self, slot, worker, why):
        self.failed[slot] = why if worker == slot else f"{why} (re-run on worker {worker})"

    def missing_slots(self, n_workers) -> list[int]:
        """Slots with no result, nothing running, and not yet re-sent."""
        return [s for s in range(n_workers)
                if s not in self.results and s not in self.outstanding and s not in self.redispatched]
