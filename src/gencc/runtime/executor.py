"""CodedExecutor: encode, dispatch to workers, gather, decode.

The executor knows schemes only through their public interface (``encode``,
``decode_with_info``, ``can_decode``, ``is_complete``) and workers only
through a :class:`~gencc.runtime.backends.Backend`. Its dispatcher thread only
moves events: when a batch is decoded or failed is decided by the pure
:func:`~gencc.runtime.gather.decide`.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import Counter, deque
from concurrent.futures import CancelledError, Future
from typing import NamedTuple

import numpy as np

from .._validation import check_batch, check_choice, check_input, check_int, check_nonnegative
from ..errors import (BatchFailedError, ErrorBoundExceededError, InsufficientReturnsError, InvalidInputError,
                      MissingOutputsError)
from ..schemes.base import CodingScheme
from .batch import BatchResult, BatchState
from .events import Task, TaskCancelled, TaskError, WorkerDied, WorkerReady
from .faults import TaskFault
from .gather import (ON_INSUFFICIENT, PLACEMENTS, AdaptiveDeadline, GatherPolicy, GatherState, adaptive_deadline,
                     assign_idle, decide, early_inputs)
from .futures import CallbackFuture, when_done
from .calibrator import BackgroundCalibrator
from .microbatch import decode_stacked, encode_stacked
from .request import RequestFuture
from .stream import ColumnBatcher, RequestBatcher, StreamingExecutor

__all__ = ["CodedExecutor"]

log = logging.getLogger("gencc.runtime")

_AT_MASTER = -1  # BatchState.outstanding's worker for a task waiting at the master (pull placement)


class _WorkerQueue:
    """The tasks a worker was sent and has not yet answered, oldest first.

    ``head_since`` is when the oldest became the worker's current task: the
    hang detector times each task from there, never from the queue's start.
    """

    def __init__(self):
        self.tasks: deque[tuple[int, int]] = deque()  # (batch, slot)
        self.head_since: float | None = None
        self.starting = False  # restarted, still building its model: its tasks are not timed, its start is
        self.starting_since: float | None = None

    def restarting(self, now):
        self.starting, self.starting_since = True, now

    def ready(self, now):
        self.starting, self.starting_since = False, None
        self.head_since = now if self.tasks else None

    def push(self, batch, slot, now):
        if not self.tasks:
            self.head_since = now
        self.tasks.append((batch, slot))

    def ack(self, batch, slot, now):
        if not self.tasks or (batch, slot) not in self.tasks:
            return
        was_head = self.tasks[0] == (batch, slot)
        self.tasks.remove((batch, slot))
        if was_head:
            self.head_since = now if self.tasks else None

    def clear(self):
        tasks = list(self.tasks)
        self.tasks.clear()
        self.head_since = None
        return tasks


class CodedExecutor(StreamingExecutor):
    """Run a model under a coding scheme on N workers, straggler-resilient.

    Parameters
    ----------
    model : callable, torch.nn.Module or str
        A picklable zero-argument factory returning the vectorised f (or a torch
        module, or ``"package.module:factory"``). Each worker builds it once.
    scheme : CodingScheme
        Its ``n_workers`` is the number of workers started.
    backend : {"local", "threads", "ray"} or Backend
        ``"local"``: worker processes on this machine (isolated: a crash or
        hang is killed and restarted). ``"threads"``: worker threads in this
        process, for models that release the GIL (torch); no pickling, no
        pipes, but no isolation (see :class:`~gencc.runtime.backends.threads.ThreadBackend`).
        ``"ray"``: Ray actors (``pip install gencc[ray]``), on loopback unless
        ``address`` is given.
    micro_batch : int
        B, the coded inputs per task: a batch of B*K inputs is encoded into N
        tasks of B coded inputs each, and each worker runs f on a batch of B
        (see :mod:`gencc.runtime.microbatch`). ``map`` and :meth:`submit_one`
        form batches of B*K inputs. Default 1.
    batch_window : float
        Seconds the oldest request given to :meth:`submit_one` waits for its
        micro-batch to fill before a partial batch is padded and dispatched.
    n_wait : int, optional
        Decode as soon as this many usable results are in (default: all N).
        Whatever ``n_wait`` says, a batch is decoded as soon as the scheme
        says more returns cannot help (``scheme.is_complete``: every input
        has a copy under replication or ParM, every systematic worker is in).
    deadline : float or AdaptiveDeadline, optional
        Seconds after dispatch at which to decode with whatever arrived, if
        that is decodable (at least the trusted floor, or ``n_min``). An
        :class:`~gencc.runtime.gather.AdaptiveDeadline` sets it from the
        observed task latencies: ``clip(factor * quantile(recent, q), floor,
        cap)`` (see :func:`~gencc.runtime.gather.adaptive_deadline`).
    early : bool
        Answer an input as soon as the worker that carries it unchanged
        returns (a systematic code's workers 0..K-1, ParM's systematic
        workers, every worker of replication and uncoded), before the batch is
        decoded: :meth:`submit_one` futures and :meth:`map` see it at once;
        the batch's :class:`BatchResult` still holds the whole batch. Default
        True; no effect for a code with no such worker.
    direct_dispatch : bool
        For :meth:`submit_one`: send each worker that carries an input
        unchanged (see ``early``) its task as soon as that input's B rows of
        the batch are in, instead of when the batch closes; the other tasks
        go out when it closes (full, ``batch_window`` expired, or one of its
        early tasks is still out past the ``deadline``: closing then sends
        the parity tasks that can stand in for it; ``stats["early_closes"]``
        counts those). Needs ``early=True`` and such workers (ValueError
        otherwise). Default False.
    column_window : float, optional
        With ``direct_dispatch``: seconds an input's first request waits for
        the other B - 1 rows of its task; then the task goes out with the
        missing rows padded and the next request starts the next input, so
        no request waits up to ``batch_window`` for a partner (a hedged
        request group's window, B / rate, is the like-for-like setting).
        None (default): until the batch closes. :attr:`padded_columns`
        counts the inputs sent partial. ValueError without
        ``direct_dispatch``.
    placement : {"pinned", "pull"}
        Where a task goes. ``"pinned"`` (default): slot n to worker n, sent at
        once and queued there behind the worker's earlier tasks (the lowest
        per-task cost: the transport overlaps the previous task). ``"pull"``:
        held at the master until a worker is idle, then sent, oldest first, to
        its own worker if that one is idle, else to another idle worker
        running the same model (:func:`~gencc.runtime.gather.assign_idle`); a
        task is never queued behind a straggler, and a task still waiting
        when its batch is decoded is never sent. Faults from ``faults``
        follow the worker when they come per task (``faults.task_fault(w)``,
        :class:`~gencc.runtime.faults.WorkerStragglers`), else the slot. The
        deadline then counts from the latest send among the tasks still out,
        as with ``direct_dispatch``.
    n_min : int, optional
        Fewest usable results to decode from. Default: the scheme's own
        ``can_decode``, i.e. ``scheme.trusted_returns`` (K for GCC, LeTCC and
        BACC; the recovery threshold for LCC; one copy for replication, whose
        inputs without a copy fail one by one). Lower it only knowingly: a
        decode from fewer returns is mostly wrong.
    timeout : float
        Hard limit per batch, seconds: past it the batch is decoded from what
        arrived if that is decodable, and otherwise fails (every input gets
        an explicit error).
    on_insufficient : {"fail", "wait", "redispatch"}
        When the batch cannot become decodable by the deadline (or at all):
        fail it at once, keep waiting until ``timeout``, or re-send the
        missing coded inputs to idle workers (once per coded input).
    hang_timeout : float, optional
        A worker busy on one task longer than this is killed and restarted
        (default: ``timeout``). Must be > 0.
    restart_timeout : float, optional
        A restarted worker that has not rebuilt its model within this many
        seconds is killed and started again, and the tasks queued on it are
        erasures (default: ``max(60, hang_timeout)``). Must be > 0.
    max_error : float, optional
        Quality floor, a mean squared error. With a scheme that bounds each
        input's error (GCC, LeTCC: ``Decoded.info["rmse_p90"]``), an input
        whose ``rmse_p90 ** 2`` exceeds it is refused on its own: its request
        gets :class:`~gencc.errors.ErrorBoundExceededError` and the rest of
        the batch is answered (``BatchResult.refused``). With a scheme that
        has only a batch estimate (BACC), a batch whose ``error_estimate``
        exceeds it fails with :class:`~gencc.errors.BatchFailedError`.
        Schemes without an estimate are not affected.
    calibration : dict, optional
        Calibrate the scheme at start-up on sample inputs: ``{"X": (n,
        *in_shape) array, "stragglers": StragglerModel, "rounds": int}``
        (``rounds`` optional). The model is built once in this process and
        ``scheme.calibrate(f, X, stragglers, rounds=...)`` replaces the
        scheme (GCC: a fixed decoder chosen by measured error); the result,
        with its ``calibration_`` table, is ``executor.scheme``.
    self_calibrate : bool or SelfCalibration, default False
        Choose the decoder from live traffic (systematic schemes with decoder
        parameters: GCC, LeTCC). Each decoded batch is handed, off the
        dispatcher, to a :class:`~gencc.schemes.self_calibration.SelfCalibration`
        that drops returned systematic workers in the shape of the stragglers
        it has seen, decodes their exact answers f(x_k) with every candidate
        decoder and switches when one is better with confidence; at most
        ``gencc.runtime.calibrator.CPU_SHARE`` (10%) of one core, batches
        decoded while it is busy are skipped. :meth:`decoder_report` shows
        what it measured and chose. A ``SelfCalibration`` built on this
        ``scheme`` sets the candidates and the switching rule.
    faults : Faults, optional
        Injected stragglers and faults, for experiments.
    max_in_flight : int
        Batches ``map`` keeps in flight.
    backend_options : dict, optional
        Passed to the backend (e.g. ``threads``, ``preload``, ``address`` for Ray).

    Attributes
    ----------
    stats : collections.Counter
        Batches answered and failed, erasures, crashes, hangs, slow_restarts (restarted workers
        not ready within ``restart_timeout``), re-dispatches, ``pulled_elsewhere`` and
        ``never_sent`` (pull placement: tasks run by another worker than their slot's, and
        tasks whose batch was decoded before a worker was free),
        late results, ``"flagged"`` (returned workers a robust decode left
        out as wrong, summed over batches; see ``BatchResult.flagged``) and
        ``"refused_inputs"`` (decoded inputs refused by ``max_error``).
    returned_counts : collections.Counter
        For each answered batch, how many usable results it was decoded from.
    timings : collections.Counter
        Seconds summed over answered batches: ``"encode"`` and ``"decode"``
        (in this process) and ``"compute"`` (reported by the workers for the
        tasks decoded from, f plus any injected delay); ``"batches"`` counts
        them. A profile of the runtime's own cost.

    Notes
    -----
    Without ``direct_dispatch``, every request of a batch waits for the batch
    to close before any task is sent: under light load that is the whole
    ``batch_window``, the larger part of a coded request's latency. A
    systematic worker needs only its own input's rows, so with
    ``direct_dispatch`` a batch is filled input by input (request j of a
    batch is row ``(j % B)*K + j // B``: input ``j // B`` of sub-batch ``j %
    B``), each systematic task leaves as soon as its rows are in, and its
    requests are answered early from it; the parity tasks still wait for the
    close. The batch's clock (deadline, timeout, and the hang timer of an
    early task) starts when it closes; a batch that closes before any input
    is complete is laid out and padded as without the option.

    Futures follow :mod:`concurrent.futures`, with one difference:
    :meth:`submit` dispatches at once, so its future is already running and
    ``cancel()`` returns False (a :meth:`submit_one` request can be cancelled
    while it waits in the batching window). ``shutdown(wait=True,
    cancel_futures=False)`` dispatches the requests still in the window and
    lets every pending batch finish (each is bounded by ``timeout``).
    Done-callbacks run on the executor's callback thread, one after another
    in completion order, never on the dispatcher: a callback may block, call
    ``result()`` on another future or call :meth:`shutdown` without stalling
    or stopping any other batch (:mod:`gencc.runtime.futures`).

    Ownership. The executor copies every input at the moment it accepts it:
    ``submit`` copies X before it returns, ``submit_one`` copies x, and
    ``map`` copies each input into its batch's buffer when it reads it from
    the iterable. The caller may refill or free a buffer as soon as the call
    returns (or the generator resumes). Every output handed back is the
    caller's alone: decoded outputs are new arrays, early and exact answers
    are copies, and the threads backend copies f's output (an f that reuses
    one output buffer changes no answer already given) and f's input (an f
    may modify its input in place: the master's coded batch, kept for
    redispatch, and the caller's array stay as they were). Local worker
    processes get private copies through the pipe or shared memory, Ray
    actors a writable copy of the read-only object. f must not keep
    references to its input across calls and expect them to stay valid.

    Examples
    --------
    >>> import numpy as np, gencc
    >>> from gencc.workloads import WorkloadFactory
    >>> with gencc.CodedExecutor(WorkloadFactory("xsinx"), gencc.GCC(4, 8), n_wait=6) as ex:
    ...     res = ex.submit(np.ones((4, 4))).result(timeout=60)
    >>> res.outputs.shape
    (4, 4)
    """

    def __init__(self, model, scheme, backend="local", *, micro_batch=1, batch_window=0.005, n_wait=None,
                 deadline=None, early=True, n_min=None, timeout=30.0, on_insufficient="fail", hang_timeout=None,
                 restart_timeout=None, max_error=None, calibration=None, faults=None, max_in_flight=4, backend_options=None,
                 direct_dispatch=False, column_window=None, placement="pinned", self_calibrate=False):
        if not isinstance(scheme, CodingScheme):
            raise TypeError(f"scheme must be a coding scheme such as gencc.GCC(n_inputs=4, n_workers=12), "
                            f"got {scheme!r}")
        if calibration is not None:
            scheme = _calibrated(scheme, model, calibration)
        N = scheme.n_workers
        models = [scheme.worker_model(n, model) for n in range(N)]
        odd = [n for n in range(N) if scheme.worker_function(n, _same_model) is not _same_model
               and models[n] is model]
        if odd:
            raise ValueError(f"scheme {type(scheme).__name__} computes another function on workers {odd} but "
                             f"names no model for them (worker_model), so the runtime cannot serve it")
        self.scheme = scheme
        self_calibration = _self_calibration(self_calibrate, scheme)  # checked before any worker starts
        self.n_min = None if n_min is None else check_int(n_min, "n_min")
        if self.n_min is not None and not scheme.min_returns <= self.n_min <= N:
            raise ValueError(f"n_min must be in [{scheme.min_returns}, {N}] (the scheme's minimum returns, "
                             f"n_workers), got {self.n_min}")
        floor = scheme.trusted_returns if self.n_min is None else self.n_min
        self.n_wait = N if n_wait is None else check_int(n_wait, "n_wait")
        if not floor <= self.n_wait <= N:
            raise ValueError(f"n_wait must be in [{floor}, {N}] (n_min, or the scheme's trusted returns "
                             f"{scheme.trusted_returns} unless n_min lowers it; n_workers), got {self.n_wait}")
        self._adaptive = deadline if isinstance(deadline, AdaptiveDeadline) else None
        if self._adaptive is not None:
            self.deadline = adaptive_deadline((), self._adaptive)  # the cold start's
        else:
            self.deadline = None if deadline is None else check_nonnegative(deadline, "deadline")
        self._recent = deque(maxlen=self._adaptive.window if self._adaptive else 1)  # task latencies, s
        self._direct = direct_slots(scheme) if early else {}
        self.direct_dispatch = bool(direct_dispatch)
        if direct_dispatch and not self._direct:
            raise ValueError("direct_dispatch needs early=True and a scheme with workers that carry an input "
                             "unchanged (systematic GCC, LeTCC or BACC, ParM, replication, uncoded), got "
                             f"{type(scheme).__name__} with early={early}")
        self._early_settle: list = []  # (callback, rows, outputs), run outside the lock
        self.timeout = check_nonnegative(timeout, "timeout")
        if self.timeout == 0:
            raise ValueError("timeout must be > 0")
        self.on_insufficient = check_choice(on_insufficient, "on_insufficient", ON_INSUFFICIENT)
        self.placement = check_choice(placement, "placement", PLACEMENTS)
        self._pending: deque[tuple[int, int]] = deque()  # (batch, slot) waiting at the master (pull), oldest first
        self.hang_timeout = self.timeout if hang_timeout is None else check_nonnegative(hang_timeout, "hang_timeout")
        if self.hang_timeout == 0:
            raise ValueError("hang_timeout must be > 0 seconds (0 would restart every busy worker at once)")
        self.restart_timeout = (max(60.0, self.hang_timeout) if restart_timeout is None
                                else check_nonnegative(restart_timeout, "restart_timeout"))
        if self.restart_timeout == 0:
            raise ValueError("restart_timeout must be > 0 seconds (0 would restart every restarted worker at once)")
        self.max_error = None if max_error is None else check_nonnegative(max_error, "max_error")
        self.faults = faults
        self.max_in_flight = check_int(max_in_flight, "max_in_flight")
        self.micro_batch = check_int(micro_batch, "micro_batch")
        self.batch_window = check_nonnegative(batch_window, "batch_window")
        self.column_window = _check_column_window(column_window, self.direct_dispatch)
        self._policy = GatherPolicy(self.deadline, self.timeout, on_insufficient)
        self._models = models  # what each worker runs: a task is re-sent only to a worker running the same
        uniform = all(m is model for m in models)
        self._backend = self._make_backend(backend, model if uniform else models, N, backend_options or {})
        self._backend.start()  # cleans up after itself on failure or interruption
        self._lock = threading.Lock()
        self._shutdown_lock = threading.Lock()
        self._shutdown = False
        self._shut_down = threading.Event()  # set once shutdown has ended every worker
        self._batches: dict[int, BatchState] = {}
        self._counter = itertools.count()
        self._queues = [_WorkerQueue() for _ in range(N)]
        self._out_shape = None
        self._stop = threading.Event()
        self._sealed = False  # set by shutdown, under the lock, once no batch may be added
        self.stats = Counter()
        self.returned_counts = Counter()  # how many usable results each answered batch was decoded from
        self.timings = Counter()  # seconds: encode, decode, compute (workers), over answered batches
        self._calibrator = None if self_calibration is None else BackgroundCalibrator(self_calibration)
        _warm_up(self.scheme)
        self._thread = threading.Thread(target=self._loop, name="gencc-dispatcher", daemon=True)
        self._thread.start()
        self._init_stream()
        if direct_dispatch:
            self._batcher = ColumnBatcher(
                lambda X, on_early=None, opened=None: self._submit_batch(X, closing_ok=True, on_early=on_early,
                                                                         opened=opened),
                self.micro_batch * scheme.n_inputs, scheme.n_inputs, self.batch_window, _DirectDispatch(self),
                column_window=self.column_window, callbacks=self._callbacks)
        else:
            self._batcher = RequestBatcher(lambda X, on_early=None: self._submit_batch(X, closing_ok=True,
                                                                                      on_early=on_early),
                                           self.micro_batch * scheme.n_inputs, scheme.n_inputs, self.batch_window,
                                           early=bool(self._direct), callbacks=self._callbacks)
        log.info("executor started", extra={"backend": self._backend.name, "n_workers": N,
                                            "scheme": type(scheme).__name__})

    @staticmethod
    def _make_backend(backend, model, N, options):
        if isinstance(backend, str) and backend == "local":
            from .backends.local import LocalBackend

            return LocalBackend(model, N, **options)
        if isinstance(backend, str) and backend == "threads":
            from .backends.threads import ThreadBackend

            return ThreadBackend(model, N, **options)
        if isinstance(backend, str) and backend == "ray":
            from .backends.ray import RayBackend

            return RayBackend(model, N, **options)
        if all(hasattr(backend, m) for m in ("start", "submit", "cancel", "poll", "restart", "shutdown")):
            return backend
        raise ValueError(f"backend must be 'local', 'threads', 'ray' or a Backend object, got {backend!r}")

    # -- public API ---------------------------------------------------------
    def submit(self, X) -> Future:
        """Encode one batch of B*K inputs (B <= ``micro_batch``) and dispatch it.

        Parameters
        ----------
        X : array_like, shape (B*K, *in_shape)
            K inputs (B = 1), or B groups of K: input ``b*K + k`` is input k of
            the b-th coded batch; each worker's task holds B coded inputs.

        Returns
        -------
        concurrent.futures.Future
            Resolves to a :class:`BatchResult` whose ``outputs`` has shape
            (B*K, *out_shape), or raises :class:`BatchFailedError`.
        """
        with self._shutdown_lock:
            if self._shutdown:
                raise RuntimeError("cannot submit to an executor that was shut down")
        return self._submit_batch(X, closing_ok=False, copy=True)

    def submit_one(self, x) -> RequestFuture:
        """Submit a single input; it is coded with others in a micro-batch.

        Requests are gathered into batches of up to ``micro_batch * K``: a full
        batch is dispatched at once; a partial one when its oldest request has
        waited ``batch_window`` seconds, padded to a multiple of K (so a lone
        request costs one coded batch of K, not B*K).

        Parameters
        ----------
        x : array_like, shape in_shape
            Every request must have the shape of the first one.

        Returns
        -------
        RequestFuture
            Resolves to f(x)'s estimate, an ndarray of shape out_shape; its
            ``info`` (an :class:`~gencc.runtime.AnswerInfo`, set with the
            result) says whether the answer is exact (its own worker's, a
            replica's) or decoded, the decoder's error estimate, and whether
            the decode had the scheme's trusted number of returns. Raises
            (from ``result()``) :class:`~gencc.errors.InvalidInputError` for an
            input that cannot be computed (NaN, Inf, complex, non-numeric,
            another shape: already failed when returned, and its batch never
            sees it), :class:`BatchFailedError` if its batch failed,
            :class:`~gencc.errors.MissingOutputsError` if no returned worker
            answered it (replication), :class:`~gencc.errors.ErrorBoundExceededError`
            if its decoded error bound is above ``max_error``, or ``CancelledError`` if it was cancelled
            while waiting in the window (``future.cancel()``, or
            ``shutdown(cancel_futures=True)``).

        Raises
        ------
        RuntimeError
            After :meth:`shutdown`.
        """
        with self._shutdown_lock:
            if self._shutdown:
                raise RuntimeError("cannot submit to an executor that was shut down")
        return self._put_request(x)

    def _submit_batch(self, X, *, closing_ok: bool, on_early=None, opened=None, copy=False) -> Future:
        """Encode and dispatch; ``copy`` X first unless it is the executor's own already (the batcher's
        stacked rows, ``map``'s batch buffer); ``closing_ok`` lets shutdown's final flush through;
        ``on_early(rows, outputs, batch)`` is called (dispatcher thread, no lock held)
        with the rows of X answered early, their outputs, shape (len(rows), *out_shape), and the batch's index;
        ``opened``: the (index, plan) taken by :meth:`_open_batch` (direct dispatch)."""
        K = self.scheme.n_inputs
        X2, in_shape = check_batch(X, "X", copy=copy)  # real, finite
        rows = X2.shape[0]
        X = X2.reshape((rows, *in_shape))
        if rows % K or rows // K > self.micro_batch:
            raise ValueError(f"X must have shape (B*K, *in_shape) with K = {K} and 1 <= B <= micro_batch = "
                             f"{self.micro_batch}, got shape {X.shape}")
        B = rows // K
        t0 = time.monotonic()
        coded = encode_stacked(self.scheme, X, B)
        t1 = time.monotonic()
        fut = CallbackFuture(self._callbacks)
        fut.set_running_or_notify_cancel()
        with self._lock:
            if (self._shutdown and not closing_ok) or self._sealed:  # shut down while encoding
                raise RuntimeError("cannot submit to an executor that was shut down")
            index, plan = self._next_batch() if opened is None else opened
            b = BatchState(index, coded, plan, t1, fut, t1 - t0, size=B)
            b.on_early = on_early if self._direct else None
            self._batches[index] = b
            self._place(b, range(self.scheme.n_workers), t1)
        return fut

    # -- direct dispatch (ColumnBatcher): a batch open while its columns go out ----------------
    def _next_batch(self):
        """A new batch's index and fault plan (the lock held)."""
        index = next(self._counter)
        if not self.faults or self._faults_per_worker():
            return index, None
        return index, self.faults.plan(index, self.scheme.n_workers)

    def _open_batch(self):
        """Take a batch index and its fault plan when a batch's first request arrives."""
        with self._lock:
            return self._next_batch()

    def _send_column(self, opened, k, Xk, on_early):
        """Send the direct slot(s) of input k, Xk of shape (B, *in_shape): the batch is
        registered, open (``t0`` None: never decoded or failed by the dispatcher), at its first
        column. Returns the batch's future, or None if no slot carries input k."""
        slots = [s for s, kk in self._direct.items() if kk == k]
        if not slots:
            return None
        index, plan = opened
        with self._lock:
            if self._sealed:
                raise RuntimeError("cannot submit to an executor that was shut down")
            b = self._batches.get(index)
            if b is None:
                fut = CallbackFuture(self._callbacks)
                fut.set_running_or_notify_cancel()
                b = BatchState(index, np.zeros((self.scheme.n_workers, *Xk.shape)), plan, None, fut, 0.0,
                               size=Xk.shape[0])
                b.on_early = on_early
                self._batches[index] = b
            for slot in slots:
                b.coded[slot] = Xk
            self._place(b, slots, time.monotonic(), timed=True)
        return b.future

    def _close_batch(self, opened, X):
        """Encode the whole batch, X of shape (B*K, *in_shape), send the slots not sent
        yet, and start the batch's clock. Returns its future."""
        index, _ = opened
        K = self.scheme.n_inputs
        t0 = time.monotonic()
        try:
            coded = encode_stacked(self.scheme, X, X.shape[0] // K)
        except Exception as exc:
            coded, why = None, f"encode failed: {exc!r}"
        t1 = time.monotonic()
        with self._lock:
            b = self._batches.get(index)
            if b is None:
                raise RuntimeError(f"batch {index} ended before it closed (executor shut down)")
            if coded is None or self._sealed:
                settle = self._fail(b, why if coded is None else "executor shut down")
            else:
                settle = None
                b.coded, b.t0, b.encode_time = coded, t1, t1 - t0
                for q in self._queues:  # an early task's hang timer starts now, with the batch's clock
                    if q.tasks and q.tasks[0][0] == index:
                        q.head_since = t1
                unsent = [s for s in range(self.scheme.n_workers) if s not in b.sent_at and s not in b.outstanding]
                self._place(b, unsent, t1, timed=True)
        if settle is not None:
            _settle([settle])
        return b.future

    def map(self, inputs, *, return_exceptions=False, progress=False, timeout=None):
        """Compute f on every input, coded in batches of B*K, outputs in input order.

        Parameters
        ----------
        inputs : iterable of array_like, each of shape in_shape, or ndarray of shape (n, *in_shape)
            Any number of inputs, in batches of ``micro_batch * K``; the last
            batch is padded to a multiple of K (padding is dropped). A plain
            ndarray of real numbers is cut into batches whole: one copy and one
            vectorised finiteness check per batch, no Python work per row.
            An input that cannot be computed (NaN, Inf, complex, non-numeric,
            a shape unlike the first input's) gets an
            :class:`~gencc.errors.InvalidInputError` of its own and is left out
            of its batch; every other input is answered.
        return_exceptions : bool
            Yield an input's exception in its place instead of raising it.
        progress : bool
            Show a progress bar (counts inputs).
        timeout : float, optional
            Seconds for the whole call, as in :meth:`concurrent.futures.Executor.map`:
            past it, the next result raises :class:`TimeoutError`.

        Yields
        ------
        ndarray, shape out_shape (or an exception with ``return_exceptions``)
        """
        K = self.scheme.n_inputs
        size = self.micro_batch * K
        end = None if timeout is None else time.monotonic() + check_nonnegative(timeout, "timeout")
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(desc="gencc map", unit="input")
        pending: deque = deque()  # per input, in order: an exception, or [batch future (or its
        # InvalidInputError), row, early answers]
        chunk = None  # the next batch's buffer, shape (size, *in_shape): each input is copied in when read
        n_chunk = 0
        chunk_refs: list[list] = []
        chunk_index: list[int] = []
        rows_left: dict = {}  # batch future -> its inputs not yet yielded (len: batches in flight)
        finished: dict = {}  # batch future -> its result or exception, once it has ended
        ended: set = set()  # batch futures that have ended (added by their done callback: no lock to ask)
        in_shape = None

        def flush(stacked, chunk_refs, indices):
            """Submit ``stacked``, shape (n, *in_shape), the inputs of ``chunk_refs``, whose
            positions in the stream are ``indices`` (a sequence of n ints)."""
            ended.intersection_update(rows_left)  # forget batches whose every row was yielded
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
            pad = -(-n_real // K) * K - n_real
            if pad:
                stacked = np.concatenate([stacked, np.repeat(stacked[-1:], pad, axis=0)])
            early = _EarlyRows()  # row -> output answered before the decode (filled by the dispatcher)
            with self._shutdown_lock:
                if self._shutdown:
                    raise RuntimeError("cannot submit to an executor that was shut down")
            fut = self._submit_batch(stacked, closing_ok=False, on_early=early.update_rows)
            when_done(fut, early.wake)  # the runtime's bookkeeping: in the dispatcher, no thread hop
            when_done(fut, ended.add)
            rows_left[fut] = n_real
            for row, ref in enumerate(refs):
                ref[0], ref[1] = fut, row
                ref[2] = early

        def outcome(fut, ask=False):
            """The batch's BatchResult or exception once it has ended, else None; kept, so
            that the rows after the first cost no lock. ``ask`` also asks the future itself
            (a lock): a waiter woken by the future can run before its done callbacks have."""
            if isinstance(fut, BaseException):  # an input failed before it reached a batch
                return fut
            got = finished.get(fut)
            if got is None and (fut in ended or (ask and fut.done())):
                try:
                    got = fut.result(timeout=0)
                except Exception as exc:  # noqa: BLE001 - handed to the rows of this batch
                    got = exc
                finished[fut] = got
            return got

        def row_done(fut):
            if fut in rows_left:
                rows_left[fut] -= 1
                if not rows_left[fut]:
                    del rows_left[fut]
                    finished.pop(fut, None)

        def drain_one():
            item = pending.popleft()
            if bar is not None:
                bar.update(1)
            if not isinstance(item, list):
                return item
            fut, k, early = item
            got = outcome(fut)
            if got is None and k not in early:
                left = None if end is None else max(0.0, end - time.monotonic())
                wait_s = self.timeout + 30.0 if left is None else left
                if isinstance(early, _EarlyRows):  # the row may be answered before its batch is decoded
                    with early.cond:
                        early.cond.wait_for(lambda: k in early or fut.done(), timeout=wait_s)
                else:
                    try:
                        fut.exception(timeout=wait_s)
                    except (TimeoutError, CancelledError):
                        pass
                got = outcome(fut, ask=True)
                if got is None and k not in early:
                    row_done(fut)
                    if end is not None:
                        raise TimeoutError("no answer from the executor within the map's timeout")
                    return TimeoutError(f"no answer from the executor within {wait_s:g} s")
            row_done(fut)
            if k in early:  # answered before its batch was decoded
                return early[k]
            if isinstance(got, (BatchFailedError, MissingOutputsError, InvalidInputError)):
                return got
            if isinstance(got, BaseException):
                raise got
            try:
                return got.output(k)
            except (MissingOutputsError, ErrorBoundExceededError) as exc:
                return exc

        def drain_run():
            """The next answers in order: every consecutive row of a decoded batch at once
            (no per-row locks or calls), else the next one."""
            item = pending[0]
            if isinstance(item, list) and item[0] is not None:
                fut, _, early = item
                got = outcome(fut)
                if isinstance(got, BatchResult) and not early and not got.missing and not got.refused:
                    out, rows = got.outputs, []
                    while pending and isinstance(pending[0], list) and pending[0][0] is fut:
                        rows.append(pending.popleft()[1])
                    rows_left[fut] -= len(rows)
                    if not rows_left[fut]:
                        del rows_left[fut]
                        finished.pop(fut, None)
                    if bar is not None:
                        bar.update(len(rows))
                    return [out[k] for k in rows]
            return [drain_one()]

        def emit(value):
            if isinstance(value, BaseException) and not return_exceptions:
                raise value
            return value

        def drain_ready():
            while pending and (not isinstance(pending[0], list) or (
                    pending[0][0] is not None and (pending[0][1] in pending[0][2] or outcome(pending[0][0])
                                                   is not None or len(rows_left) >= self.max_in_flight))):
                yield from drain_run()

        whole = _real_array(inputs)
        try:
            if whole:  # whole chunks: no per-row checks or stacking
                for first in range(0, len(inputs), size):
                    stacked = np.array(inputs[first:first + size], dtype=np.float64)  # a copy: inputs may change
                    refs = [[None, row, {}] for row in range(len(stacked))]
                    pending.extend(refs)
                    flush(stacked, refs, range(first, first + len(stacked)))
                    for value in drain_ready():
                        yield emit(value)
            for index, x in enumerate(() if whole else inputs):
                # fast path: a float64 array of the known shape (finiteness is checked per chunk)
                if not (type(x) is np.ndarray and x.dtype == np.float64 and x.shape == in_shape):
                    try:
                        x, in_shape = check_input(x, index, in_shape)
                    except InvalidInputError as exc:
                        pending.append(exc)
                        x = None
                if x is not None:
                    if chunk is None:
                        chunk = np.empty((size, *in_shape))
                    chunk[n_chunk] = x  # the snapshot: the caller may refill x once the generator resumes
                    ref = [None, n_chunk, {}]  # batch future, row, early answers
                    n_chunk += 1
                    chunk_refs.append(ref)
                    chunk_index.append(index)
                    pending.append(ref)
                    if n_chunk == size:
                        flush(chunk, chunk_refs, chunk_index)
                        chunk, n_chunk, chunk_refs, chunk_index = None, 0, [], []
                for value in drain_ready():
                    yield emit(value)
            if n_chunk:
                flush(chunk[:n_chunk], chunk_refs, chunk_index)
            while pending:
                for value in drain_run():
                    yield emit(value)
        finally:
            if bar is not None:
                bar.close()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False):
        """Stop the dispatcher and every worker.

        Parameters
        ----------
        wait : bool
            Let pending batches finish first (each within ``timeout``), after
            dispatching the :meth:`submit_one` requests still in the batching
            window. Otherwise those requests are cancelled and pending batches
            fail at once with :class:`BatchFailedError`.
        cancel_futures : bool
            Cancel the requests in the window and fail pending batches at
            once, even with ``wait``.

        Notes
        -----
        Safe from any thread, a future's done-callback included (callbacks
        run on the executor's callback thread, not its dispatcher): every
        pending future is resolved and every worker ended either way. A
        second call returns once the first has ended the workers, except
        from a callback, which returns at once (the first call may be
        waiting for that very callback).
        """
        with self._shutdown_lock:
            first, self._shutdown = not self._shutdown, True
        if not first:  # another thread shuts down: wait for it, unless this is a callback it waits for
            if not self._callbacks.is_current():
                self._shut_down.wait(timeout=_shutdown_bound(self.timeout, self.scheme.n_workers))
            return
        dispatcher = threading.current_thread() is self._thread  # (a backend's code): nothing can end there
        try:
            # requests still in the batching window: dispatched (wait) or cancelled
            self._batcher.close(flush=wait and not cancel_futures)
            if wait and not cancel_futures and not dispatcher:
                with self._lock:
                    futures = [b.future for b in self._batches.values()]
                for fut in futures:  # each ends by its batch timeout, fired by the dispatcher
                    try:
                        fut.exception(timeout=self.timeout + 5.0)
                    except TimeoutError:
                        break
            with self._lock:
                self._sealed = True
            self._stop.set()
            if not dispatcher:
                self._thread.join(timeout=10)
            with self._lock:
                settle = [self._fail(b, "executor shut down") for b in list(self._batches.values())]
            _settle(settle)
        finally:  # whatever failed above, no worker outlives the executor
            try:
                self._backend.shutdown()
            finally:
                if self._calibrator is not None:
                    self._calibrator.close()
                self._callbacks.close()
                self._shut_down.set()
        log.info("executor shut down", extra={"stats": dict(self.stats)})

    # -- dispatcher: moves events, asks `decide` what to do -------------------
    _SWEEP_S = 0.01  # timers (deadline, timeout, hangs) are checked this often; events act at once

    def _loop(self):
        next_sweep = 0.0
        try:
            while not self._stop.is_set():
                try:
                    events = self._backend.poll(self._SWEEP_S if self._batches else 5 * self._SWEEP_S)
                except Exception:  # keep the dispatcher alive; the batch timers still fire
                    log.exception("backend poll failed")
                    events = []
                with self._lock:
                    now = time.monotonic()
                    for ev in events:
                        try:
                            self._handle(ev, now)
                        except Exception:  # one bad event must not stop every batch
                            log.exception("handling an event failed", extra={"event": repr(ev)[:200]})
                    # a full sweep (hang timers, every batch's clock) on a timer or after a worker
                    # came or went; otherwise only the batches these events were about
                    if now >= next_sweep or any(isinstance(ev, (WorkerDied, WorkerReady)) for ev in events):
                        next_sweep = now + self._SWEEP_S
                        self._check_hangs(now)
                        batches = list(self._batches.values())
                    else:
                        touched = dict.fromkeys(getattr(ev, "batch", None) for ev in events)
                        batches = [b for i in touched if (b := self._batches.get(i)) is not None]
                    settle = [s for b in batches if (s := self._step_or_fail(b, now))]
                    if self._pending:  # workers freed by these events, or batches just decoded
                        self._pump(now)
                    early, self._early_settle = self._early_settle, []
                    late = self._late_open_batches(batches, now) if self.direct_dispatch else []
                _settle_early(early)
                _settle(self._run_decodes(settle))
                for index in late:  # outside the lock: the batcher takes its own lock, then ours
                    if self._batcher.close_early(index):
                        self.stats["early_closes"] += 1
        finally:
            if not self._stop.is_set():  # died of something unforeseen: no future may wait for ever
                log.error("dispatcher stopped unexpectedly; failing every pending batch")
                with self._lock:
                    settle = [self._fail(b, "dispatcher stopped unexpectedly") for b in list(self._batches.values())]
                _settle(settle)

    def _step_or_fail(self, b, now):
        try:
            return self._step(b, now)
        except Exception as exc:  # a scheme or backend error fails this batch, not the dispatcher
            log.exception("batch step failed", extra={"batch": b.index})
            reason = f"internal error: {exc!r}"
            try:
                return self._fail(b, reason)
            except Exception:  # failing it cleanly failed too: drop it, its future still gets the error
                self._batches.pop(b.index, None)
                return b.future, BatchFailedError(b.index, b.failed, len(b.results), 0, reason)

    def decoder_report(self, *, wait: float | None = None) -> dict:
        """What self-calibration measured and chose (``self_calibrate=True``).

        Parameters
        ----------
        wait : float, optional
            Seconds to wait first for the batches already handed to the
            scorer (it runs behind the decodes, at its CPU share).

        Returns
        -------
        dict
            :meth:`SelfCalibration.report
            <gencc.schemes.self_calibration.SelfCalibration.report>` (the
            decoder in use, every candidate's geometric-mean MSE over it on
            the measured tests with an interval, the switches made) plus
            ``cpu_share``, ``skipped_batches`` (decoded while the scorer was
            busy) and ``failed_batches``.
        """
        if self._calibrator is None:
            raise RuntimeError("decoder_report needs CodedExecutor(..., self_calibrate=True)")
        if wait:
            self._calibrator.drain(timeout=check_nonnegative(wait, "wait"))
        return self._calibrator.report()

    @property
    def padded_columns(self) -> int:
        """Inputs sent partial, padded, at the ``column_window``'s expiry (direct dispatch)."""
        return getattr(self._batcher, "padded_columns", 0)

    def set_column_window(self, seconds: float | None):
        """Change ``column_window`` (seconds, or None) for the inputs filled from now on."""
        if not self.direct_dispatch:
            raise ValueError("column_window needs direct_dispatch=True")
        self.column_window = self._batcher.column_window = _check_column_window(seconds, self.direct_dispatch)

    def _faults_per_worker(self) -> bool:
        """Under pull placement, faults drawn per task for the worker that runs it."""
        return self.placement == "pull" and hasattr(self.faults, "task_fault")

    def _place(self, b, slots, now, timed=False):
        """Send ``slots`` of batch ``b`` (pinned: slot n to worker n) or queue them at the master and
        send what idle workers can take (pull). ``timed``: record the send times (direct dispatch;
        always under pull)."""
        for slot in slots:
            if self.placement == "pinned":
                if timed:
                    b.sent_at[slot] = now
                self._dispatch(b, slot, slot, b.faults[slot] if b.faults else TaskFault(), now)
            else:
                b.outstanding[slot] = _AT_MASTER
                self._pending.append((b.index, slot))
        if self.placement == "pull":
            self._pump(now)

    def _pump(self, now):
        """Pull placement: send waiting tasks, oldest first, to idle workers (the lock held)."""
        live = []
        for index, slot in self._pending:
            b = self._batches.get(index)
            if b is not None and b.outstanding.get(slot) == _AT_MASTER:
                live.append((b, slot))
            else:
                self.stats["never_sent"] += 1
        idle = [w for w, q in enumerate(self._queues) if not q.tasks and not q.starting]
        sent = set()
        per_worker = self._faults_per_worker()
        for i, w in assign_idle([slot for _, slot in live], idle, lambda s, v: self._models[v] == self._models[s]):
            b, slot = live[i]
            if per_worker:
                fault = self.faults.task_fault(w)
            else:
                fault = b.faults[slot] if b.faults else TaskFault()
            del b.outstanding[slot]
            b.sent_at[slot] = now
            self.stats["pulled_elsewhere"] += w != slot
            self._dispatch(b, slot, w, fault, now)
            sent.add(i)
        self._pending = deque((b.index, slot) for i, (b, slot) in enumerate(live) if i not in sent)

    def _dispatch(self, b, slot, worker, fault, now):
        self._queues[worker].push(b.index, slot, now)
        b.outstanding[slot] = worker
        x, stacked = (b.coded[slot], True) if b.size > 1 else (b.coded[slot][0], False)
        if not self._backend.submit(worker, Task(b.index, slot, x, fault, stacked)):
            self._queues[worker].ack(b.index, slot, now)
            del b.outstanding[slot]
            b.erase(slot, worker, "send failed")

    def _handle(self, ev, now):
        if isinstance(ev, WorkerDied):
            self.stats["crashes"] += 1
            log.warning("worker died; restarting", extra={"worker": ev.worker, "why": ev.why})
            self._restart(ev.worker, ev.why, now)
            return
        if isinstance(ev, WorkerReady):
            self._queues[ev.worker].ready(now)
            return
        self._queues[ev.worker].ack(ev.batch, ev.slot, now)
        if isinstance(ev, TaskCancelled):
            return
        b = self._batches.get(ev.batch)
        if b is None or b.outstanding.get(ev.slot) != ev.worker:
            self.stats["late_results"] += 1
            return
        del b.outstanding[ev.slot]
        if isinstance(ev, TaskError):
            b.erase(ev.slot, ev.worker, f"error: {ev.message}")
            self.stats["erasures"] += 1
            return
        y = ev.output if b.size > 1 else _lifted(ev.output)
        why = _output_problem(y, b.size, self._out_shape)
        if why:
            b.erase(ev.slot, ev.worker, why)
            self.stats["erasures"] += 1
            return
        b.results[ev.slot] = np.asarray(y, dtype=np.float64)
        latency = now - b.sent_at.get(ev.slot, b.t0)  # from the task's own send (direct dispatch)
        b.latencies[ev.slot] = latency
        b.compute_seconds[ev.slot] = ev.seconds
        b.answered_by[ev.slot] = ev.worker
        if self._adaptive is not None:
            self._recent.append(latency)
            if len(self._recent) % 8 == 0:  # the quantile, not on every result
                self.deadline = adaptive_deadline(self._recent, self._adaptive)
                self._policy = GatherPolicy(self.deadline, self.timeout, self.on_insufficient)
        if b.on_early is not None and ev.slot in self._direct:
            for k in early_inputs([ev.slot], self._direct, b.early_done):
                b.early_done.add(k)
                rows = [r * self.scheme.n_inputs + k for r in range(b.size)]
                self._early_settle.append((b.on_early, rows, b.results[ev.slot], b.index))

    def _restart(self, w, why, now):
        """Erase the worker's unfinished tasks and replace it: only the executor restarts workers."""
        self._lose_worker(w, why, now)
        self._queues[w].restarting(now)
        try:
            self._backend.restart(w)
        except Exception:  # the worker stays lost; its tasks are erasures
            log.exception("restarting a worker failed", extra={"worker": w})

    def _lose_worker(self, w, why, now):
        for batch, slot in self._queues[w].clear():
            b = self._batches.get(batch)
            if b is not None and b.outstanding.get(slot) == w:
                del b.outstanding[slot]
                b.erase(slot, w, why)
                self.stats["erasures"] += 1

    def _check_hangs(self, now):
        for w, q in enumerate(self._queues):
            if q.starting and now - q.starting_since > self.restart_timeout:
                self.stats["slow_restarts"] += 1
                log.warning("restarted worker not ready; restarting again", extra={"worker": w})
                self._restart(w, f"not ready {self.restart_timeout:g} s after a restart", now)
            elif not q.starting and q.head_since is not None and now - q.head_since > self.hang_timeout \
                    and not self._open_head(q):
                self.stats["hangs"] += 1
                log.warning("worker hung; restarting", extra={"worker": w})
                self._restart(w, f"hung > {self.hang_timeout:g} s", now)

    def _late_open_batches(self, batches, now) -> list[int]:
        """Open batches (direct dispatch) with an early task still out past the deadline:
        closing them now sends the parity tasks that can stand in for it."""
        if self.deadline is None:
            return []
        return [b.index for b in batches if b.t0 is None
                and any(now - b.sent_at[s] > self.deadline for s in b.outstanding if s in b.sent_at)]

    def _open_head(self, q) -> bool:
        """Whether the worker's current task belongs to an open batch (not timed until it closes)."""
        b = self._batches.get(q.tasks[0][0]) if q.tasks else None
        return b is not None and b.t0 is None

    def _decodable(self, slots) -> bool:
        if self.n_min is not None:
            return len(slots) >= self.n_min
        return self.scheme.can_decode(slots)

    def _covers(self, slots, outstanding) -> bool:
        """Whether a decode from ``slots`` answers every input the outstanding tasks could answer."""
        if not slots or not outstanding:
            return True
        now, later = self.scheme.available(slots), self.scheme.available(sorted(set(slots) | set(outstanding)))
        return bool(np.all(now | ~later))

    def _step(self, b, now):
        """Measure the batch, ask the policy, act; returns (future, value) to settle, if any."""
        if b.t0 is None:  # open (direct dispatch): its clock starts when it closes
            return None
        usable = b.usable(self._out_shape)
        slots = sorted(usable)
        redispatching = self.on_insufficient == "redispatch"
        missing = b.missing_slots(self.scheme.n_workers) if redispatching else []
        decodable = self._decodable(slots)
        state = GatherState(
            elapsed=now - b.t0,
            enough=len(slots) >= self.n_wait or self.scheme.is_complete(slots),
            decodable=decodable,
            reachable=self._decodable(slots + list(b.outstanding)),
            outstanding=len(b.outstanding),
            can_redispatch=any(self._helpers(b, s) for s in missing),
            covers=not decodable or self._covers(slots, b.outstanding),  # only read of a decodable set
            # direct dispatch: the deadline counts from the latest send among the tasks still out
            waited=(now - max(b.sent_at.get(s, b.t0) for s in b.outstanding)
                    if b.sent_at and b.outstanding else None),
        )
        action = decide(state, self._policy)
        if action.kind == "decode":
            return self._begin_decode(b, usable)
        if action.kind == "fail":
            return self._fail(b, action.reason)
        if action.kind == "redispatch":
            self._redispatch(b, missing, now)
        return None

    def _helpers(self, b, slot):
        """Workers to re-send ``slot`` to (running the model it needs): those that
        answered this batch, fastest first, then idle ones."""
        same = {w for w in range(self.scheme.n_workers) if self._models[w] == self._models[slot]}
        fastest = sorted(b.latencies, key=b.latencies.get)
        answered = list(dict.fromkeys(b.answered_by[s] for s in fastest if b.answered_by[s] in same))
        idle = [w for w in sorted(same) if not self._queues[w].tasks and w not in answered]
        return [w for w in answered if not self._queues[w].tasks] + idle or answered

    def _redispatch(self, b, missing, now):
        for i, slot in enumerate(missing):
            helpers = self._helpers(b, slot)
            if not helpers:
                continue
            w = helpers[i % len(helpers)]
            b.redispatched.add(slot)
            b.failed.pop(slot, None)
            self.stats["redispatched"] += 1
            self._dispatch(b, slot, w, TaskFault(), now)

    def _retire(self, b):
        del self._batches[b.index]
        for w in set(b.outstanding.values()) - {_AT_MASTER}:  # ask workers to drop what still runs
            self._backend.cancel(w, b.index)
        b.coded = None

    def _begin_decode(self, b, usable) -> _DecodeJob:
        """Retire the batch and take what its decode needs (the lock held); the decode itself
        runs outside the lock (:meth:`_run_decodes`), so that submitters, event handling on
        other batches' futures and readers of the stats never wait for a slow decode."""
        slots = np.array(sorted(usable), dtype=np.int64)
        for s in set(b.results) - set(usable):
            b.erase(s, s, f"wrong shape {b.results[s].shape}")
        self._retire(b)
        decoder = self.scheme if self._calibrator is None else self._calibrator.decoder
        return _DecodeJob(b, slots, [usable[s] for s in slots], decoder)

    def _run_decodes(self, settle) -> list:
        """Carry out the decode jobs among ``settle`` (no lock held), then count them (the lock
        held once); returns every (future, value) to settle."""
        if not any(isinstance(item, _DecodeJob) for item in settle):
            return settle
        done = {i: self._decode_or_why(job) for i, job in enumerate(settle) if isinstance(job, _DecodeJob)}
        with self._lock:
            return [self._account(item, done[i]) if i in done else item for i, item in enumerate(settle)]

    def _decode_or_why(self, job) -> BatchResult | str:
        try:
            return self._decode(job)
        except Exception as exc:  # a scheme's bug fails this batch, not the dispatcher
            log.exception("decode failed", extra={"batch": job.batch.index})
            return f"internal error: {exc!r}"

    def _decode(self, job) -> BatchResult | str:
        """Decode one retired batch (no lock held): its result, or why it failed."""
        b, slots = job.batch, job.slots
        t0 = time.monotonic()
        Y = np.stack(job.outputs)  # (|F|, B, *out_shape)
        try:
            outputs, missing, info, est = decode_stacked(job.decoder, Y, slots, b.size)
        except (InsufficientReturnsError, ValueError, np.linalg.LinAlgError) as exc:
            return f"decode failed: {exc}"
        rmse, p90 = info.get("rmse"), info.get("rmse_p90")
        refused = ()
        if self.max_error is not None:
            if p90 is not None:  # per input: refuse only those whose own bound is too high
                refused = tuple(int(k) for k in np.flatnonzero(~(np.asarray(p90) ** 2 <= self.max_error)))
                if refused:
                    outputs = outputs.copy()
                    outputs[list(refused)] = np.nan
            elif est is not None and not est <= self.max_error:
                return f"decoder's error estimate {est:.3g} above max_error {self.max_error:g}"
        flagged = tuple(int(s) for s in info.get("flagged", ()))
        res = BatchResult(
            batch=b.index, outputs=outputs, missing=missing, returned=tuple(int(s) for s in slots),
            failed=dict(b.failed), latencies={int(s): b.latencies[s] for s in slots},
            compute_seconds={int(s): b.compute_seconds[s] for s in slots}, micro_batch=b.size,
            wall_time=time.monotonic() - b.t0 + b.encode_time, encode_time=b.encode_time,
            decode_time=time.monotonic() - t0, error_estimate=None if est is None else float(est),
            decode_info=info, flagged=flagged, trusted=len(slots) - len(flagged) >= self.scheme.trusted_returns,
            rmse=None if rmse is None else np.asarray(rmse, dtype=np.float64),
            rmse_p90=None if p90 is None else np.asarray(p90, dtype=np.float64), refused=refused,
            max_error=self.max_error,
        )
        if self._calibrator is not None and not res.flagged:  # scored off the dispatcher, at a bounded share
            self._calibrator.offer(Y, slots)
        return res

    def _account(self, job, res):
        """Count a decode's outcome (the lock held); returns the (future, value) to settle."""
        b, slots = job.batch, job.slots
        if isinstance(res, str):
            return self._failure(b, res)
        if self._out_shape is None:
            self._out_shape = job.outputs[0].shape[1:]
        self.stats["batches"] += 1
        self.stats["refused_inputs"] += len(res.refused)
        if res.flagged:
            self.stats["flagged"] += len(res.flagged)
        self.returned_counts[len(slots)] += 1
        self.timings["batches"] += 1
        self.timings["encode"] += res.encode_time
        self.timings["decode"] += res.decode_time
        self.timings["compute"] += sum(res.compute_seconds.values())
        log.debug("batch decoded", extra={"batch": b.index, "returned": len(slots), "failed": len(b.failed)})
        return b.future, res

    def _fail(self, b, reason):
        self._retire(b)
        return self._failure(b, reason)

    def _failure(self, b, reason):
        """The failure of a retired batch (the lock held)."""
        self.stats["failed_batches"] += 1
        n_required = self.n_min if self.n_min is not None else self.scheme.trusted_returns
        err = BatchFailedError(b.index, b.failed, len(b.usable(self._out_shape)), n_required, reason)
        log.warning("batch failed", extra={"batch": b.index, "reason": reason})
        return b.future, err


class _DecodeJob(NamedTuple):
    """A retired batch to decode outside the lock: its returned slots (sorted), their outputs,
    each of shape (B, *out_shape), and the decoder in use when it was retired."""

    batch: BatchState
    slots: np.ndarray
    outputs: list
    decoder: object


def _self_calibration(self_calibrate, scheme):
    """None, or the SelfCalibration that ``self_calibrate`` asks for (True, or a ready one)."""
    from ..schemes.self_calibration import SelfCalibration

    if self_calibrate is False or self_calibrate is None:
        return None
    if self_calibrate is True:
        self_calibrate = SelfCalibration(scheme)
    elif not isinstance(self_calibrate, SelfCalibration):
        raise TypeError(f"self_calibrate must be True, False or a SelfCalibration, got {self_calibrate!r}")
    elif self_calibrate.candidates[0] is not scheme:
        raise ValueError("self_calibrate's SelfCalibration must be built on the executor's own scheme")
    return self_calibrate


def _shutdown_bound(timeout: float, n_workers: int) -> float:
    """Seconds a shutdown can take at most: the batcher's and dispatcher's joins (10 s each),
    the pending batches' ``timeout`` (+5 s), and the backend's stop (5 s, then 2 s a worker)."""
    return timeout + 35.0 + 2.0 * n_workers


def _check_column_window(seconds, direct_dispatch: bool) -> float | None:
    """``column_window`` checked: None, or seconds >= 0 under direct dispatch."""
    if seconds is None:
        return None
    if not direct_dispatch:
        raise ValueError("column_window needs direct_dispatch=True (it times an input's task, which "
                         "only direct dispatch sends before its batch closes)")
    return check_nonnegative(seconds, "column_window")


def _warm_up(scheme):
    """Decode a batch of zeros once, before the dispatcher starts.

    The first decode of a process loads (or, on a fresh install, compiles:
    about 20 s of CPU) the numba kernels of the fast solvers; on the
    dispatcher thread that stall would look like hung workers and expired
    deadlines."""
    idx = np.arange(scheme.n_workers - scheme.trusted_returns, scheme.n_workers)
    try:
        if scheme.can_decode(idx):
            scheme.decode(np.zeros((idx.size, 1)), idx)
    except Exception:  # a scheme that cannot decode zeros still serves; its first decode pays instead
        log.debug("decoder warm-up failed", exc_info=True)


def _calibrated(scheme, model, calibration):
    """``scheme.calibrate`` on the calibration inputs, with f built here once."""
    from .backends.worker import build_model

    if not hasattr(scheme, "calibrate"):
        raise TypeError(f"calibration needs a scheme with a calibrate method (GCC), got {type(scheme).__name__}")
    if not isinstance(calibration, dict) or not {"X", "stragglers"} <= set(calibration) or \
            not set(calibration) <= {"X", "stragglers", "rounds", "seed", "grid"}:
        raise ValueError("calibration must be a dict with keys 'X' and 'stragglers' (and optionally 'rounds', "
                         f"'seed', 'grid'), got {calibration!r:.200}")
    opts = {k: v for k, v in calibration.items() if k not in ("X", "stragglers")}
    return scheme.calibrate(build_model(model), calibration["X"], calibration["stragglers"], **opts)


def _real_array(inputs) -> bool:
    """Whether ``map`` may cut ``inputs`` into batches whole: an ndarray of real numbers with a
    row axis (anything else goes row by row through :func:`check_input`)."""
    return type(inputs) is np.ndarray and inputs.ndim >= 1 and inputs.dtype.kind in "biuf"


def _same_model(X):  # a marker: which workers would run something other than the model
    raise NotImplementedError


def direct_slots(scheme) -> dict[int, int]:
    """Slot -> the input it carries unchanged: every worker of replication and
    uncoded, workers 0..K-1 of a systematic code (GCC, LeTCC, BACC with
    ``worker_points="systematic"``, ParM); empty otherwise."""
    assignment = getattr(scheme, "assignment", None)
    if assignment is not None:
        return {n: int(k) for n, k in enumerate(assignment)}
    if getattr(scheme, "systematic", False):
        return {k: k for k in range(scheme.n_inputs)}
    return {}


class _DirectDispatch:
    """The executor's side of a :class:`~gencc.runtime.stream.ColumnBatcher`."""

    def __init__(self, ex):
        self.open, self.send, self.close = ex._open_batch, ex._send_column, ex._close_batch


class _EarlyRows(dict):
    """Row -> output answered early, for :meth:`CodedExecutor.map`; ``cond`` wakes the
    caller waiting for a row when the row or its whole batch is answered."""

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


def _settle_early(items):
    """Run the early-answer callbacks (the caller's code) outside the lock; one failing stops no other."""
    for callback, rows, outputs, batch in items:
        try:
            callback(rows, outputs, batch)
        except Exception:
            log.exception("an early-answer callback failed")


def _settle(pairs):
    """Resolve futures outside the executor's lock (their callbacks are the caller's code)."""
    for fut, value in pairs:
        if isinstance(value, BaseException):
            fut.set_exception(value)
        else:
            fut.set_result(value)


def _lifted(y):
    """A single coded input's output as a batch of one (left as is if not numeric)."""
    try:
        return np.asarray(y, dtype=np.float64)[None]
    except (TypeError, ValueError):
        return y


def _output_problem(y, size, out_shape) -> str | None:
    """Why a worker's output on a task of ``size`` coded inputs is an erasure,
    or None if it is usable (shape (size, *out_shape); out_shape once known)."""
    try:
        arr = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError):
        return f"non-numeric output ({type(y).__name__})"
    if not np.all(np.isfinite(arr)):
        return "nan/inf output"
    if arr.ndim == 0 or arr.shape[0] != size:
        return f"wrong shape {arr.shape}, expected ({size}, ...): one output per coded input"
    if out_shape is not None and arr.shape[1:] != out_shape:
        return f"wrong shape {arr.shape}, expected {(size, *out_shape)}"
    return None
