"""One request of a stream: its future, and how its answer was obtained.

``submit_one`` returns a :class:`RequestFuture`: a
:class:`concurrent.futures.Future` whose ``result()`` is the output, as for any
future, and whose :attr:`~RequestFuture.info`, once it is answered, is an
:class:`AnswerInfo`: whether a worker computed f on the input itself or the
answer was decoded, the decoder's error estimate, and whether the decode had
as many results as the scheme trusts.
"""

from __future__ import annotations

import threading
from concurrent.futures import InvalidStateError
from dataclasses import dataclass

from .futures import CallbackFuture, CallbackThread

__all__ = ["AnswerInfo", "RequestFuture"]


@dataclass(frozen=True)
class AnswerInfo:
    """How one request's answer was obtained.

    Attributes
    ----------
    exact : bool
        True when the answer is f(x) computed by a worker on x itself (a
        systematic code's own worker, a replica, a hedged copy, uncoded);
        False when it was decoded from coded outputs.
    error_estimate : float or None
        0.0 for an exact answer. For a decoded one, the decoder's own
        estimate of the mean squared error of its batch (leave-one-out for
        GCC, LeTCC and BACC); None where the scheme has none (LCC, ParM's
        rebuilt outputs).
    trusted : bool
        False when the answer was decoded from fewer results than the
        scheme's ``trusted_returns`` (``n_min`` lowered, e.g. a decode from
        K-1 at the deadline): the decoder cannot stand behind it, whatever
        its error estimate says. Exact answers are always trusted.
    n_returned : int or None
        Worker results its batch was decoded from; None for an answer sent
        as soon as its own worker returned, before the batch was decoded.
    batch : int or None
        The batch it was computed in (its :class:`~gencc.runtime.BatchResult`'s
        ``batch``); None for :class:`~gencc.runtime.HedgedExecutor`'s groups.
    rmse, rmse_p90 : float or None
        This answer's own error: the decoder's estimate of its
        root-mean-squared error and a bound it stays under for about 90% of
        decoded answers (``Decoded.info["rmse"]``, ``["rmse_p90"]``); 0.0
        for an exact answer, None where the scheme has no per-input estimate.
    """

    exact: bool
    error_estimate: float | None
    trusted: bool = True
    n_returned: int | None = None
    batch: int | None = None
    rmse: float | None = None
    rmse_p90: float | None = None


EXACT = AnswerInfo(exact=True, error_estimate=0.0, rmse=0.0, rmse_p90=0.0)


class RequestFuture(CallbackFuture):
    """The future of one request: a :class:`concurrent.futures.Future` with :attr:`info`.

    Its done-callbacks run on the executor's callback thread
    (:class:`~gencc.runtime.futures.CallbackFuture`), never on its dispatcher.

    Parameters
    ----------
    callbacks : CallbackThread, optional
        The executor's callback thread.

    Attributes
    ----------
    info : AnswerInfo or None
        How the answer was obtained; set before the result, so it is there
        whenever ``result()`` returns. None while pending, and for a request
        that failed or was cancelled.

    Examples
    --------
    >>> import numpy as np, gencc
    >>> from gencc.workloads import WorkloadFactory
    >>> with gencc.CodedExecutor(WorkloadFactory("xsinx"), gencc.GCC(4, 6, worker_points="systematic"),
    ...                          backend="threads") as ex:
    ...     fut = ex.submit_one(np.ones(4))
    ...     y = fut.result(timeout=60)
    >>> fut.info.exact, fut.info.error_estimate
    (True, 0.0)
    """

    def __init__(self, callbacks: CallbackThread | None = None):
        super().__init__(callbacks)
        self.info: AnswerInfo | None = None
        self._answer_lock = threading.Lock()  # the info and the result it describes, set together

    def answer(self, value, info: AnswerInfo) -> bool:
        """Resolve with ``value`` described by ``info``, unless already done; returns whether it did."""
        with self._answer_lock:
            if self.done():
                return False
            self.info = info
            try:
                self.set_result(value)
            except InvalidStateError:  # cancelled meanwhile
                self.info = None
                return False
            return True

    def fail(self, exc: BaseException) -> bool:
        """End with ``exc``, unless already done; returns whether it did. (No lock: an
        :meth:`answer` that loses the race to it finds the future done and drops its info.)"""
        try:
            self.set_exception(exc)
        except InvalidStateError:
            return False
        return True
