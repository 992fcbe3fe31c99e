"""``map`` for every executor: inputs read lazily, cut into batches, answers yielded in input order.

:func:`ordered_map` is built on an executor's batch submit (``submit(X) ->
Future``) and nothing else, so :class:`~gencc.runtime.CodedExecutor` and
:class:`~gencc.runtime.HedgedExecutor` share it: the same checks per input,
the same bounded lookahead (at most ``max_in_flight`` batches submitted and
not yet yielded), and the same end: when the caller stops iterating (``break``,
``close()``, an exception), the batches still in flight are handed to the
executor's ``abandon``, which tells their workers to drop them, and no more
input is read.

Notes
-----
The per-input cost is what a stream of millions pays, so the paths are
measured (``benchmarks/bench_overhead.py --map-paths``): a plain ndarray of
real numbers is cut into batches whole (one copy and one vectorised
finiteness check a batch, no Python work per row); any other iterable goes
row by row, copying each input into its batch's buffer as it is read (the
caller may refill its array once the generator resumes); a decoded batch's
consecutive rows are yielded in one run without a lock per row; a row
answered early (its own worker returned before the batch was decoded:
``early=True``) is yielded as soon as it is at the head.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from concurrent.futures import CancelledError

import numpy as np

from .._validation import check_input, check_nonnegative
from ..errors import BatchFailedError, ErrorBoundExceededError, InvalidInputError, MissingOutputsError
from .futures import when_done

__all__ = ["ordered_map"]

#: a row's own failure, yielded (or raised) in its place; anything else a batch raises is the executor's and is raised
ROW_ERRORS = (BatchFailedError, MissingOutputsError, InvalidInputError)


class EarlyRows(dict):
    """Row -> output answered early; ``cond`` wakes the caller waiting for a row when the
    row or its whole batch is answered."""

    def __init__(self):
        super().__init__()
        self.cond = threading.Condition()

    def update_rows(self, rows, outputs, _batch=None):
        with self.cond:
            for i, r in enumerate(rows):
                self[r] = np.array(outputs[i], copy=True)
            self.cond.notify_all()

    def wake(self, _future=None):
        with self.cond:
            self.cond.notify_all()


def ordered_map(submit, inputs, *, size, pad_to=1, max_in_flight=4, early=False, abandon=None, wait_s=60.0,
                return_exceptions=False, progress=False, timeout=None, desc="gencc map"):
    """Yield f of every input, in order, through ``submit``.

    Parameters
    ----------
    submit : callable
        ``submit(X, on_early)`` with X the executor's own array, shape
        (n, *in_shape), n a multiple of ``pad_to`` and at most ``size``;
        returns a Future of a result with ``outputs`` (n, *out_shape) and
        ``output(k)`` (which may raise the row's own error); ``on_early`` is
        None unless ``early``, else ``on_early(rows, outputs)`` may be called
        with rows answered before the result. Raises RuntimeError once the
        executor is shut down.
    inputs : iterable of array_like, each of shape in_shape, or ndarray of shape (n, *in_shape)
    size : int
        Inputs per batch.
    pad_to : int
        The last batch is padded (repeating its last input) to a multiple of this; padding is dropped.
    max_in_flight : int
        Batches submitted and not yet yielded, at most.
    early : bool
        Ask ``submit`` for early answers and yield them as soon as they are at the head.
    abandon : callable, optional
        ``abandon(futures)``: the batches still in flight when the caller stops iterating.
    wait_s : float
        Seconds to wait for one batch without ``timeout`` (the executor's own bound on a batch,
        plus a margin): past it the row is a TimeoutError.
    return_exceptions, progress, timeout
        As in :meth:`CodedExecutor.map <gencc.runtime.CodedExecutor.map>`.

    Yields
    ------
    ndarray, shape out_shape (or the row's exception with ``return_exceptions``)
    """
    end = None if timeout is None else time.monotonic() + check_nonnegative(timeout, "timeout")
    run = _Run(submit, size, pad_to, max_in_flight, early, end, wait_s)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = run.bar = tqdm(desc=desc, unit="input")
    try:
        for value in run.values(inputs):
            if isinstance(value, BaseException) and not return_exceptions:
                raise value
            yield value
    finally:
        if bar is not None:
            bar.close()
        if abandon is not None:
            left = [fut for fut in run.rows_left if not fut.done()]
            if left:
                abandon(left)


class _Run:
    """One call's state. ``pending`` holds, per input in order, an exception (an input that
    failed before it reached a batch) or [batch future, row, early answers]."""

    def __init__(self, submit, size, pad_to, max_in_flight, early, end, wait_s):
        self.submit, self.size, self.pad_to, self.max_in_flight = submit, size, pad_to, max_in_flight
        self.early, self.end, self.wait_s = early, end, wait_s
        self.bar = None
        self.pending: deque = deque()
        self.rows_left: dict = {}  # batch future -> its inputs not yet yielded (len: batches in flight)
        self.finished: dict = {}  # batch future -> its result or exception, once it has ended
        self.ended: set = set()  # batch futures that have ended (added by their done callback: no lock to ask)

    # -- in ----------------------------------------------------------------------------------
    def values(self, inputs):
        size = self.size
        if _real_array(inputs):  # whole chunks: no per-row checks or stacking
            for first in range(0, len(inputs), size):
                stacked = np.array(inputs[first:first + size], dtype=np.float64)  # a copy: inputs may change
                refs = [[None, row, {}] for row in range(len(stacked))]
                self.pending.extend(refs)
                self.flush(stacked, refs, range(first, first + len(stacked)))
                yield from self.drain_ready()
        else:
            chunk, n_chunk, chunk_refs, chunk_index, in_shape = None, 0, [], [], None
            for index, x in enumerate(inputs):
                # fast path: a float64 array of the known shape (finiteness is checked per chunk)
                if not (type(x) is np.ndarray and x.dtype == np.float64 and x.shape == in_shape):
                    try:
                        x, in_shape = check_input(x, index, in_shape)
                    except InvalidInputError as exc:
                        self.pending.append(exc)
                        x = None
                if x is not None:
                    if chunk is None:
                        chunk = np.empty((size, *in_shape))
                    chunk[n_chunk] = x  # the snapshot: the caller may refill x once the generator resumes
                    ref = [None, n_chunk, {}]  # batch future, row, early answers
                    n_chunk += 1
                    chunk_refs.append(ref)
                    chunk_index.append(index)
                    self.pending.append(ref)
                    if n_chunk == size:
                        self.flush(chunk, chunk_refs, chunk_index)
                        chunk, n_chunk, chunk_refs, chunk_index = None, 0, [], []
                yield from self.drain_ready()
            if n_chunk:
                self.flush(chunk[:n_chunk], chunk_refs, chunk_index)
        while self.pending:
            yield from self.drain_run()

    def flush(self, stacked, chunk_refs, indices):
        """Submit ``stacked``, shape (n, *in_shape), the inputs of ``chunk_refs``, whose
        positions in the stream are ``indices`` (a sequence of n ints)."""
        self.ended.intersection_update(self.rows_left)  # forget batches whose every row was yielded
        # finiteness of the inputs that took a fast path, checked for the whole chunk at once
        finite = np.isfinite(stacked.reshape(len(stacked), -1)).all(axis=1)
        refs = chunk_refs
        if not finite.all():
            for i in np.flatnonzero(~finite):
                chunk_refs[i][0] = InvalidInputError(f"input {indices[i]} contains NaN or Inf", index=indices[i])
            stacked = stacked[finite]
            refs = [r for r, ok in zip(chunk_refs, finite) if ok]
        n_real = len(refs)
        if not n_real:
            return
        pad = -(-n_real // self.pad_to) * self.pad_to - n_real
        if pad:
            stacked = np.concatenate([stacked, np.repeat(stacked[-1:], pad, axis=0)])
        early = EarlyRows() if self.early else {}  # row -> output answered before the decode
        fut = self.submit(stacked, early.update_rows if self.early else None)
        if self.early:
            when_done(fut, early.wake)  # the runtime's bookkeeping: in the dispatcher, no thread hop
        when_done(fut, self.ended.add)
        self.rows_left[fut] = n_real
        for row, ref in enumerate(refs):
            ref[0], ref[1] = fut, row
            ref[2] = early

    # -- out ---------------------------------------------------------------------------------
    def outcome(self, fut, ask=False):
        """The batch's result or exception once it has ended, else None; kept, so that the
        rows after the first cost no lock. ``ask`` also asks the future itself (a lock): a
        waiter woken by the future can run before its done callbacks have."""
        if isinstance(fut, BaseException):  # an input failed before it reached a batch
            return fut
        got = self.finished.get(fut)
        if got is None and (fut in self.ended or (ask and fut.done())):
            try:
                got = fut.result(timeout=0)
            except Exception as exc:  # noqa: BLE001 - handed to the rows of this batch
                got = exc
            self.finished[fut] = got
        return got

    def row_done(self, fut, n=1):
        if fut in self.rows_left:
            self.rows_left[fut] -= n
            if not self.rows_left[fut]:
                del self.rows_left[fut]
                self.finished.pop(fut, None)

    def drain_one(self):
        item = self.pending.popleft()
        if self.bar is not None:
            self.bar.update(1)
        if not isinstance(item, list):
            return item
        fut, k, early = item
        got = self.outcome(fut)
        if got is None and k not in early:
            left = None if self.end is None else max(0.0, self.end - time.monotonic())
            wait_s = self.wait_s if left is None else left
            if isinstance(early, EarlyRows):  # the row may be answered before its batch is decoded
                with early.cond:
                    early.cond.wait_for(lambda: k in early or fut.done(), timeout=wait_s)
            else:
                try:
                    fut.exception(timeout=wait_s)
                except (TimeoutError, CancelledError):
                    pass
            got = self.outcome(fut, ask=True)
            if got is None and k not in early:
                self.row_done(fut)
                if self.end is not None:
                    raise TimeoutError("no answer from the executor within the map's timeout")
                return TimeoutError(f"no answer from the executor within {wait_s:g} s")
        self.row_done(fut)
        if k in early:  # answered before its batch was decoded
            return early[k]
        if isinstance(got, ROW_ERRORS):
            return got
        if isinstance(got, BaseException):
            raise got
        try:
            return got.output(k)
        except (MissingOutputsError, ErrorBoundExceededError) as exc:
            return exc

    def drain_run(self):
        """The next answers in order: every consecutive row of a decoded batch at once
        (no per-row locks or calls), else the next one."""
        pending = self.pending
        item = pending[0]
        if isinstance(item, list) and item[0] is not None:
            fut, _, early = item
            got = self.outcome(fut)
            if (got is not None and not isinstance(got, BaseException) and not early
                    and not getattr(got, "missing", ()) and not getattr(got, "refused", ())):
                out, rows = got.outputs, []
                while pending and isinstance(pending[0], list) and pending[0][0] is fut:
                    rows.append(pending.popleft()[1])
                self.row_done(fut, len(rows))
                if self.bar is not None:
                    self.bar.update(len(rows))
                return [out[k] for k in rows]
        return [self.drain_one()]

    def drain_ready(self):
        pending = self.pending
        while pending and (not isinstance(pending[0], list) or (
                pending[0][0] is not None and (pending[0][1] in pending[0][2] or self.outcome(pending[0][0])
                                               is not None or len(self.rows_left) >= self.max_in_flight))):
            yield from self.drain_run()


def _real_array(inputs) -> bool:
    """Whether ``map`` may cut ``inputs`` into batches whole: an ndarray of real numbers with a
    row axis (anything else goes row by row through :func:`check_input`)."""
    return type(inputs) is np.ndarray and inputs.ndim >= 1 and inputs.dtype.kind in "biuf"
