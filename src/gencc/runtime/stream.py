"""Single requests into micro-batches: the batching window of ``CodedExecutor.submit_one``.

A :class:`RequestBatcher` collects requests until it holds ``capacity`` of
them (B*K) or the oldest has waited ``window`` seconds, then hands them to a
dispatch function as one batch, padded to a multiple of K. When it does so is
the pure :func:`due`. Filling a batch input by input, with each input's
direct task sent as soon as its rows are in, is :mod:`gencc.runtime.direct`.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import CancelledError, Future

import numpy as np

from ..errors import ErrorBoundExceededError, MissingOutputsError
from .futures import CallbackThread, when_done
from .request import AnswerInfo, RequestFuture

__all__ = ["RequestBatcher", "due", "padded_rows"]

log = logging.getLogger("gencc.runtime")


def due(n_pending: int, capacity: int, age: float, window: float) -> bool:
    """Whether the pending requests go out now.

    Parameters
    ----------
    n_pending : int
        Requests waiting.
    capacity : int
        Requests per micro-batch (B*K).
    age : float
        Seconds the oldest pending request has waited.
    window : float
        The batching window, seconds.

    Returns
    -------
    bool
        True when the batch is full, or when it holds anything and its oldest
        request has waited the whole window.
    """
    return n_pending >= capacity or (n_pending > 0 and age >= window)


def padded_rows(n: int, K: int) -> int:
    """Rows a batch of ``n`` requests is padded to: the next multiple of K."""
    return -(-n // K) * K


class RequestBatcher:
    """Form micro-batches from single requests under a bounded window.

    Parameters
    ----------
    dispatch : callable
        ``dispatch(X)`` with X of shape (m*K, *in_shape), m >= 1, returns a
        Future of a :class:`~gencc.runtime.BatchResult` (or raises): anything
        with ``output(i)`` and ``answer_info(i)`` for row i.
    capacity : int
        Most requests per batch (B*K).
    K : int
    window : float
        Seconds the oldest request of a partial batch waits before the batch
        is padded and dispatched.
    early : bool
        Call ``dispatch(X, on_early=callback)``: ``callback(rows, outputs, batch)``
        answers the requests of those rows before the batch ends (a
        systematic code's own workers); the batch's result then answers
        only the rest.

    Notes
    -----
    A full batch is dispatched at once, in the thread that completed it; a
    partial one by this batcher's own thread when its window expires. Every
    request's future ends: with its output, the batch's error, a
    per-request :class:`~gencc.errors.MissingOutputsError`, or cancelled
    (:meth:`close` without flushing; or ``future.cancel()`` by the caller
    while the request still waits in the window).
    """

    def __init__(self, dispatch, capacity: int, K: int, window: float, early: bool = False,
                 callbacks: CallbackThread | None = None):
        self._dispatch = dispatch
        self.callbacks = callbacks
        self.early = early
        self.capacity, self.K, self.window = capacity, K, window
        self._cond = threading.Condition()
        self._pending: list[tuple[np.ndarray, Future]] = []
        self._opened = 0.0  # when the oldest pending request arrived
        self._closed = False
        self._close_asked = False  # close the open batch now, whatever its age (ColumnBatcher.close_early)
        self._thread: threading.Thread | None = None
        self.batches = 0  # batches dispatched
        self.partial = 0  # of which dispatched at the window's expiry, not full

    def put(self, x: np.ndarray) -> RequestFuture:
        """Queue one checked request; returns its future (pending until dispatched)."""
        fut = RequestFuture(self.callbacks)
        batch = None
        with self._cond:
            if self._closed:
                raise RuntimeError("cannot submit to an executor that was shut down")
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="gencc-batcher", daemon=True)
                self._thread.start()
            if not self._count():
                self._opened = time.monotonic()
            column = self._add(x, fut)
            if self._count() >= self.capacity:  # full: out at once, from this thread
                batch = self._take()
            elif self._count() == 1:
                self._cond.notify()
        if column is not None:
            self._send_column(*column)
        if batch is not None:
            self._send(batch, partial=False)
        return fut

    def _count(self) -> int:
        return len(self._pending)

    def _add(self, x, fut):
        """Queue a request (under the lock); returns what to send at once (ColumnBatcher)."""
        self._pending.append((x, fut))

    def _take(self):
        batch, self._pending = self._pending, []
        return batch

    def _send_column(self, *column):
        pass

    def _cancel(self, batch):
        for _, fut in batch:
            fut.cancel()

    def close(self, flush: bool, timeout: float = 10.0):
        """Stop taking requests; dispatch (``flush``) or cancel those waiting."""
        with self._cond:
            self._closed = True
            batch = self._take()
            self._cond.notify_all()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=timeout)
        if not batch:
            return
        if flush:
            self._send(batch, partial=True)
        else:
            self._cancel(batch)

    def _loop(self):
        while True:
            batch = column = None
            with self._cond:
                while True:
                    if self._closed:
                        return
                    now = time.monotonic()
                    age = now - self._opened
                    asked, self._close_asked = self._close_asked, False
                    column = self._seal_column(now)
                    if due(self._count(), self.capacity, age, 0.0 if asked else self.window):
                        batch = self._take()
                        break
                    if column is not None:
                        break
                    # bounded waits: re-check the clock at least every second
                    self._cond.wait(timeout=self._wait_time(now, age))
            try:
                if column is not None:  # before the batch: a closed batch sends no more columns
                    self._send_column(*column)
                if batch is not None:
                    self._send(batch, partial=len(batch) < self.capacity)
            except Exception:  # never leave a request without an end; _send sets them
                log.exception("dispatching a micro-batch failed")

    def _seal_column(self, now):
        """A partial column to send now, padded (ColumnBatcher; under the lock)."""
        return None

    def _wait_time(self, now, age) -> float:
        """Seconds the batcher's thread may sleep before something is due (under the lock)."""
        return min(1.0, self.window - age) if self._count() else 1.0

    def _send(self, batch, *, partial: bool):
        self._send_live([(x, fut) for x, fut in batch if fut.set_running_or_notify_cancel()], partial)

    def _send_live(self, live, partial, opened=None):
        if not live:
            return
        n = len(live)
        rows = [x for x, _ in live]
        rows += [rows[-1]] * (padded_rows(n, self.K) - n)
        futures = [fut for _, fut in live]
        kw = {}
        if self.early:
            kw["on_early"] = lambda r, out, batch: _answer_early(futures, r, out, batch)
        if opened is not None:  # ColumnBatcher: a batch whose index was taken when it opened
            kw["opened"] = opened
        try:
            bfut = self._dispatch(np.stack(rows), **kw)
        except BaseException as exc:
            for fut in futures:
                fut.fail(exc if isinstance(exc, Exception) else RuntimeError(repr(exc)))
            if not isinstance(exc, Exception):
                raise
            return
        self.batches += 1
        self.partial += partial
        when_done(bfut, lambda bf: _resolve(bf, futures))


def _answer_early(futures: list[RequestFuture], rows, outputs, batch):
    """Answer the requests of ``rows`` (padding rows have none) with ``outputs[i]``,
    computed by their own worker in batch ``batch``."""
    info = AnswerInfo(exact=True, error_estimate=0.0, batch=batch, rmse=0.0, rmse_p90=0.0)
    for i, r in enumerate(rows):
        if r < len(futures) and futures[r] is not None and not futures[r].done():
            futures[r].answer(np.array(outputs[i], copy=True), info)


def _resolve(batch_future: Future, futures: list[RequestFuture]):
    """Give each request its row of the batch's result and how it was obtained,
    or the batch's error (requests answered early keep their answer)."""
    try:
        res = batch_future.result(timeout=0)
    except CancelledError:
        for fut in futures:
            if fut is not None:
                fut.fail(CancelledError("its batch was cancelled"))
        return
    except BaseException as exc:
        for fut in futures:
            if fut is not None:
                fut.fail(exc)
        return
    for i, fut in enumerate(futures):
        if fut is None or fut.done():  # None: a padding row (ColumnBatcher)
            continue
        try:
            fut.answer(res.output(i), res.answer_info(i))
        except (MissingOutputsError, ErrorBoundExceededError) as exc:
            fut.fail(exc)
