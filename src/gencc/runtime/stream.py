"""Single requests into micro-batches: the batching window of ``CodedExecutor.submit_one``.

A :class:`RequestBatcher` collects requests until it holds ``capacity`` of
them (B*K) or the oldest has waited ``window`` seconds, then hands them to a
dispatch function as one batch, padded to a multiple of K. When it does so is
the pure :func:`due`.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from concurrent.futures import CancelledError, Future

import numpy as np

from .._validation import check_nonnegative
from ..errors import InvalidInputError, MissingOutputsError

__all__ = ["RequestBatcher", "StreamingExecutor", "check_input", "due", "padded_rows"]

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
        Future of a :class:`~gencc.runtime.BatchResult` (or raises).
    capacity : int
        Most requests per batch (B*K).
    K : int
    window : float
        Seconds the oldest request of a partial batch waits before the batch
        is padded and dispatched.
    early : bool
        Call ``dispatch(X, on_early=callback)``: ``callback(rows, outputs)``
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

    def __init__(self, dispatch, capacity: int, K: int, window: float, early: bool = False):
        self._dispatch = dispatch
        self.early = early
        self.capacity, self.K, self.window = capacity, K, window
        self._cond = threading.Condition()
        self._pending: list[tuple[np.ndarray, Future]] = []
        self._opened = 0.0  # when the oldest pending request arrived
        self._closed = False
        self._thread: threading.Thread | None = None
        self.batches = 0  # batches dispatched
        self.partial = 0  # of which dispatched at the window's expiry, not full

    def put(self, x: np.ndarray) -> Future:
        """Queue one checked request; returns its future (pending until dispatched)."""
        fut: Future = Future()
        batch = None
        with self._cond:
            if self._closed:
                raise RuntimeError("cannot submit to an executor that was shut down")
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="gencc-batcher", daemon=True)
                self._thread.start()
            if not self._pending:
                self._opened = time.monotonic()
            self._pending.append((x, fut))
            if len(self._pending) >= self.capacity:  # full: out at once, from this thread
                batch, self._pending = self._pending, []
            elif len(self._pending) == 1:
                self._cond.notify()
        if batch is not None:
            self._send(batch, partial=False)
        return fut

    def close(self, flush: bool, timeout: float = 10.0):
        """Stop taking requests; dispatch (``flush``) or cancel those waiting."""
        with self._cond:
            self._closed = True
            batch, self._pending = self._pending, []
            self._cond.notify_all()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=timeout)
        if not batch:
            return
        if flush:
            self._send(batch, partial=True)
        else:
            for _, fut in batch:
                fut.cancel()

    def _loop(self):
        while True:
            with self._cond:
                while True:
                    if self._closed:
                        return
                    age = time.monotonic() - self._opened
                    if due(len(self._pending), self.capacity, age, self.window):
                        batch, self._pending = self._pending, []
                        break
                    # bounded waits: re-check the clock at least every second
                    self._cond.wait(timeout=min(1.0, self.window - age) if self._pending else 1.0)
            try:
                self._send(batch, partial=len(batch) < self.capacity)
            except Exception:  # never leave a request without an end; _send sets them
                log.exception("dispatching a micro-batch failed")

    def _send(self, batch, *, partial: bool):
        live = [(x, fut) for x, fut in batch if fut.set_running_or_notify_cancel()]
        if not live:
            return
        n = len(live)
        rows = [x for x, _ in live]
        rows += [rows[-1]] * (padded_rows(n, self.K) - n)
        futures = [fut for _, fut in live]
        try:
            if self.early:
                bfut = self._dispatch(np.stack(rows), on_early=lambda r, out: _answer_early(futures, r, out))
            else:
                bfut = self._dispatch(np.stack(rows))
        except BaseException as exc:
            for fut in futures:
                fut.set_exception(exc if isinstance(exc, Exception) else RuntimeError(repr(exc)))
            if not isinstance(exc, Exception):
                raise
            return
        self.batches += 1
        self.partial += partial
        bfut.add_done_callback(lambda bf: _resolve(bf, futures))


def _answer_early(futures: list[Future], rows, outputs):
    """Answer the requests of ``rows`` (padding rows have none) with ``outputs[i]``."""
    for i, r in enumerate(rows):
        if r < len(futures) and not futures[r].done():
            futures[r].set_result(np.array(outputs[i], copy=True))


def _resolve(batch_future: Future, futures: list[Future]):
    """Give each request its row of the batch's result, or the batch's error
    (requests answered early keep their answer)."""
    try:
        res = batch_future.result(timeout=0)
    except CancelledError:
        for fut in futures:
            if not fut.done():
                fut.set_exception(CancelledError("its batch was cancelled"))
        return
    except BaseException as exc:
        for fut in futures:
            if not fut.done():
                fut.set_exception(exc)
        return
    for i, fut in enumerate(futures):
        if fut.done():
            continue
        try:
            fut.set_result(res.output(i))
        except MissingOutputsError as exc:
            fut.set_exception(exc)


def check_input(x, index, in_shape):
    """One input as float64 with its shape, or an InvalidInputError naming it.

    Parameters
    ----------
    x : array_like
    index : int
        The input's position in its stream (named in the error).
    in_shape : tuple or None
        The shape every input must have (None: any).
    """
    if np.iscomplexobj(x):
        raise InvalidInputError(f"input {index} is complex; f is computed on real inputs", index=index)
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"input {index} is not a numeric array: {exc}", index=index) from None
    if in_shape is not None and arr.shape != in_shape:
        raise InvalidInputError(f"input {index} has shape {arr.shape}, expected {in_shape} like the "
                                f"first input", index=index)
    if not np.all(np.isfinite(arr)):
        raise InvalidInputError(f"input {index} contains NaN or Inf", index=index)
    return arr, arr.shape


class StreamingExecutor:
    """What every executor serving a request stream shares: the context
    manager, its backend, the batching window of its :class:`RequestBatcher`
    and the per-request check of ``submit_one``.

    A subclass calls :meth:`_init_stream`, sets ``_backend``, ``_batcher``
    and ``batch_window``, and implements ``shutdown``.
    """

    def _init_stream(self):
        self._stream_lock = threading.Lock()
        self._stream_shape = None  # in_shape of the first request given to submit_one
        self._stream_count = itertools.count()

    def _put_request(self, x) -> Future:
        """Check one request and queue it; a bad one gets an already-failed future
        (an :class:`~gencc.errors.InvalidInputError` naming it) and never
        reaches a batch."""
        with self._stream_lock:
            index = next(self._stream_count)
            try:
                arr, shape = check_input(x, index, self._stream_shape)
            except InvalidInputError as exc:
                fut: Future = Future()
                fut.set_running_or_notify_cancel()
                fut.set_exception(exc)
                return fut
            self._stream_shape = shape
        return self._batcher.put(arr)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()

    @property
    def backend(self):
        """The pool of workers (a :class:`~gencc.runtime.backend.Backend`)."""
        return self._backend

    def set_batch_window(self, seconds: float):
        """Change ``batch_window`` (seconds) for the requests that arrive from now on."""
        self.batch_window = check_nonnegative(seconds, "seconds")
        self._batcher.window = self.batch_window
