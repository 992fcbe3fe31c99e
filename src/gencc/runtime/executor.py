"""CodedExecutor: encode, dispatch to workers, gather the fastest, decode.

The executor knows schemes only through their public interface (``encode``,
``decode_with_info``, ``min_returns``) and workers only through a backend.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import Counter
from concurrent.futures import Future
from dataclasses import dataclass, field

import numpy as np

from .._validation import check_int, check_nonnegative
from ..errors import InsufficientReturnsError, MissingOutputsError
from .faults import Faults, TaskFault

__all__ = ["CodedExecutor", "BatchResult", "BatchFailedError"]

log = logging.getLogger("gencc.runtime")
_POLICIES = ("fail", "wait", "redispatch")


class BatchFailedError(RuntimeError):
    """A batch could not be decoded.

    Attributes
    ----------
    batch : int
        The batch index (submission order).
    failed : dict of int -> str
        Worker index -> why its result is missing.
    n_returned, n_required : int
    """

    def __init__(self, batch, failed, n_returned, n_required, reason):
        detail = ", ".join(f"{w}: {why}" for w, why in sorted(failed.items())) or "none"
        super().__init__(
            f"batch {batch} failed ({reason}): {n_returned} usable results, {n_required} needed; "
            f"failed workers: {detail}"
        )
        self.batch, self.failed = batch, dict(failed)
        self.n_returned, self.n_required = n_returned, n_required


@dataclass
class BatchResult:
    """The decoded outputs of one batch and how they were obtained.

    Attributes
    ----------
    batch : int
    outputs : ndarray, shape (K, *out_shape)
        Rows listed in ``missing`` are NaN and must not be used: :meth:`output`
        raises for them.
    missing : tuple of int
        Inputs no returned worker answered (replication/uncoded only).
    returned : tuple of int
        Workers whose results were decoded.
    failed : dict of int -> str
        Workers treated as erasures, with the reason (crash, hang, error, nan,
        wrong shape). Workers merely too late are in neither.
    latencies : dict of int -> float
        Seconds from dispatch to arrival, per returned worker.
    wall_time, encode_time, decode_time : float
        Seconds.
    error_estimate : float or None
        The decoder's own MSE estimate (GCC's leave-one-out error).
    decode_info : dict
    """

    batch: int
    outputs: np.ndarray
    missing: tuple = ()
    returned: tuple = ()
    failed: dict = field(default_factory=dict)
    latencies: dict = field(default_factory=dict)
    wall_time: float = 0.0
    encode_time: float = 0.0
    decode_time: float = 0.0
    error_estimate: float | None = None
    decode_info: dict = field(default_factory=dict, repr=False)

    def output(self, k: int) -> np.ndarray:
        """Output of input k, or MissingOutputsError if it has none."""
        if k in self.missing:
            raise MissingOutputsError(f"batch {self.batch}: input {k} has no answer",
                                      missing=np.array([k]), partial=None,
                                      n_returned=len(self.returned), n_required=0)
        return self.outputs[k]


class _Batch:
    def __init__(self, index, coded, faults, t0, future, encode_time):
        self.index = index
        self.coded = coded
        self.faults = faults
        self.t0 = t0
        self.future = future
        self.encode_time = encode_time
        self.results: dict[int, np.ndarray] = {}  # slot -> output
        self.latencies: dict[int, float] = {}
        self.failed: dict[int, str] = {}
        self.outstanding: dict[int, int] = {}  # slot -> worker computing it
        self.redispatched: set[int] = set()


class CodedExecutor:
    """Run a model under a coding scheme on N workers, straggler-resilient.

    Parameters
    ----------
    model : callable, torch.nn.Module or str
        A picklable zero-argument factory returning the vectorised f (or a torch
        module, or ``"package.module:factory"``). Each worker builds it once.
    scheme : CodingScheme
        Its ``n_workers`` is the number of workers started.
    backend : {"local", "ray"} or backend object
        ``"local"``: worker processes on this machine. ``"ray"``: Ray actors
        (``pip install gencc[ray]``).
    n_wait : int, optional
        Decode as soon as this many usable results are in (default: all N).
        Replication decodes as soon as every input has a copy.
    deadline : float, optional
        Seconds after dispatch at which to decode with whatever arrived, if at
        least ``n_min`` results are in.
    n_min : int, optional
        Fewest results to decode from at the deadline (default: the scheme's minimum).
    timeout : float
        Hard limit per batch, seconds: past it the batch fails (every input gets
        an explicit error).
    on_insufficient : {"fail", "wait", "redispatch"}
        What to do when fewer than ``n_min`` usable results can arrive by the
        deadline (or at all): fail the batch at once, keep waiting until
        ``timeout``, or re-send the missing coded inputs to workers that already
        answered (once per coded input) and keep waiting.
    hang_timeout : float, optional
        A worker busy on one task longer than this is killed and restarted
        (default: ``timeout``).
    faults : Faults, optional
        Injected stragglers and faults, for experiments.
    max_in_flight : int
        Batches ``map`` keeps in flight.
    backend_options : dict, optional
        Passed to the backend (e.g. ``threads``, ``preload``, ``address`` for Ray).

    Examples
    --------
    >>> import numpy as np, gencc
    >>> from gencc.workloads import WorkloadFactory
    >>> with gencc.CodedExecutor(WorkloadFactory("xsinx"), gencc.GCC(4, 8), n_wait=6) as ex:
    ...     res = ex.submit(np.ones((4, 4))).result(timeout=60)
    >>> res.outputs.shape
    (4, 4)
    """

    def __init__(self, model, scheme, backend="local", *, n_wait=None, deadline=None, n_min=None,
                 timeout=30.0, on_insufficient="fail", hang_timeout=None, faults=None, max_in_flight=4,
                 backend_options=None):
        N = scheme.n_workers
        self.scheme = scheme
        self.n_wait = N if n_wait is None else check_int(n_wait, "n_wait")
        if self.n_wait > N:
            raise ValueError(f"n_wait must be <= n_workers = {N}, got {self.n_wait}")
        self.n_min = scheme.min_returns if n_min is None else check_int(n_min, "n_min")
        if self.n_min > N:
            raise ValueError(f"n_min must be <= n_workers = {N}, got {self.n_min}")
        if self.n_wait < scheme.min_returns:
            raise ValueError(f"n_wait must be >= the scheme's minimum returns {scheme.min_returns}, got {self.n_wait}")
        if deadline is not None:
            deadline = check_nonnegative(deadline, "deadline")
        self.deadline = deadline
        self.timeout = check_nonnegative(timeout, "timeout")
        if self.timeout == 0:
            raise ValueError("timeout must be > 0")
        if on_insufficient not in _POLICIES:
            raise ValueError(f"on_insufficient must be one of {_POLICIES}, got {on_insufficient!r}")
        self.on_insufficient = on_insufficient
        self.hang_timeout = self.timeout if hang_timeout is None else check_nonnegative(hang_timeout, "hang_timeout")
        self.faults = faults
        self.max_in_flight = check_int(max_in_flight, "max_in_flight")
        self._replicated = hasattr(scheme, "available")
        self._backend = self._make_backend(backend, model, N, backend_options or {})
        self._backend.start()
        self._lock = threading.RLock()
        self._batches: dict[int, _Batch] = {}
        self._counter = itertools.count()
        self._queues = [[] for _ in range(N)]  # per worker: outstanding (batch, slot), in order
        self._busy_since = [None] * N
        self._out_shape = None
        self._closed = False
        self._stop = threading.Event()
        self.stats = Counter()
        self._thread = threading.Thread(target=self._loop, name="gencc-dispatcher", daemon=True)
        self._thread.start()
        log.info("executor started", extra={"backend": self._backend.name, "n_workers": N,
                                            "scheme": type(scheme).__name__})

    @staticmethod
    def _make_backend(backend, model, N, options):
        if backend == "local":
            from .local import LocalBackend

            return LocalBackend(model, N, **options)
        if backend == "ray":
            from .ray_backend import RayBackend

            return RayBackend(model, N, **options)
        if hasattr(backend, "submit") and hasattr(backend, "poll"):
            return backend
        raise ValueError(f"backend must be 'local', 'ray' or a backend object, got {backend!r}")

    # -- public API ---------------------------------------------------------
    def submit(self, X) -> Future:
        """Encode one batch of K inputs and dispatch it.

        Parameters
        ----------
        X : array_like, shape (K, *in_shape)

        Returns
        -------
        concurrent.futures.Future
            Resolves to a :class:`BatchResult`, or raises :class:`BatchFailedError`.
        """
        if self._closed:
            raise RuntimeError("cannot submit to an executor that was shut down")
        t0 = time.monotonic()
        coded = self.scheme.encode(X)
        t1 = time.monotonic()
        fut: Future = Future()
        fut.set_running_or_notify_cancel()
        with self._lock:
            index = next(self._counter)
            plan = self.faults.plan(index, self.scheme.n_workers) if self.faults else None
            b = _Batch(index, coded, plan, t1, fut, t1 - t0)
            self._batches[index] = b
            for slot in range(self.scheme.n_workers):
                self._dispatch(b, slot, slot, plan[slot] if plan else TaskFault())
        return fut

    def map(self, inputs, *, return_exceptions=False, progress=False, timeout=None):
        """Compute f on every input, coded in batches of K, outputs in input order.

        Parameters
        ----------
        inputs : iterable of array_like, each of shape in_shape
            Any number of inputs; the last batch is padded (padding is dropped).
        return_exceptions : bool
            Yield an input's exception instead of raising it.
        progress : bool
            Show a progress bar (counts inputs).
        timeout : float, optional
            Seconds to wait for each batch beyond the executor's own timeout.

        Yields
        ------
        ndarray, shape out_shape (or an exception with ``return_exceptions``)
        """
        K = self.scheme.n_inputs
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(desc="gencc map", unit="input")
        wait_s = self.timeout + 30.0 if timeout is None else timeout
        pending: list[tuple[Future, int]] = []

        def drain_one():
            fut, n_real = pending.pop(0)
            try:
                res = fut.result(timeout=wait_s)
                for k in range(n_real):
                    try:
                        yield res.output(k)
                    except MissingOutputsError as exc:
                        if not return_exceptions:
                            raise
                        yield exc
            except (BatchFailedError, TimeoutError) as exc:
                if not return_exceptions:
                    raise
                for _ in range(n_real):
                    yield exc
            if bar is not None:
                bar.update(n_real)

        it = iter(inputs)
        try:
            while True:
                chunk = list(itertools.islice(it, K))
                if not chunk:
                    break
                n_real = len(chunk)
                chunk += [chunk[-1]] * (K - n_real)
                pending.append((self.submit(np.stack([np.asarray(x, dtype=np.float64) for x in chunk])), n_real))
                while len(pending) >= self.max_in_flight:
                    yield from drain_one()
            while pending:
                yield from drain_one()
        finally:
            if bar is not None:
                bar.close()

    def shutdown(self, wait: bool = True, cancel_futures: bool = True):
        """Stop the dispatcher and every worker. Pending batches fail explicitly."""
        if self._closed:
            return
        self._closed = True
        if wait and not cancel_futures:
            end = time.monotonic() + self.timeout
            while self._batches and time.monotonic() < end:
                time.sleep(0.01)
        self._stop.set()
        self._thread.join(timeout=10)
        with self._lock:
            for b in list(self._batches.values()):
                self._fail(b, "executor shut down")
        self._backend.shutdown()
        log.info("executor shut down", extra={"stats": dict(self.stats)})

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()

    @property
    def backend(self):
        return self._backend

    # -- dispatcher ---------------------------------------------------------
    def _dispatch(self, b, slot, worker, fault):
        if not self._queues[worker]:
            self._busy_since[worker] = time.monotonic()
        self._queues[worker].append((b.index, slot))
        b.outstanding[slot] = worker
        if not self._backend.submit(worker, b.index, slot, b.coded[slot], fault):
            self._erase(b, slot, worker, "send failed")

    def _loop(self):
        while not self._stop.is_set():
            try:
                events = self._backend.poll(0.02)
            except Exception:  # keep the dispatcher alive; the batch timers still fire
                log.exception("backend poll failed")
                events = []
            with self._lock:
                for ev in events:
                    self._handle(ev)
                self._check_timers()

    def _handle(self, ev):
        kind = ev[0]
        if kind in ("result", "error"):
            _, w, batch, slot, payload, secs = ev
            self._task_done(w, batch, slot)
            b = self._batches.get(batch)
            if b is None or slot not in b.outstanding:
                self.stats["late_results"] += 1
                return
            del b.outstanding[slot]
            if kind == "error":
                self._erase(b, slot, w, f"error: {payload}")
            else:
                y = np.asarray(payload, dtype=np.float64)
                if not np.all(np.isfinite(y)):
                    self._erase(b, slot, w, "nan/inf output")
                elif self._out_shape is not None and y.shape != self._out_shape:
                    self._erase(b, slot, w, f"wrong shape {y.shape}, expected {self._out_shape}")
                else:
                    b.results[slot] = y
                    b.latencies[slot] = time.monotonic() - b.t0
            self._maybe_finish(b)
        elif kind == "died":
            _, w, code = ev
            self.stats["crashes"] += 1
            log.warning("worker died", extra={"worker": w, "exitcode": code})
            self._lose_worker(w, f"crashed (exit code {code})")

    def _task_done(self, w, batch, slot):
        q = self._queues[w]
        if (batch, slot) in q:
            q.remove((batch, slot))
        self._busy_since[w] = time.monotonic() if q else None

    def _lose_worker(self, w, why):
        for batch, slot in self._queues[w]:
            b = self._batches.get(batch)
            if b is not None and b.outstanding.get(slot) == w:
                del b.outstanding[slot]
                self._erase(b, slot, w, why)
        self._queues[w] = []
        self._busy_since[w] = None
        for b in list(self._batches.values()):
            self._maybe_finish(b)

    def _erase(self, b, slot, w, why):
        b.failed[slot] = why if w == slot else f"{why} (re-run on worker {w})"
        self.stats["erasures"] += 1

    def _check_timers(self):
        now = time.monotonic()
        for w, since in enumerate(self._busy_since):
            if since is not None and now - since > self.hang_timeout:
                self.stats["hangs"] += 1
                log.warning("worker hung; restarting", extra={"worker": w})
                self._backend.restart(w)
                self._lose_worker(w, f"hung > {self.hang_timeout:g} s")
        for b in list(self._batches.values()):
            self._maybe_finish(b, now)

    def _usable(self, b):
        if len(b.results) < 2 or self._out_shape is not None:
            return b.results
        # before any batch fixed the output shape, the modal shape wins
        shape = Counter(y.shape for y in b.results.values()).most_common(1)[0][0]
        for slot, y in list(b.results.items()):
            if y.shape != shape:
                del b.results[slot]
                self._erase(b, slot, slot, f"wrong shape {y.shape}, expected {shape}")
        return b.results

    def _maybe_finish(self, b, now=None):
        if b.index not in self._batches:
            return
        now = time.monotonic() if now is None else now
        elapsed = now - b.t0
        got = len(b.results)
        all_in = not b.outstanding
        if self._replicated:
            covered = self.scheme.available(list(b.results)).all() if got else False
            ready = covered or all_in or (self.deadline is not None and elapsed >= self.deadline and got >= 1)
        else:
            ready = got >= self.n_wait or (got >= self.n_min and (all_in or (
                self.deadline is not None and elapsed >= self.deadline)))
        if ready:
            self._decode(b)
            return
        if elapsed >= self.timeout:
            self._fail(b, f"timed out after {self.timeout:g} s")
            return
        hopeless = got + len(b.outstanding) < self.n_min
        past_deadline = self.deadline is not None and elapsed >= self.deadline
        if hopeless or (past_deadline and got < self.n_min):
            if self.on_insufficient == "fail" and (hopeless or past_deadline):
                self._fail(b, "too few workers returned")
            elif self.on_insufficient == "redispatch":
                self._redispatch(b)

    def _redispatch(self, b):
        missing = [s for s in range(self.scheme.n_workers)
                   if s not in b.results and s not in b.outstanding and s not in b.redispatched]
        helpers = sorted(b.results, key=lambda s: b.latencies[s]) or [
            w for w in range(self.scheme.n_workers) if not self._queues[w]]
        if not missing or not helpers:
            if not b.outstanding and len(b.results) < self.n_min:
                self._fail(b, "too few workers returned, even after re-dispatch")
            return
        for i, slot in enumerate(missing):
            w = helpers[i % len(helpers)]
            b.redispatched.add(slot)
            b.failed.pop(slot, None)
            self.stats["redispatched"] += 1
            self._dispatch(b, slot, w, TaskFault())

    def _finish(self, b):
        del self._batches[b.index]
        for slot, w in b.outstanding.items():  # cancel what is still running or queued
            self._backend.cancel(w, b.index)
            self._task_done(w, b.index, slot)
        b.coded = None

    def _decode(self, b):
        results = self._usable(b)
        slots = np.array(sorted(results), dtype=np.int64)
        t0 = time.monotonic()
        try:
            Y = np.stack([results[s] for s in slots])
            try:
                dec = self.scheme.decode_with_info(Y, slots)
                outputs, missing = dec.estimate, ()
                info, est = dec.info, dec.error_estimate
            except MissingOutputsError as exc:
                outputs, missing, info, est = exc.partial, tuple(int(k) for k in exc.missing), {}, None
        except (InsufficientReturnsError, ValueError) as exc:
            self._fail(b, f"decode failed: {exc}")
            return
        self._out_shape = self._out_shape or Y.shape[1:]
        res = BatchResult(
            batch=b.index, outputs=outputs, missing=missing, returned=tuple(int(s) for s in slots),
            failed=dict(b.failed), latencies={int(s): b.latencies[s] for s in slots},
            wall_time=time.monotonic() - b.t0 + b.encode_time, encode_time=b.encode_time,
            decode_time=time.monotonic() - t0, error_estimate=est, decode_info=info,
        )
        self._finish(b)
        self.stats["batches"] += 1
        log.debug("batch decoded", extra={"batch": b.index, "returned": len(slots), "failed": len(b.failed)})
        b.future.set_result(res)

    def _fail(self, b, reason):
        if b.index not in self._batches:
            return
        self._finish(b)
        self.stats["failed_batches"] += 1
        err = BatchFailedError(b.index, b.failed, len(b.results), self.n_min, reason)
        log.warning("batch failed", extra={"batch": b.index, "reason": reason})
        b.future.set_exception(err)
