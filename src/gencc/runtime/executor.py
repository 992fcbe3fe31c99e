"""CodedExecutor: encode, dispatch to workers, gather, decode.

The executor is a facade: it checks options, encodes, and runs a dispatcher
thread that only moves events. What a batch's events mean is the
thread-free :class:`~gencc.runtime.coordinator.Coordinator`'s: fed an event
and the clock, it answers with instructions (send, cancel, restart, decode,
resolve), which the dispatcher carries out: the sends under its lock, the
decodes and every caller's callback after releasing it. Workers are reached
only through a :class:`~gencc.runtime.backends.Backend`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, deque
from concurrent.futures import Future

import numpy as np

from .._validation import check_batch, check_nonnegative
from ..schemes.base import CodingScheme
from .calibrator import BackgroundCalibrator
from .coordinator import AnswerEarly, Cancel, CloseEarly, Coordinator, Decode, Resolve, Restart, Send, SendFailed
from .decoding import decode_batch
from .events import WorkerDied, WorkerReady
from .futures import CallbackFuture
from .gather import AdaptiveDeadline
from .microbatch import encode_stacked
from .options import check_column_window, executor_options
from .ordered_map import ordered_map
from .request import RequestFuture
from .direct import ColumnBatcher
from .stream import RequestBatcher
from .streaming import StreamingExecutor

__all__ = ["CodedExecutor"]

log = logging.getLogger("gencc.runtime")

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
        running the same model (:func:`~gencc.runtime.placement.assign_idle`); a
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
        whose ``rmse_p90 ** 2`` exceeds it (or that has no bound, ``inf``) is refused on its own: its request
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
        o = executor_options(scheme, n_min=n_min, n_wait=n_wait, deadline=deadline, timeout=timeout,
                             on_insufficient=on_insufficient, placement=placement, hang_timeout=hang_timeout,
                             restart_timeout=restart_timeout, max_error=max_error, max_in_flight=max_in_flight,
                             micro_batch=micro_batch, batch_window=batch_window, direct_dispatch=direct_dispatch,
                             column_window=column_window)
        self.n_min, self.n_wait, self.direct_dispatch, self.timeout = o.n_min, o.n_wait, o.direct_dispatch, o.timeout
        self.on_insufficient, self.placement = o.on_insufficient, o.placement
        self.hang_timeout, self.restart_timeout, self.max_error = o.hang_timeout, o.restart_timeout, o.max_error
        self.faults = faults
        self.max_in_flight, self.micro_batch, self.batch_window = o.max_in_flight, o.micro_batch, o.batch_window
        self.column_window = o.column_window
        adaptive, deadline = o.adaptive, o.deadline
        self._calibrator = None if self_calibration is None else BackgroundCalibrator(self_calibration)
        self._coord = Coordinator(
            scheme, models, n_wait=self.n_wait, n_min=self.n_min, deadline=deadline,
            adaptive=adaptive, timeout=self.timeout, on_insufficient=self.on_insufficient, placement=self.placement,
            hang_timeout=self.hang_timeout, restart_timeout=self.restart_timeout, faults=faults, early=early,
            direct_dispatch=self.direct_dispatch,
            decoder=None if self._calibrator is None else (lambda: self._calibrator.decoder))
        if direct_dispatch and not self._coord.direct:
            raise ValueError("direct_dispatch needs early=True and a scheme with workers that carry an input "
                             "unchanged (systematic GCC, LeTCC or BACC, ParM, replication, uncoded), got "
                             f"{type(scheme).__name__} with early={early}")
        uniform = all(m is model for m in models)
        self._backend = self._make_backend(backend, model if uniform else models, N, backend_options or {})
        self._backend.start()  # cleans up after itself on failure or interruption
        self._lock = threading.Lock()
        self._shutdown_lock = threading.Lock()
        self._shutdown = False
        self._shut_down = threading.Event()  # set once shutdown has ended every worker
        self._stop = threading.Event()
        self._abandoned: deque = deque()  # futures of map's batches to drop (see _abandon)
        self._sealed = False  # set by shutdown, under the lock, once no batch may be added
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
                                           early=bool(self._coord.direct), callbacks=self._callbacks)
        log.info("executor started", extra={"backend": self._backend.name, "n_workers": N,
                                            "scheme": type(scheme).__name__})

    @property
    def stats(self) -> Counter:
        return self._coord.stats

    @property
    def returned_counts(self) -> Counter:
        return self._coord.returned_counts

    @property
    def timings(self) -> Counter:
        return self._coord.timings

    @property
    def deadline(self) -> float | None:
        """The deadline in force, seconds (an :class:`AdaptiveDeadline`'s latest estimate)."""
        return self._coord.deadline

    @property
    def deadline_rule(self) -> AdaptiveDeadline | None:
        """The :class:`AdaptiveDeadline` that sets :attr:`deadline`, if one was given."""
        return self._coord.adaptive

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
            self._send(self._coord.add_batch(coded, fut, t1, opened=opened, encode_time=t1 - t0, on_early=on_early),
                       t1)
        return fut

    # -- direct dispatch (ColumnBatcher): a batch open while its columns go out ----------------
    def _open_batch(self):
        """Take a batch index and its fault plan when a batch's first request arrives."""
        with self._lock:
            return self._coord.next_batch()

    def _send_column(self, opened, k, Xk, on_early):
        """Send the direct slot(s) of input k, Xk of shape (B, *in_shape), of the open batch
        ``opened``. Returns the batch's future, or None if no slot carries input k."""
        if k not in self._coord.direct.values():
            return None
        with self._lock:
            if self._sealed:
                raise RuntimeError("cannot submit to an executor that was shut down")
            fut = self._coord.future_of(opened[0])
            if fut is None:
                fut = CallbackFuture(self._callbacks)
                fut.set_running_or_notify_cancel()
            now = time.monotonic()
            self._send(self._coord.open_column(opened, k, Xk, fut, on_early, now), now)
        return fut

    def _close_batch(self, opened, X):
        """Encode the whole batch, X of shape (B*K, *in_shape), send the slots not sent
        yet, and start the batch's clock. Returns its future."""
        index, _ = opened
        K = self.scheme.n_inputs
        t0 = time.monotonic()
        coded, why = None, None
        try:
            coded = encode_stacked(self.scheme, X, X.shape[0] // K)
        except Exception as exc:
            why = f"encode failed: {exc!r}"
        t1 = time.monotonic()
        with self._lock:
            fut = self._coord.future_of(index)
            why = why or ("executor shut down" if self._sealed else None)
            rest = self._send(self._coord.close_batch(index, coded, t1, encode_time=t1 - t0, why=why), t1)
        self._finish(rest)
        return fut

    def map(self, inputs, *, return_exceptions=False, progress=False, timeout=None):
        """Compute f on every input, coded in batches of B*K, outputs in input order.

        Parameters
        ----------
        inputs : iterable of array_like, each of shape in_shape, or ndarray of shape (n, *in_shape)
            Any number of inputs, read as they are needed, in batches of
            ``micro_batch * K``; the last batch is padded to a multiple of K
            (padding is dropped). A plain ndarray of real numbers is cut into
            batches whole: one copy and one vectorised finiteness check per
            batch, no Python work per row. An input that cannot be computed
            (NaN, Inf, complex, non-numeric, a shape unlike the first input's)
            gets an :class:`~gencc.errors.InvalidInputError` of its own and is
            left out of its batch; every other input is answered.
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

        Notes
        -----
        At most ``max_in_flight`` batches are submitted and not yet yielded
        (a bounded lookahead: the next inputs are read only as the first
        answers are taken). When the caller stops iterating (``break``,
        ``close()``, or an input's error raised), the batches still in flight
        are abandoned: their workers are told to drop them and
        ``stats["abandoned_batches"]`` counts them. Built on the same batch
        submit as :meth:`submit` (:func:`~gencc.runtime.ordered_map.ordered_map`,
        shared with :meth:`HedgedExecutor.map <gencc.runtime.HedgedExecutor.map>`).
        """
        K = self.scheme.n_inputs
        return ordered_map(self._map_submit, inputs, size=self.micro_batch * K, pad_to=K,
                           max_in_flight=self.max_in_flight, early=bool(self._coord.direct), abandon=self._abandon,
                           wait_s=self.timeout + 30.0, return_exceptions=return_exceptions, progress=progress,
                           timeout=timeout)

    def _map_submit(self, X, on_early):
        """One of ``map``'s batches: X is its own buffer (no copy)."""
        with self._shutdown_lock:
            if self._shutdown:
                raise RuntimeError("cannot submit to an executor that was shut down")
        return self._submit_batch(X, closing_ok=False, on_early=on_early)

    def _abandon(self, futures):
        """Drop the batches of ``futures`` still in flight (``map``'s caller stopped iterating):
        the dispatcher's next turn tells their workers to cancel them and fails the futures.
        Only queued here: a generator may be finalised by the garbage collector on a thread that
        holds the executor's lock."""
        self._abandoned.extend(futures)

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
                    futures = [b.future for b in self._coord.batches.values()]
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
                rest = self._send(self._coord.fail_all("executor shut down"), time.monotonic())
            self._finish(rest)
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
                    events = self._backend.poll(self._SWEEP_S if self._coord.batches else 5 * self._SWEEP_S)
                except Exception:  # keep the dispatcher alive; the batch timers still fire
                    log.exception("backend poll failed")
                    events = []
                now = time.monotonic()
                # a full sweep (hang timers, every batch's clock) on a timer or after a worker
                # came or went; otherwise only the batches these events were about
                sweep = now >= next_sweep or any(isinstance(ev, (WorkerDied, WorkerReady)) for ev in events)
                if sweep:
                    next_sweep = now + self._SWEEP_S
                self._turn(events, now, sweep=sweep)
        finally:
            if not self._stop.is_set():  # died of something unforeseen: no future may wait for ever
                log.error("dispatcher stopped unexpectedly; failing every pending batch")
                with self._lock:
                    rest = self._send(self._coord.fail_all("dispatcher stopped unexpectedly"), time.monotonic())
                self._finish(rest)

    def _turn(self, events, now, *, sweep=True):
        """One round of the dispatcher at time ``now``: the coordinator handles ``events`` and
        acts on the clock (every batch with ``sweep``, else those the events were about); the
        sends are carried out under the lock, the rest after it."""
        with self._lock:
            todo = []
            if self._abandoned:  # map's batches nobody waits for (deque pops are atomic)
                futures = [self._abandoned.popleft() for _ in range(len(self._abandoned))]
                todo += self._coord.abandon(futures, "abandoned: the map's caller stopped iterating")
            for ev in events:
                try:
                    todo += self._coord.handle(ev, now)
                except Exception:  # one bad event must not stop every batch
                    log.exception("handling an event failed", extra={"event": repr(ev)[:200]})
            todo += self._coord.advance(now, None if sweep else [getattr(ev, "batch", None) for ev in events])
            rest = self._send(todo, now)
        self._finish(rest)

    def _send(self, instructions, now) -> list:
        """Carry out the coordinator's Send, Cancel and Restart (the lock held: the order of the
        sends is the workers' queues'); returns the other instructions, for :meth:`_finish`."""
        rest = []
        for ins in instructions:  # a backend call that raises costs its own instruction, never the rest
            kind = type(ins)
            if kind is Send:
                try:
                    sent = self._backend.submit(ins.worker, ins.task)
                except Exception:
                    log.exception("sending a task failed", extra={"worker": ins.worker, "batch": ins.task.batch})
                    sent = False
                if not sent:
                    self._coord.handle(SendFailed(ins.worker, ins.task.batch, ins.task.slot), now)
            elif kind is Cancel:
                try:
                    self._backend.cancel(ins.worker, ins.batch)
                except Exception:  # the worker finishes the task; its result is a late one
                    log.exception("cancelling a task failed", extra={"worker": ins.worker, "batch": ins.batch})
            elif kind is Restart:
                try:
                    self._backend.restart(ins.worker)
                except Exception:  # the worker stays lost; its tasks are erasures
                    log.exception("restarting a worker failed", extra={"worker": ins.worker})
            else:
                rest.append(ins)
        return rest

    def _finish(self, instructions):
        """Carry out the rest with no lock held: early answers (the caller's callbacks), then the
        decodes (counted under the lock once) and the futures they and the failures resolve,
        then the early closes (the batcher takes its own lock, then ours)."""
        if not instructions:
            return
        resolve = []
        for ins in instructions:
            if type(ins) is AnswerEarly:
                try:
                    ins.callback(ins.rows, ins.outputs, ins.batch)
                except Exception:
                    log.exception("an early-answer callback failed")
            elif type(ins) is Decode or type(ins) is Resolve:
                resolve.append(ins)
        observe = None if self._calibrator is None else self._calibrator.offer  # scored off the dispatcher
        done = {i: decode_batch(job, self.max_error, observe) for i, job in enumerate(resolve) if type(job) is Decode}
        if done:
            with self._lock:
                resolve = [self._coord.decoded(job, done[i]) if i in done else job for i, job in enumerate(resolve)]
        _settle(resolve)
        for ins in instructions:
            if type(ins) is CloseEarly and self._batcher.close_early(ins.batch):
                with self._lock:
                    self.stats["early_closes"] += 1

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
        self.column_window = self._batcher.column_window = check_column_window(seconds, self.direct_dispatch)


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


def _same_model(X):  # a marker: which workers would run something other than the model
    raise NotImplementedError


class _DirectDispatch:
    """The executor's side of a :class:`~gencc.runtime.direct.ColumnBatcher`."""

    def __init__(self, ex):
        self.open, self.send, self.close = ex._open_batch, ex._send_column, ex._close_batch


def _settle(pairs):
    """Resolve futures outside the executor's lock (their callbacks are the caller's code)."""
    for fut, value in pairs:
        if isinstance(value, BaseException):
            fut.set_exception(value)
        else:
            fut.set_result(value)
