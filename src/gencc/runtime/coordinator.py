"""The coded executor's state machine: batches, worker queues and the gather policy, no threads.

A :class:`Coordinator` is fed what happens (a batch encoded, a worker's
event, the clock) and answers with **instructions**, which its owner (the
:class:`~gencc.runtime.executor.CodedExecutor`'s dispatcher) carries out:

========================  ==========================================================
:class:`Send`             give a task to a worker (report a refusal back as :class:`SendFailed`)
:class:`Cancel`           ask a worker to drop what it still runs of a batch
:class:`Restart`          replace a worker (its unfinished tasks are already erasures)
:class:`Decode`           decode a retired batch, then hand the outcome to :meth:`Coordinator.decoded`
:class:`Resolve`          set a batch's future to a value or an exception
:class:`AnswerEarly`      hand inputs answered by their own worker to the batch's ``on_early``
:class:`CloseEarly`       close an open batch (direct dispatch) whose early task is late
========================  ==========================================================

It knows the scheme only through ``can_decode``, ``is_complete``,
``available`` and ``trusted_returns``, and workers only by index: no backend,
no lock, no clock of its own. The dispatcher holds its lock around every call
and carries out ``Send``, ``Cancel`` and ``Restart`` under it (the order of
the sends is the order of the workers' queues); ``Decode``, ``Resolve``,
``AnswerEarly`` and ``CloseEarly`` run after the lock is released, so that a
slow decode or a caller's callback never stalls an event. When a batch is
decoded or failed is decided by the pure :func:`~gencc.runtime.gather.decide`.

Examples
--------
>>> import numpy as np, gencc
>>> from concurrent.futures import Future
>>> from gencc.runtime.coordinator import Coordinator, Send, Decode
>>> from gencc.runtime.events import TaskResult
>>> scheme = gencc.Replication(2, 4)
>>> co = Coordinator(scheme, timeout=5.0)
>>> sends = co.add_batch(np.zeros((4, 1, 1)), Future(), now=0.0)
>>> [(s.worker, s.task.slot) for s in sends]
[(0, 0), (1, 1), (2, 2), (3, 3)]
>>> co.handle(TaskResult(0, 0, 0, np.ones((1, 1)), 0.01), now=0.1)
[]
>>> co.handle(TaskResult(1, 0, 1, np.ones((1, 1)), 0.01), now=0.1)
[]
>>> [type(i).__name__ for i in co.advance(now=0.1, batches=[0])]  # every input has a copy
['Cancel', 'Cancel', 'Decode']
"""

from __future__ import annotations

import itertools
import logging
from collections import Counter, deque
from typing import Callable, NamedTuple

import numpy as np

from ..errors import BatchFailedError
from .batch import BatchState
from .events import Task, TaskCancelled, TaskError, WorkerDied, WorkerReady
from .faults import TaskFault
from .gather import GatherPolicy, GatherState, adaptive_deadline, decide, early_inputs
from .placement import assign_idle, redispatch_helpers

__all__ = ["Coordinator", "WorkerQueue", "Send", "Cancel", "Restart", "Decode", "Resolve", "AnswerEarly",
           "CloseEarly", "SendFailed", "covers", "direct_slots"]

log = logging.getLogger("gencc.runtime")

AT_MASTER = -1  # BatchState.outstanding's worker for a task waiting at the master (pull placement)


class Send(NamedTuple):
    """Give ``task`` to ``worker``; a backend that refuses it is reported as :class:`SendFailed`."""

    worker: int
    task: Task


class Cancel(NamedTuple):
    """Ask ``worker`` to drop what it still runs of ``batch`` (it answers :class:`TaskCancelled`)."""

    worker: int
    batch: int


class Restart(NamedTuple):
    """Replace ``worker``: its unfinished tasks are erasures already; it reports :class:`WorkerReady`."""

    worker: int


class Decode(NamedTuple):
    """Decode a retired batch from its returned ``slots`` (sorted int64), whose ``outputs`` have
    shape (B, *out_shape) each, with ``decoder`` (see :func:`~gencc.runtime.decoding.decode_batch`);
    hand the outcome to :meth:`Coordinator.decoded`. ``trusted_returns``: the scheme's floor."""

    batch: BatchState
    slots: np.ndarray
    outputs: list
    decoder: object
    trusted_returns: int


class Resolve(NamedTuple):
    """Set ``future``'s result to ``value`` (an exception: set it as the exception)."""

    future: object
    value: object


class AnswerEarly(NamedTuple):
    """Call ``callback(rows, outputs, batch)``: rows of the batch answered by their own worker,
    ``outputs`` of shape (len(rows), *out_shape)."""

    callback: Callable
    rows: list
    outputs: np.ndarray
    batch: int


class CloseEarly(NamedTuple):
    """Close the open batch ``batch`` now (direct dispatch: one of its early tasks is late)."""

    batch: int


class SendFailed(NamedTuple):
    """The backend refused :class:`Send` (a dead pipe, a stopped actor): the task is an erasure."""

    worker: int
    batch: int
    slot: int


class WorkerQueue:
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


class Coordinator:
    """Batches in flight, what each worker holds, and when each batch is decoded or failed.

    Parameters
    ----------
    scheme : CodingScheme
    models : sequence, optional
        What each worker runs (compared with ``==``): a task is re-sent or
        pulled only to a worker running the same. Default: one model for all.
    n_wait, n_min, deadline, timeout, on_insufficient, placement, hang_timeout, restart_timeout, faults
        As in :class:`~gencc.runtime.executor.CodedExecutor`, already checked
        (``n_wait`` None: all workers; ``hang_timeout`` None: ``timeout``;
        ``restart_timeout`` None: ``max(60, hang_timeout)``).
    adaptive : AdaptiveDeadline, optional
        Set the deadline from the observed task latencies (``deadline`` is then the cold start's).
    early : bool
        Answer inputs carried unchanged by their own worker at once (:class:`AnswerEarly`).
    direct_dispatch : bool
        Batches may be open (:meth:`open_column`): their clock starts at :meth:`close_batch`.
    decoder : callable, optional
        Returns the decoder to use for the next decode (self-calibration's
        choice); default: the scheme.

    Attributes
    ----------
    batches : dict of int -> BatchState
        The batches not yet decoded or failed.
    queues : list of WorkerQueue
        Per worker, the tasks sent and not answered.
    pending : deque of (batch, slot)
        Tasks waiting at the master for an idle worker (pull placement), oldest first.
    stats, returned_counts, timings : collections.Counter
        As :class:`~gencc.runtime.executor.CodedExecutor`'s.
    deadline : float or None
        The deadline in force (adaptive: the latest estimate).
    adaptive : AdaptiveDeadline or None
        The rule that sets it.
    out_shape : tuple or None
        One input's output shape, once a batch was decoded.
    """

    def __init__(self, scheme, models=None, *, n_wait=None, n_min=None, deadline=None, adaptive=None, timeout=30.0,
                 on_insufficient="fail", placement="pinned", hang_timeout=None, restart_timeout=None, faults=None,
                 early=True, direct_dispatch=False, decoder=None):
        N = scheme.n_workers
        self.scheme = scheme
        self.models = list(models) if models is not None else [None] * N
        self.n_wait = N if n_wait is None else n_wait
        self.n_min = n_min
        self.timeout = timeout
        self.on_insufficient = on_insufficient
        self.placement = placement
        self.hang_timeout = timeout if hang_timeout is None else hang_timeout
        self.restart_timeout = max(60.0, self.hang_timeout) if restart_timeout is None else restart_timeout
        self.faults = faults
        self.direct = direct_slots(scheme) if early else {}
        self.direct_dispatch = direct_dispatch
        self.adaptive = adaptive
        self.deadline = adaptive_deadline((), adaptive) if adaptive is not None else deadline
        self._recent = deque(maxlen=adaptive.window if adaptive is not None else 1)  # task latencies, s
        self._policy = GatherPolicy(self.deadline, timeout, on_insufficient)
        self._decoder = decoder if decoder is not None else (lambda: scheme)
        self._counter = itertools.count()
        self.batches: dict[int, BatchState] = {}
        self.queues = [WorkerQueue() for _ in range(N)]
        self.pending: deque[tuple[int, int]] = deque()
        self.out_shape = None
        self.stats = Counter()
        self.returned_counts = Counter()
        self.timings = Counter()

    # -- batches in --------------------------------------------------------------------------
    def next_batch(self):
        """A new batch's index and fault plan (None without per-slot faults)."""
        index = next(self._counter)
        if not self.faults or self.faults_per_worker():
            return index, None
        return index, self.faults.plan(index, self.scheme.n_workers)

    def faults_per_worker(self) -> bool:
        """Under pull placement, faults drawn per task for the worker that runs it."""
        return self.placement == "pull" and hasattr(self.faults, "task_fault")

    def add_batch(self, coded, future, now, *, opened=None, encode_time=0.0, on_early=None) -> list:
        """Register an encoded batch, ``coded`` of shape (N, B, *in_shape), whose clock starts
        ``now``, and send every slot. ``opened``: the (index, plan) of :meth:`next_batch`,
        taken here if None."""
        index, plan = self.next_batch() if opened is None else opened
        b = BatchState(index, coded, plan, now, future, encode_time, size=coded.shape[1])
        b.on_early = on_early if self.direct else None
        self.batches[index] = b
        return self._place(b, range(self.scheme.n_workers), now)

    def open_column(self, opened, k, Xk, future, on_early, now) -> list:
        """Direct dispatch: send input k's own slot(s), Xk of shape (B, *in_shape), of the open
        batch ``opened`` (an (index, plan)); registers the batch, open (never decoded or failed
        here until :meth:`close_batch`), at its first column; ``future`` is used then."""
        index, plan = opened
        b = self.batches.get(index)
        if b is None:
            b = BatchState(index, np.zeros((self.scheme.n_workers, *Xk.shape)), plan, None, future, 0.0,
                           size=Xk.shape[0])
            b.on_early = on_early
            self.batches[index] = b
        slots = [s for s, kk in self.direct.items() if kk == k]
        for slot in slots:
            b.coded[slot] = Xk
        return self._place(b, slots, now, timed=True)

    def close_batch(self, index, coded, now, *, encode_time=0.0, why=None) -> list:
        """Direct dispatch: the open batch is encoded (``coded``, shape (N, B, *in_shape)), or
        failed ``why``; send the slots not sent yet and start its clock."""
        b = self.batches.get(index)
        if b is None:
            raise RuntimeError(f"batch {index} ended before it closed (executor shut down)")
        if why is not None:
            return self.fail(b, why)
        b.coded, b.t0, b.encode_time = coded, now, encode_time
        for q in self.queues:  # an early task's hang timer starts now, with the batch's clock
            if q.tasks and q.tasks[0][0] == index:
                q.head_since = now
        unsent = [s for s in range(self.scheme.n_workers) if s not in b.sent_at and s not in b.outstanding]
        return self._place(b, unsent, now, timed=True)

    def future_of(self, index):
        b = self.batches.get(index)
        return None if b is None else b.future

    # -- events and the clock ----------------------------------------------------------------
    def handle(self, ev, now) -> list:
        """One worker event (or :class:`SendFailed`) at time ``now``; returns the instructions it causes."""
        if isinstance(ev, WorkerDied):
            self.stats["crashes"] += 1
            log.warning("worker died; restarting", extra={"worker": ev.worker, "why": ev.why})
            return self._restart(ev.worker, ev.why, now)
        if isinstance(ev, WorkerReady):
            self.queues[ev.worker].ready(now)
            return []
        self.queues[ev.worker].ack(ev.batch, ev.slot, now)
        if isinstance(ev, TaskCancelled):
            return []
        b = self.batches.get(ev.batch)
        if b is None or b.outstanding.get(ev.slot) != ev.worker:
            if not isinstance(ev, SendFailed):
                self.stats["late_results"] += 1
            return []
        del b.outstanding[ev.slot]
        if isinstance(ev, SendFailed):
            b.erase(ev.slot, ev.worker, "send failed")
            return []
        if isinstance(ev, TaskError):
            b.erase(ev.slot, ev.worker, f"error: {ev.message}")
            self.stats["erasures"] += 1
            return []
        y = ev.output if b.size > 1 else _lifted(ev.output)
        why = output_problem(y, b.size, self.out_shape)
        if why:
            b.erase(ev.slot, ev.worker, why)
            self.stats["erasures"] += 1
            return []
        b.results[ev.slot] = np.asarray(y, dtype=np.float64)
        latency = now - b.sent_at.get(ev.slot, b.t0)  # from the task's own send (direct dispatch)
        b.latencies[ev.slot] = latency
        b.compute_seconds[ev.slot] = ev.seconds
        b.answered_by[ev.slot] = ev.worker
        if self.adaptive is not None:
            self._recent.append(latency)
            if len(self._recent) % 8 == 0:  # the quantile, not on every result
                self.deadline = adaptive_deadline(self._recent, self.adaptive)
                self._policy = GatherPolicy(self.deadline, self.timeout, self.on_insufficient)
        out = []
        if b.on_early is not None and ev.slot in self.direct:
            for k in early_inputs([ev.slot], self.direct, b.early_done):
                b.early_done.add(k)
                rows = [r * self.scheme.n_inputs + k for r in range(b.size)]
                out.append(AnswerEarly(b.on_early, rows, b.results[ev.slot], b.index))
        return out

    def advance(self, now, batches=None) -> list:
        """Act on the clock at ``now``: for the batches named (indices), or, with None, a full
        sweep (hang and restart timers, every batch); then send what idle workers can take
        (pull) and close open batches whose early task is late (direct dispatch)."""
        out = []
        if batches is None:
            out += self._check_hangs(now)
            todo = list(self.batches.values())
        else:
            todo = [b for i in dict.fromkeys(batches) if (b := self.batches.get(i)) is not None]
        for b in todo:
            out += self._step_or_fail(b, now)
        if self.pending:  # workers freed by these events, or batches just decoded
            out += self._pump(now)
        if self.direct_dispatch and self.deadline is not None:
            out += [CloseEarly(b.index) for b in todo if b.t0 is None and b.index in self.batches
                    and any(now - b.sent_at[s] > self.deadline for s in b.outstanding if s in b.sent_at)]
        return out

    def decoded(self, job: Decode, res) -> Resolve:
        """Count a decode's outcome, a BatchResult or why it failed (a str); returns its Resolve."""
        b, slots = job.batch, job.slots
        if isinstance(res, str):
            return self._failure(b, res)
        if self.out_shape is None:
            self.out_shape = job.outputs[0].shape[1:]
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
        return Resolve(b.future, res)

    def fail(self, b, reason) -> list:
        """Retire batch ``b`` as failed: cancels, then its Resolve with a BatchFailedError."""
        out = self._retire(b)
        out.append(self._failure(b, reason))
        return out

    def abandon(self, futures, reason) -> list:
        """Retire the batches whose future is among ``futures`` (nobody waits for them any more):
        cancels for their workers, and each future failed with ``reason``; counted in
        ``stats["abandoned_batches"]``, not as failed batches."""
        wanted = set(futures)
        out = []
        for b in [b for b in self.batches.values() if b.future in wanted]:
            out += self._retire(b)
            self.stats["abandoned_batches"] += 1
            out.append(Resolve(b.future, BatchFailedError(b.index, b.failed, len(b.results), 0, reason)))
        return out

    def fail_all(self, reason) -> list:
        """Fail every batch in flight (shutdown, or a dispatcher that died)."""
        return [i for b in list(self.batches.values()) for i in self.fail(b, reason)]

    # -- policy ------------------------------------------------------------------------------
    def _step_or_fail(self, b, now) -> list:
        try:
            return self._step(b, now)
        except Exception as exc:  # a scheme error fails this batch, not the dispatcher
            log.exception("batch step failed", extra={"batch": b.index})
            reason = f"internal error: {exc!r}"
            try:
                return self.fail(b, reason)
            except Exception:  # failing it cleanly failed too: drop it, its future still gets the error
                self.batches.pop(b.index, None)
                return [Resolve(b.future, BatchFailedError(b.index, b.failed, len(b.results), 0, reason))]

    def _step(self, b, now) -> list:
        """Measure the batch, ask the policy, act."""
        if b.t0 is None:  # open (direct dispatch): its clock starts when it closes
            return []
        usable = b.usable(self.out_shape)
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
            covers=not decodable or covers(self.scheme, slots, b.outstanding),  # only read of a decodable set
            # direct dispatch: the deadline counts from the latest send among the tasks still out
            waited=(now - max(b.sent_at.get(s, b.t0) for s in b.outstanding)
                    if b.sent_at and b.outstanding else None),
        )
        action = decide(state, self._policy)
        if action.kind == "decode":
            return self._begin_decode(b, usable)
        if action.kind == "fail":
            return self.fail(b, action.reason)
        if action.kind == "redispatch":
            return self._redispatch(b, missing, now)
        return []

    def _decodable(self, slots) -> bool:
        if self.n_min is not None:
            return len(slots) >= self.n_min
        return self.scheme.can_decode(slots)

    def _begin_decode(self, b, usable) -> list:
        """Retire the batch and take what its decode needs; the decode itself is the caller's."""
        slots = np.array(sorted(usable), dtype=np.int64)
        for s in set(b.results) - set(usable):
            b.erase(s, s, f"wrong shape {b.results[s].shape}")
        out = self._retire(b)
        out.append(Decode(b, slots, [usable[s] for s in slots], self._decoder(), self.scheme.trusted_returns))
        return out

    def _retire(self, b) -> list:
        del self.batches[b.index]
        b.coded = None
        # ask workers to drop what still runs
        return [Cancel(w, b.index) for w in sorted(set(b.outstanding.values()) - {AT_MASTER})]

    def _failure(self, b, reason) -> Resolve:
        """The failure of a retired batch."""
        self.stats["failed_batches"] += 1
        n_required = self.n_min if self.n_min is not None else self.scheme.trusted_returns
        err = BatchFailedError(b.index, b.failed, len(b.usable(self.out_shape)), n_required, reason)
        log.warning("batch failed", extra={"batch": b.index, "reason": reason})
        return Resolve(b.future, err)

    # -- placement ---------------------------------------------------------------------------
    def _place(self, b, slots, now, timed=False) -> list:
        """Send ``slots`` of batch ``b`` (pinned: slot n to worker n) or queue them at the master and
        send what idle workers can take (pull). ``timed``: record the send times (direct dispatch;
        always under pull)."""
        out = []
        for slot in slots:
            if self.placement == "pinned":
                if timed:
                    b.sent_at[slot] = now
                out.append(self._send(b, slot, slot, b.faults[slot] if b.faults else TaskFault(), now))
            else:
                b.outstanding[slot] = AT_MASTER
                self.pending.append((b.index, slot))
        if self.placement == "pull":
            out += self._pump(now)
        return out

    def _pump(self, now) -> list:
        """Pull placement: send waiting tasks, oldest first, to idle workers."""
        live = []
        for index, slot in self.pending:
            b = self.batches.get(index)
            if b is not None and b.outstanding.get(slot) == AT_MASTER:
                live.append((b, slot))
            else:
                self.stats["never_sent"] += 1
        idle = [w for w, q in enumerate(self.queues) if not q.tasks and not q.starting]
        sent, out = set(), []
        per_worker = self.faults_per_worker()
        for i, w in assign_idle([slot for _, slot in live], idle, lambda s, v: self.models[v] == self.models[s]):
            b, slot = live[i]
            fault = self.faults.task_fault(w) if per_worker else (b.faults[slot] if b.faults else TaskFault())
            del b.outstanding[slot]
            b.sent_at[slot] = now
            self.stats["pulled_elsewhere"] += w != slot
            out.append(self._send(b, slot, w, fault, now))
            sent.add(i)
        self.pending = deque((b.index, slot) for i, (b, slot) in enumerate(live) if i not in sent)
        return out

    def _send(self, b, slot, worker, fault, now) -> Send:
        self.queues[worker].push(b.index, slot, now)
        b.outstanding[slot] = worker
        x, stacked = (b.coded[slot], True) if b.size > 1 else (b.coded[slot][0], False)
        return Send(worker, Task(b.index, slot, x, fault, stacked))

    def _helpers(self, b, slot):
        """Workers to re-send ``slot`` to (running the model it needs): those that
        answered this batch, fastest first, then idle ones."""
        same = [w for w in range(self.scheme.n_workers) if self.models[w] == self.models[slot]]
        fastest = sorted(b.latencies, key=b.latencies.get)
        return redispatch_helpers(same, [b.answered_by[s] for s in fastest], lambda w: bool(self.queues[w].tasks))

    def _redispatch(self, b, missing, now) -> list:
        out = []
        for i, slot in enumerate(missing):
            helpers = self._helpers(b, slot)
            if not helpers:
                continue
            w = helpers[i % len(helpers)]
            b.redispatched.add(slot)
            b.failed.pop(slot, None)
            self.stats["redispatched"] += 1
            out.append(self._send(b, slot, w, TaskFault(), now))
        return out

    # -- workers -----------------------------------------------------------------------------
    def _restart(self, w, why, now) -> list:
        """Erase the worker's unfinished tasks and replace it: only the coordinator restarts workers."""
        for batch, slot in self.queues[w].clear():
            b = self.batches.get(batch)
            if b is not None and b.outstanding.get(slot) == w:
                del b.outstanding[slot]
                b.erase(slot, w, why)
                self.stats["erasures"] += 1
        self.queues[w].restarting(now)
        return [Restart(w)]

    def _check_hangs(self, now) -> list:
        out = []
        for w, q in enumerate(self.queues):
            if q.starting and now - q.starting_since > self.restart_timeout:
                self.stats["slow_restarts"] += 1
                log.warning("restarted worker not ready; restarting again", extra={"worker": w})
                out += self._restart(w, f"not ready {self.restart_timeout:g} s after a restart", now)
            elif not q.starting and q.head_since is not None and now - q.head_since > self.hang_timeout \
                    and not self._open_head(q):
                self.stats["hangs"] += 1
                log.warning("worker hung; restarting", extra={"worker": w})
                out += self._restart(w, f"hung > {self.hang_timeout:g} s", now)
        return out

    def _open_head(self, q) -> bool:
        """Whether the worker's current task belongs to an open batch (not timed until it closes)."""
        b = self.batches.get(q.tasks[0][0]) if q.tasks else None
        return b is not None and b.t0 is None


def covers(scheme, slots, outstanding) -> bool:
    """Whether a decode from ``slots`` answers every input that the ``outstanding`` slots could
    answer too (replication: a copy of each input still out; ParM: the parity that fills a gap)."""
    if not slots or not outstanding:
        return True
    now, later = scheme.available(slots), scheme.available(sorted(set(slots) | set(outstanding)))
    return bool(np.all(now | ~later))


def _lifted(y):
    """A single coded input's output as a batch of one (left as is if not numeric)."""
    try:
        return np.asarray(y, dtype=np.float64)[None]
    except (TypeError, ValueError):
        return y


def output_problem(y, size, out_shape) -> str | None:
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
