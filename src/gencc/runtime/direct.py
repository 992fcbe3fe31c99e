"""Direct dispatch: a batch filled input by input, each input's direct task sent as soon as its rows are in.

With ``CodedExecutor(direct_dispatch=True)`` a :class:`ColumnBatcher` fills an
open batch column-major (the pure :func:`column_row`): input k's B rows
arrive one after another, and once they are in, the task(s) of the workers
that carry input k unchanged (a systematic code's) go out at once, before
the batch is full; a column whose first row has waited a column window goes
out padded (the pure :func:`column_due`). The parity tasks follow when the
batch closes. The executor's side (``open``, ``send``, ``close``) only moves
these events to the coordinator under its lock; the policy is here and in
:class:`~gencc.runtime.coordinator.Coordinator`.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future

import numpy as np

from .futures import CallbackThread, when_done
from .stream import RequestBatcher, _answer_early, _resolve

__all__ = ["ColumnBatcher", "column_due", "column_row"]

log = logging.getLogger("gencc.runtime")


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


def column_row(j: int, B: int, K: int) -> int:
    """Row of a batch of B*K rows that its ``j``-th request fills, column-major.

    Row ``b*K + k`` is input k of sub-batch b (see
    :mod:`gencc.runtime.microbatch`); requests ``k*B .. k*B + B-1`` fill input
    k's B rows, so input k (column k) is complete after request ``k*B + B-1``.
    """
    return (j % B) * K + j // B


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


