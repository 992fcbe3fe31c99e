"""Single requests into micro-batches: the batching window of ``CodedExecutor.submit_one``.

A :class:`RequestBatcher` collects requests until it holds ``capacity`` of
them (B*K) or the oldest has waited ``window`` seconds, then hands them to a
dispatch function as one batch, padded to a multiple of K. When it does so is
the pure :func:`due`. A :class:`ColumnBatcher` (``direct_dispatch``) fills a
batch input by input (the pure :func:`column_row`) and sends each input's
systematic task as soon as its rows are in, or, padded, once its first row has
waited a column window (the pure :func:`column_due`).
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

__all__ = ["ColumnBatcher", "RequestBatcher", "column_due", "column_row", "due", "padded_rows"]

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


def column_due(n: int, B: int, age: float, window: float | None) -> bool:
    """Whether a batch being filled column by column should send its partial column now.

    Parameters
    ----------
    n : int
        Rows filled so far; the current column is partial when ``n % B != 0``.
    B : int
        Rows per column (the micro-batch).
    age : float
        Seconds since the partial column's first row arrived.
    window : float or None
        The column window, seconds; None: a column waits for its B rows (or
        the batch's close).

    Returns
    -------
    bool
        True when the column is partial and its first row has waited the
        whole window: it goes out padded, and the next request starts the
        next column.
    """
    return window is not None and n % B != 0 and age >= window


def padded_rows(n: int, K: int) -> int:
    """Rows a batch of ``n`` requests is padded to: the next multiple of K."""
    return -(-n // K) * K


def column_row(j: int, B: int, K: int) -> int:
    """Row of a batch of B*K rows that its ``j``-th request fills, column-major.

    Row ``b*K + k`` is input k of sub-batch b (see
    :mod:`gencc.runtime.microbatch`); requests ``k*B .. k*B + B-1`` fill input
    k's B rows, so input k (column k) is complete after request ``k*B + B-1``.
    """
    return (j % B) * K + j // B


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


class _OpenBatch:
    """The batch a :class:`ColumnBatcher` is filling: rows and futures by row (None: not yet arrived)."""

    def __init__(self, token, rows: int):
        self.token = token  # the executor's handle of the batch (its index and fault plan)
        self.xs: list = [None] * rows
        self.futs: list = [None] * rows
        self.live: list = [None] * rows  # set_running_or_notify_cancel's answer, once asked
        self.n = 0  # rows filled: requests arrived, and the padding rows of columns sent partial
        self.column_since = 0.0  # when the current column's first request arrived
        self.sent: set[int] = set()  # columns (inputs) sent early
        self.future: Future | None = None  # the batch's, once a column was sent
        self.closed = False
        self.lock = threading.Lock()  # a column's send and the batch's close, one at a time

    def __len__(self):
        return self.n

    def start(self, r) -> bool:
        """Mark row r's request running (once); False if the caller cancelled it or the row
        is padding."""
        if self.futs[r] is None:
            return False
        if self.live[r] is None:
            self.live[r] = self.futs[r].set_running_or_notify_cancel()
        return self.live[r]


class ColumnBatcher(RequestBatcher):
    """A :class:`RequestBatcher` that sends each input's direct task as soon as its rows are in.

    An open batch is filled column-major (:func:`column_row`): input k's B
    rows arrive one after another, and once they are all in,
    ``direct.send(token, k, X_k)`` (X_k of shape (B, *in_shape)) sends the
    task(s) of the slots that carry input k unchanged; with a ``column_window``,
    a column whose first request has waited that long goes out with its
    missing rows padded (copies of a real row of it: its requests are answered
    from it, the padding rows have none) and the next request starts the next
    column. When the batch closes
    (full, or its window expired) the rest goes out: if some column went
    early, ``direct.close(token, X)`` with every missing row padded (X of
    shape (B*K, *in_shape)); otherwise the batch is dispatched as a
    :class:`RequestBatcher` would (arrival order, padded to a multiple of K),
    under the index taken by ``direct.open()`` when its first request came.

    Parameters
    ----------
    dispatch, capacity, K, window
        As :class:`RequestBatcher` (``dispatch`` also takes ``opened=token``).
    direct : object
        ``open() -> token``; ``send(token, k, X_k, on_early) -> Future`` of the
        batch (None if no slot carries input k); ``close(token, X) -> Future``.
    column_window : float, optional
        Seconds a partial column waits for its B requests before it goes out
        padded (None: until the batch closes). ``padded_columns`` counts them.

    Notes
    -----
    A request cancelled while it waits keeps its row (the column layout
    stays) and is computed; its future stays cancelled.
    """

    def __init__(self, dispatch, capacity: int, K: int, window: float, direct, column_window: float | None = None,
                 callbacks: CallbackThread | None = None):
        super().__init__(dispatch, capacity, K, window, early=True, callbacks=callbacks)
        self.direct = direct
        self.B = capacity // K
        self.column_window = column_window
        self.padded_columns = 0  # columns sent partial at the column window's expiry
        self._open: _OpenBatch | None = None

    def _count(self) -> int:
        return 0 if self._open is None else self._open.n

    def close_early(self, index) -> bool:
        """Close the open batch now (its window not yet expired) if its index is ``index``:
        the executor asks when one of its early tasks is late, so that the parity tasks that
        can stand in for it go out. The batcher's own thread closes it. Returns whether asked."""
        with self._cond:
            if (self._closed or self._close_asked or self._open is None or self._open.token[0] != index
                    or not self._open.sent):
                return False
            self._close_asked = True
            self._cond.notify_all()
            return True

    def _add(self, x, fut):
        if self._open is None:
            self._open = _OpenBatch(self.direct.open(), self.capacity)
        ob = self._open
        if ob.n % self.B == 0:  # the first request of a column
            ob.column_since = time.monotonic()
            if self.column_window is not None:
                self._cond.notify()  # the batcher's thread times the column window
        r = column_row(ob.n, self.B, self.K)
        ob.xs[r], ob.futs[r] = x, fut
        ob.n += 1
        if ob.n % self.B == 0:  # column (ob.n - 1) // B is complete
            return ob, (ob.n - 1) // self.B
        return None

    def _take(self):
        ob, self._open = self._open, None
        return ob

    def _seal_column(self, now):
        ob = self._open
        if ob is None or not column_due(ob.n, self.B, now - ob.column_since, self.column_window):
            return None
        k = ob.n // self.B
        ob.n = (k + 1) * self.B  # the rest of column k is padding
        self.padded_columns += 1
        return ob, k

    def _wait_time(self, now, age) -> float:
        wait = super()._wait_time(now, age)
        ob = self._open
        if ob is not None and self.column_window is not None and ob.n % self.B:
            wait = min(wait, self.column_window - (now - ob.column_since))
        return max(wait, 0.0)

    def _on_early(self, ob):
        return lambda rows, out, batch: _answer_early(ob.futs, rows, out, batch)

    def _send_column(self, ob, k):
        with ob.lock:
            if ob.closed or k in ob.sent:
                return
            rows = [b * self.K + k for b in range(self.B)]
            for r in rows:
                ob.start(r)
            real = next(ob.xs[r] for r in rows if ob.xs[r] is not None)
            for r in rows:  # a column sent partial: its padding is part of the batch the parity tasks encode
                if ob.xs[r] is None:
                    ob.xs[r] = real
            try:
                fut = self.direct.send(ob.token, k, np.stack([ob.xs[r] for r in rows]), self._on_early(ob))
            except Exception as exc:  # shut down meanwhile, or a bug: these requests end now
                log.exception("sending a column early failed")
                for r in rows:
                    ob.futs[r].fail(exc)
                return
            if fut is not None:
                ob.sent.add(k)
                ob.future = fut

    def _send(self, ob, *, partial: bool):
        if ob is None:
            return
        with ob.lock:
            ob.closed = True
            order = [column_row(j, self.B, self.K) for j in range(ob.n)]
            if not ob.sent:  # nothing went early: the RequestBatcher's layout and padding
                live = [(ob.xs[r], ob.futs[r]) for r in order if ob.start(r) and not ob.futs[r].done()]
                self._send_live(live, partial, opened=ob.token)
                return
            for r in order:
                ob.start(r)
            X = list(ob.xs)
            real = next(ob.xs[r] for r in reversed(order) if ob.xs[r] is not None)
            for r in range(len(X)):
                if X[r] is None:  # padding: a copy of a real row
                    X[r] = real
            try:
                bfut = self.direct.close(ob.token, np.stack(X))
            except Exception as exc:
                log.exception("closing a batch failed")
                bfut = Future()
                bfut.set_exception(exc)
            self.batches += 1
            self.partial += partial
            when_done(bfut, lambda bf: _resolve(bf, ob.futs))

    def _cancel(self, ob):
        """Cancel the requests still waiting; those of columns already sent end with the batch."""
        if ob is None:
            return
        with ob.lock:
            ob.closed = True
            for r, fut in enumerate(ob.futs):
                if fut is not None and ob.live[r] is None:
                    fut.cancel()
            if ob.future is not None:
                when_done(ob.future, lambda bf: _resolve(bf, ob.futs))


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
