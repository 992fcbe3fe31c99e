"""Hedged requests: the uncoded baseline practitioners reach for first.

Dean and Barroso, "The Tail at Scale" (CACM 2013): each request goes to one
worker; if it is not back after the hedge delay (by default the p95 of the
latencies observed so far), a backup copy goes to another worker, idle or
least loaded, and the first answer wins; the other copy is cancelled. The
workers beyond what the load needs are the spare capacity the backups use.

:class:`HedgedExecutor` runs on the same backends as
:class:`~gencc.runtime.CodedExecutor` (``"local"``, ``"threads"``, ``"ray"``,
or a Backend object) with the same straggler injection, and serves the same
``submit_one`` / ``map`` interface, so the load benchmark treats both alike.
When a copy goes is decided by the pure :func:`~gencc.runtime.gather.hedge_due`,
where it goes by :func:`~gencc.runtime.gather.pick_worker`, and the adaptive
delay by :func:`~gencc.runtime.gather.adaptive_deadline`.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import Counter, deque
from concurrent.futures import Future
from dataclasses import dataclass, field

import numpy as np

from .._validation import check_batch, check_choice, check_int, check_nonnegative
from ..errors import BatchFailedError
from .events import Task, TaskCancelled, TaskError, WorkerDied, WorkerReady
from .faults import TaskFault
from .gather import AdaptiveDeadline, adaptive_deadline, hedge_due
from .placement import PLACEMENTS, pick_worker
from .futures import CallbackFuture
from .ordered_map import ordered_map
from .request import EXACT, AnswerInfo, RequestFuture
from .stream import RequestBatcher
from .streaming import StreamingExecutor

__all__ = ["HedgedExecutor", "HedgedResult"]

log = logging.getLogger("gencc.runtime")


@dataclass
class HedgedResult:
    """One request group's answer.

    Attributes
    ----------
    outputs : ndarray, shape (B, *out_shape)
    worker : int
        The worker whose copy won.
    copy : int
        Which copy won: 0 the primary, 1 the first backup.
    copies : int
        Copies sent.
    wall_time : float
        Seconds from the first dispatch to the answer.
    """

    outputs: np.ndarray
    worker: int
    copy: int
    copies: int
    wall_time: float

    def output(self, i: int) -> np.ndarray:
        return self.outputs[i]

    def answer_info(self, i: int) -> AnswerInfo:
        """Every hedged answer is f computed on the input itself."""
        return EXACT


@dataclass
class _Request:
    index: int
    x: np.ndarray
    future: Future
    t0: float
    sent0: float | None = None  # when its first copy went (later than t0 if it waited for a worker)
    holders: dict = field(default_factory=dict)  # worker -> copy number, for copies still running
    copies: int = 0
    tried: set = field(default_factory=set)  # workers that were sent a copy
    errors: list = field(default_factory=list)


class HedgedExecutor(StreamingExecutor):
    """Serve f uncoded on ``n_workers`` workers with hedged requests.

    Parameters
    ----------
    model : callable or str
        A picklable zero-argument factory returning the vectorised f, as for
        :class:`~gencc.runtime.CodedExecutor`.
    n_workers : int
        Workers started; primaries and backups share them.
    backend : {"local", "threads", "ray"} or Backend
    micro_batch : int
        Requests per task: :meth:`submit_one` groups up to this many (within
        ``batch_window``) and sends the group to one worker. Default 1.
    batch_window : float
        Seconds the oldest request waits for its group to fill.
    hedge_delay : float or AdaptiveDeadline, optional
        Seconds after which a request not yet answered gets a backup copy.
        Default: adaptive, the p95 of the last 512 observed task latencies
        (``AdaptiveDeadline(q=0.95, factor=1.0, floor=0.0, cap=timeout)``,
        no hedging until 20 are observed).
    max_copies : int
        Copies per request, the primary included (2: one backup).
    timeout : float
        Seconds after which a request with no answer fails with
        :class:`~gencc.errors.BatchFailedError`.
    faults : object, optional
        Injected stragglers: ``faults.task_fault(worker)`` gives each task's
        :class:`TaskFault` (see :class:`~gencc.runtime.faults.WorkerStragglers`).
    backend_options : dict, optional
    placement : {"pinned", "pull"}
        ``"pinned"`` (default): a copy goes at once to an idle worker or, if
        none is, to the least-loaded one, and queues there. ``"pull"``: a copy
        goes only to an idle worker, and waits at the master (oldest request
        first) until one is; a request is failed only at ``timeout``. Either
        way the hedge delay counts from the first copy's send.
    max_in_flight : int, optional
        Groups ``map`` keeps submitted and not yet yielded (default
        ``2 * n_workers``: every worker busy with one and the next queued).

    Attributes
    ----------
    stats : collections.Counter
        ``requests`` (groups), ``answered``, ``failed``, ``hedged`` (backups
        sent), ``backup_won``, ``cancelled`` (losing copies cancelled),
        ``late_results`` (losers that finished anyway), ``abandoned`` (groups
        still pending when ``map``'s caller stopped iterating).
    """

    _SWEEP_S = 0.002

    def __init__(self, model, n_workers, backend="local", *, micro_batch=1, batch_window=0.005, hedge_delay=None,
                 max_copies=2, timeout=30.0, faults=None, backend_options=None, placement="pinned", max_in_flight=None):
        from .executor import CodedExecutor

        self.n_workers = check_int(n_workers, "n_workers")
        self.micro_batch = check_int(micro_batch, "micro_batch")
        self.batch_window = check_nonnegative(batch_window, "batch_window")
        self.max_copies = check_int(max_copies, "max_copies")
        if self.max_copies > self.n_workers:
            raise ValueError(f"max_copies must be <= n_workers = {self.n_workers}, got {self.max_copies}")
        self.timeout = check_nonnegative(timeout, "timeout")
        if self.timeout == 0:
            raise ValueError("timeout must be > 0")
        if hedge_delay is None:
            hedge_delay = AdaptiveDeadline(q=0.95, factor=1.0, floor=0.0, cap=self.timeout)
        if isinstance(hedge_delay, AdaptiveDeadline):
            self._rule = hedge_delay
            self.hedge_delay = adaptive_deadline((), hedge_delay)  # the cold start's
        else:
            self._rule = None
            self.hedge_delay = check_nonnegative(hedge_delay, "hedge_delay")
        self.faults = faults
        self.max_in_flight = 2 * self.n_workers if max_in_flight is None else check_int(max_in_flight, "max_in_flight")
        self.placement = check_choice(placement, "placement", PLACEMENTS)
        self._recent = deque(maxlen=self._rule.window if self._rule else 1)
        self._backend = CodedExecutor._make_backend(backend, model, self.n_workers, backend_options or {})
        self._backend.start()
        self._loads = [0] * self.n_workers  # tasks held by each worker; -1 while restarting
        self._lock = threading.Lock()
        self._reqs: dict[int, _Request] = {}
        self._counter = itertools.count()
        self._closing = False  # shutdown began: no new request (the window's still go out)
        self._shutdown = False  # the window flushed: nothing more is sent
        self._stop = threading.Event()
        self._abandoned: deque = deque()  # futures of map's groups to drop (see _abandon)
        self.stats = Counter()
        self._thread = threading.Thread(target=self._loop, name="gencc-hedged", daemon=True)
        self._thread.start()
        self._init_stream()
        self._batcher = RequestBatcher(lambda X: self._submit(X, copy=False), self.micro_batch, 1,
                                       self.batch_window, callbacks=self._callbacks)
        self._shut_down = threading.Event()  # set once shutdown has ended every worker

    # -- public API -----------------------------------------------------------
    def submit(self, X) -> Future:
        """Send a group of 1..``micro_batch`` inputs, shape (B, *in_shape), to one worker, hedged.

        Returns
        -------
        concurrent.futures.Future
            Resolves to a :class:`HedgedResult`, or raises :class:`BatchFailedError`.
        """
        with self._lock:
            if self._closing:
                raise RuntimeError("cannot submit to an executor that was shut down")
        return self._submit(X, copy=True)

    def _submit(self, X, copy: bool) -> Future:
        """:meth:`submit`; ``copy`` X unless it is the executor's own (the batcher's stacked rows)."""
        X2, in_shape = check_batch(X, "X", copy=copy)  # real, finite, at least one row
        X = X2.reshape((X2.shape[0], *in_shape))
        if not 1 <= X.shape[0] <= self.micro_batch:
            raise ValueError(f"X must have shape (B, *in_shape) with 1 <= B <= micro_batch = {self.micro_batch}, "
                             f"got shape {X.shape}")
        fut = CallbackFuture(self._callbacks)
        fut.set_running_or_notify_cancel()
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot submit to an executor that was shut down")
            req = _Request(next(self._counter), X, fut, time.monotonic())
            self._reqs[req.index] = req
            self.stats["requests"] += 1
            if not self._send_copy(req, req.t0) and self.placement == "pinned":
                self._reqs.pop(req.index)
                fut.set_exception(BatchFailedError(req.index, {}, 0, 1, "no worker could take it"))
        return fut

    def submit_one(self, x) -> RequestFuture:
        """Submit one input; it is grouped with others under ``batch_window``.

        Returns
        -------
        RequestFuture
            Resolves to f(x), shape out_shape (``info``: exact, from one of
            its copies). Raises (from ``result()``)
            :class:`~gencc.errors.InvalidInputError` for an input that cannot
            be computed (NaN, Inf, complex, non-numeric, another shape than the
            first request's: already failed when returned, never sent), or
            :class:`BatchFailedError` if no copy of its group answered in time.

        Raises
        ------
        RuntimeError
            After :meth:`shutdown`.
        """
        with self._lock:
            if self._closing:
                raise RuntimeError("cannot submit to an executor that was shut down")
        return self._put_request(x)

    def map(self, inputs, *, return_exceptions=False, progress=False, timeout=None):
        """f on every input, in order, in groups of ``micro_batch``, hedged.

        The same function as :meth:`CodedExecutor.map <gencc.runtime.CodedExecutor.map>`
        (:func:`~gencc.runtime.ordered_map.ordered_map`): inputs read as they
        are needed, at most ``max_in_flight`` groups submitted and not yet
        yielded, an invalid input failed on its own, and the groups still in
        flight abandoned (their copies cancelled) when the caller stops
        iterating. An input that fails (invalid, or its group failed) raises
        its error when reached, or, with ``return_exceptions``, yields it in
        its place.
        """
        return ordered_map(self._map_submit, inputs, size=self.micro_batch, max_in_flight=self.max_in_flight,
                           abandon=self._abandon, wait_s=self.timeout + 30.0, return_exceptions=return_exceptions,
                           progress=progress, timeout=timeout, desc="gencc hedged map")

    def _map_submit(self, X, _on_early):
        with self._lock:
            if self._closing:
                raise RuntimeError("cannot submit to an executor that was shut down")
        return self._submit(X, copy=False)

    def _abandon(self, futures):
        """Drop the groups of ``futures`` still pending (``map``'s caller stopped): the dispatcher's
        next sweep cancels their copies (queued here, as for the coded executor's)."""
        self._abandoned.extend(futures)

    def _drop_abandoned(self):
        """The groups ``_abandon`` queued, ended (the lock held)."""
        wanted = {self._abandoned.popleft() for _ in range(len(self._abandoned))}
        out = []
        for req in [r for r in self._reqs.values() if r.future in wanted]:
            out += self._end(req, BatchFailedError(req.index, {}, 0, 1, "abandoned: the map's caller stopped "
                                                                       "iterating"), "abandoned")
        return out

    def shutdown(self, wait: bool = True):
        """Stop: dispatch the requests in the window (``wait``), let pending ones end (each within
        ``timeout``), then stop the workers; what is still pending fails.

        Safe from any thread, a future's done-callback included (callbacks run on the executor's
        callback thread); a second call returns once the first has ended the workers (from a
        callback: at once, as the first may be waiting for it)."""
        with self._lock:
            first, self._closing = not self._closing, True
        if not first:
            if not self._callbacks.is_current():
                from .executor import _shutdown_bound

                self._shut_down.wait(timeout=_shutdown_bound(self.timeout, self.n_workers))
            return
        dispatcher = threading.current_thread() is self._thread
        try:
            self._batcher.close(flush=wait)
            with self._lock:
                self._shutdown = True
                futs = [r.future for r in self._reqs.values()]
            if wait and not dispatcher:
                for f in futs:
                    try:
                        f.exception(timeout=self.timeout + 5.0)
                    except TimeoutError:
                        break
            self._stop.set()
            if not dispatcher:
                self._thread.join(timeout=10)
            with self._lock:
                left = list(self._reqs.values())
                self._reqs.clear()
            for r in left:
                if not r.future.done():
                    r.future.set_exception(BatchFailedError(r.index, {}, 0, 1, "executor shut down"))
        finally:  # whatever failed above, no worker outlives the executor
            try:
                self._backend.shutdown()
            finally:
                self._callbacks.close()
                self._shut_down.set()

    # -- dispatcher -------------------------------------------------------------
    def _send_copy(self, req, now) -> bool:
        loads = self._loads
        if self.placement == "pull":  # only idle workers (a busy one counts as unable to take it)
            loads = [load if load == 0 else -1 for load in loads]
        w = pick_worker(loads, exclude=req.tried)  # a worker that has not had it yet
        if w is None:
            w = pick_worker(loads, exclude=req.holders)
        if w is None:
            return False
        fault = self.faults.task_fault(w) if self.faults is not None else TaskFault()
        copy = req.copies
        if not self._backend.submit(w, Task(req.index, copy, req.x, fault, True)):
            return False
        req.holders[w] = copy
        req.tried.add(w)
        req.copies += 1
        if req.sent0 is None:
            req.sent0 = now
        self._loads[w] += 1
        if copy:
            self.stats["hedged"] += 1
        return True

    def _loop(self):
        while not self._stop.is_set():
            try:
                events = self._backend.poll(self._SWEEP_S)
            except Exception:
                log.exception("backend poll failed")
                events = []
            settle = []
            with self._lock:
                now = time.monotonic()
                if self._abandoned:
                    settle.extend(self._drop_abandoned())
                for ev in events:
                    try:
                        settle.extend(self._handle(ev, now))
                    except Exception:
                        log.exception("handling an event failed")
                for req in list(self._reqs.values()):
                    settle.extend(self._sweep(req, now))
            for fut, value in settle:
                if fut.done():
                    continue
                if isinstance(value, BaseException):
                    fut.set_exception(value)
                else:
                    fut.set_result(value)

    def _sweep(self, req, now):
        elapsed = now - req.t0
        if elapsed >= self.timeout:
            return self._end(req, BatchFailedError(req.index, {}, 0, 1, f"timed out after {self.timeout:g} s"))
        since_sent = 0.0 if req.sent0 is None else now - req.sent0
        if hedge_due(since_sent, self.hedge_delay, req.copies, self.max_copies):
            if not self._send_copy(req, now) and not req.holders and self.placement == "pinned":
                return self._end(req, BatchFailedError(req.index, {}, 0, 1, "no worker could take it"))
        return []

    def _end(self, req, value, outcome=None):
        self._reqs.pop(req.index, None)
        for w in req.holders:  # the losers
            self._backend.cancel(w, req.index)
            self.stats["cancelled"] += 1
        req.holders.clear()
        self.stats[outcome or ("failed" if isinstance(value, BaseException) else "answered")] += 1
        return [(req.future, value)]

    def _handle(self, ev, now):
        if isinstance(ev, WorkerReady):
            self._loads[ev.worker] = 0
            return []
        if isinstance(ev, WorkerDied):
            self._loads[ev.worker] = -1
            out = []
            for req in list(self._reqs.values()):
                if req.holders.pop(ev.worker, None) is not None:
                    req.errors.append(f"worker {ev.worker} died: {ev.why}")
                    out.extend(self._after_loss(req, now))
            try:
                self._backend.restart(ev.worker)
            except Exception:
                log.exception("restarting a worker failed")
            return out
        if self._loads[ev.worker] > 0:
            self._loads[ev.worker] -= 1
        req = self._reqs.get(ev.batch)
        if isinstance(ev, TaskCancelled):
            return []
        if req is None or ev.worker not in req.holders:
            self.stats["late_results"] += 1
            return []
        copy = req.holders.pop(ev.worker)
        if isinstance(ev, TaskError):
            req.errors.append(f"worker {ev.worker}: {ev.message}")
            return self._after_loss(req, now)
        y = np.asarray(ev.output, dtype=np.float64)
        if y.ndim == 0 or y.shape[0] != req.x.shape[0] or not np.all(np.isfinite(y)):
            req.errors.append(f"worker {ev.worker}: unusable output of shape {y.shape}")
            return self._after_loss(req, now)
        if self._rule is not None:
            self._recent.append(now - req.sent0)
            if len(self._recent) % 8 == 0:
                self.hedge_delay = adaptive_deadline(self._recent, self._rule)
        self.stats["backup_won"] += copy > 0
        return self._end(req, HedgedResult(y, ev.worker, copy, req.copies, now - req.t0))

    def _after_loss(self, req, now):
        """A copy was lost: send another at once if allowed, fail when none is left."""
        if req.holders:
            return []
        if req.copies < self.max_copies and (self._send_copy(req, now) or self.placement == "pull"):
            return []  # sent, or (pull) waits for an idle worker
        return self._end(req, BatchFailedError(req.index, {}, 0, 1, "; ".join(req.errors) or "every copy lost"))
