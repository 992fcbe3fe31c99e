"""What every executor serving a request stream shares: :class:`StreamingExecutor`."""

from __future__ import annotations

import itertools
import threading

from .._validation import check_input, check_nonnegative
from ..errors import InvalidInputError
from .futures import CallbackThread
from .request import RequestFuture

__all__ = ["StreamingExecutor"]


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
        self._callbacks = CallbackThread()  # where the futures' done-callbacks run

    def _put_request(self, x) -> RequestFuture:
        """Check one request and queue it; a bad one gets an already-failed future
        (an :class:`~gencc.errors.InvalidInputError` naming it) and never
        reaches a batch."""
        with self._stream_lock:
            index = next(self._stream_count)
            try:
                arr, shape = check_input(x, index, self._stream_shape)
            except InvalidInputError as exc:
                fut = RequestFuture(self._callbacks)
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
        """The pool of workers (a :class:`~gencc.runtime.backends.Backend`)."""
        return self._backend

    def set_batch_window(self, seconds: float):
        """Change ``batch_window`` (seconds) for the requests that arrive from now on."""
        self.batch_window = check_nonnegative(seconds, "seconds")
        self._batcher.window = self.batch_window
