"""Futures whose done-callbacks run on a callback thread, never on the dispatcher.

:class:`concurrent.futures.Future` runs a done-callback in the thread that
completes the future. Every executor here completes its futures on its
dispatcher thread, so a caller's callback that blocks (waits on another
future, writes to a slow socket) would stall every event of every batch, and
one that calls ``shutdown()`` would try to join the thread it runs on. A
:class:`CallbackFuture` instead sets its state where it is completed (a
waiter in ``result()`` wakes at once) and hands each callback to its
executor's :class:`CallbackThread`, which runs them one after another, in the
order their futures completed.

Semantics kept from :mod:`concurrent.futures`: a callback added to a future
that is already done runs at once in the thread that adds it; a callback that
raises is logged and ignored. Code of the runtime itself that must follow a
future without a thread hop (a batch's result answering its requests) uses
:func:`when_done`: it runs in the completing thread and must neither block nor
call the caller's code except by completing other futures.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
import time
from concurrent.futures import Future

__all__ = ["CallbackFuture", "CallbackThread", "when_done"]

log = logging.getLogger("gencc.runtime")


def _call(fn, fut):
    try:
        fn(fut)
    except BaseException:  # SystemExit, KeyboardInterrupt too: the next callbacks still run
        log.exception("exception calling callback for %r", fut)


class CallbackThread:
    """One thread that runs futures' done-callbacks in order; started at the first one.

    Parameters
    ----------
    name : str
        The thread's name.

    Notes
    -----
    After :meth:`close`, a callback still handed over runs in the thread that
    hands it over (by then the dispatcher has stopped): none is lost.
    """

    def __init__(self, name: str = "gencc-callbacks"):
        self.name = name
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False

    def post(self, fn, fut):
        """Run ``fn(fut)`` on this thread, after the callbacks handed over before it."""
        with self._lock:
            if not self._closed:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
                    self._thread.start()
                self._queue.put((fn, fut))
                return
        _call(fn, fut)

    def is_current(self) -> bool:
        """Whether the calling thread is this one (a callback is running)."""
        return self._thread is not None and threading.current_thread() is self._thread

    def close(self, timeout: float = 10.0):
        """Run the callbacks handed over so far, then stop; waits up to ``timeout`` for them,
        unless called from a callback (which cannot wait for itself). Idempotent."""
        with self._lock:
            if not self._closed:
                self._closed = True
                if self._thread is not None:
                    self._queue.put(None)
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=timeout)
            if thread.is_alive():
                log.warning("a future's callback still runs %g s after shutdown; leaving it", timeout)

    def _loop(self):
        while (item := self._queue.get()) is not None:
            _call(*item)


class CallbackFuture(Future):
    """A :class:`concurrent.futures.Future` whose done-callbacks run on ``callbacks``.

    Parameters
    ----------
    callbacks : CallbackThread, optional
        Where callbacks added before the future is done run; None: in the
        completing thread, as for a plain Future.

    Attributes
    ----------
    completed_at : float or None
        ``time.monotonic()`` when the result or exception was set (not when
        a callback ran): the moment to time an answer by.
    """

    def __init__(self, callbacks: CallbackThread | None = None):
        super().__init__()
        self._callbacks = callbacks
        self.completed_at: float | None = None
        self._queued = 0  # this future's callbacks handed over and not yet run
        self._queued_lock = threading.Lock()

    def set_result(self, result):
        self._stamp()
        super().set_result(result)

    def set_exception(self, exception):
        self._stamp()
        super().set_exception(exception)

    def _stamp(self):
        with self._condition:
            if not self.done():  # a set that fails (done already) keeps the first time
                self.completed_at = time.monotonic()

    def add_done_callback(self, fn):
        """Attach ``fn``, called with this future once it is done or cancelled: on the
        executor's callback thread, or at once here if it is done already (after any of its
        callbacks still waiting there: callbacks run in the order they were added)."""
        if self._callbacks is None:
            super().add_done_callback(fn)
            return
        with self._queued_lock:
            inline = self.done() and not self._queued
        if inline:
            super().add_done_callback(fn)
        else:  # the base class calls the wrapper at completion (or here, if completed meanwhile)
            super().add_done_callback(functools.partial(self._hand_over, fn))

    def _hand_over(self, fn, fut):
        with self._queued_lock:
            self._queued += 1
        self._callbacks.post(self._run_handed, (fn, fut))

    def _run_handed(self, item):
        fn, fut = item
        try:
            _call(fn, fut)
        finally:
            with self._queued_lock:
                self._queued -= 1

    def _when_done(self, fn):
        Future.add_done_callback(self, fn)


def when_done(fut: Future, fn):
    """Call ``fn(fut)`` in the thread that completes ``fut`` (the runtime's own bookkeeping:
    quick, never blocking); for a plain Future, as ``add_done_callback``."""
    if isinstance(fut, CallbackFuture):
        fut._when_done(fn)
    else:
        fut.add_done_callback(fn)
