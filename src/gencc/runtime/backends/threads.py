"""The threads backend: N worker threads in this process, for models that release the GIL.

No pickling, no pipes, no process start-up: a task is a reference to a slice
of the coded array, and a result f's output. The price is isolation: a worker
thread shares the process with the master, so each task's input and output
are copied (f may modify its input, or return a buffer it reuses), where a
process gets its own copies from the pipe.
"""

from __future__ import annotations

import itertools
import logging
import os
import queue
import threading
import time
import traceback
from collections import deque

from ..events import Task, TaskCancelled, TaskError, TaskResult, WorkerDied, WorkerReady
from ..faults import run_faulty
from .worker import build_model, compute, set_threads

__all__ = ["ThreadBackend"]

log = logging.getLogger("gencc.runtime")


_now = time.monotonic


class _ThreadExit(BaseException):
    """Ends a worker thread (an injected crash, or an abandoned hang)."""

    def __init__(self, code):
        super().__init__(code)
        self.code = code


def _exit(code):
    raise _ThreadExit(code)


class _WorkerThread:
    """One worker thread: its inbox, its model, its generation."""

    def __init__(self, factory, worker, generation, events):
        self.worker, self.generation = worker, generation
        self._factory, self._events = factory, events
        self._cond = threading.Condition()
        self._inbox: deque[Task] = deque()
        self._cancelled: set[int] = set()
        self.abandoned = False  # replaced (hung) or shut down: it must stop at its next chance
        self.ended = False
        self.thread = threading.Thread(target=self._run, name=f"gencc-thread-worker-{worker}", daemon=True)
        self.thread.start()

    # -- master side (never blocks on the worker) --
    def send(self, task: Task) -> bool:
        with self._cond:
            if self.abandoned or self.ended:
                return False
            self._inbox.append(task)
            self._cond.notify()
        return True

    def cancel(self, batch):
        dropped = []
        with self._cond:
            self._cancelled.add(batch)
            if len(self._cancelled) > 4096:  # batch ids only grow: forget the oldest
                for old in sorted(self._cancelled)[:2048]:
                    self._cancelled.discard(old)
            for task in [t for t in self._inbox if t.batch == batch]:
                self._inbox.remove(task)
                dropped.append(task)
            self._cond.notify()
        for task in dropped:
            self._put(TaskCancelled(self.worker, task.batch, task.slot))

    def abandon(self):
        with self._cond:
            self.abandoned = True
            self._inbox.clear()
            self._cond.notify_all()

    # -- worker side --
    def _put(self, msg):
        self._events.put((self.worker, self.generation, msg))

    def _next(self):
        """The next task, or None once abandoned; waits are bounded."""
        with self._cond:
            while not self._inbox:
                if self.abandoned:
                    return None
                self._cond.wait(timeout=0.5)
            if self.abandoned:
                return None
            return self._inbox.popleft()

    def _delay(self, task) -> bool:
        """Sleep the injected delay; False if the batch was cancelled meanwhile."""
        end = _now() + task.fault.delay
        with self._cond:
            while task.batch not in self._cancelled and not self.abandoned:
                left = end - _now()
                if left <= 0:
                    break
                self._cond.wait(timeout=min(left, 0.5))
            return task.batch not in self._cancelled and not self.abandoned

    def _run(self):
        code = 0
        try:
            try:
                f = build_model(self._factory)
            except BaseException:
                self._put(("init_error", traceback.format_exc()))
                code = 1
                return
            self._put(("ready",))
            while (task := self._next()) is not None:
                start = _now()
                if task.fault.delay and not self._delay(task):
                    if not self.abandoned:
                        self._put(TaskCancelled(self.worker, task.batch, task.slot))
                    continue
                if task.batch in self._cancelled:
                    self._put(TaskCancelled(self.worker, task.batch, task.slot))
                    continue
                try:
                    # copies both ways: the input is a view of the master's coded array (kept for
                    # redispatch), the output may be a buffer f reuses on its next call
                    y = run_faulty(lambda: compute(f, task.x, task.stacked, copy_input=True, copy_output=True),
                                   task.fault,
                                   orphaned=lambda: self.abandoned, exit=_exit)
                    self._put(TaskResult(self.worker, task.batch, task.slot, y, _now() - start))
                except Exception as exc:  # an erasure for the master, not the end of this worker
                    self._put(TaskError(self.worker, task.batch, task.slot, f"{type(exc).__name__}: {exc}",
                                        _now() - start))
        except _ThreadExit as exc:
            code = exc.code
        except BaseException as exc:  # SystemExit, KeyboardInterrupt raised by f: the thread is gone
            code = f"{type(exc).__name__}"
        finally:
            self.ended = True
            self._put(("exited", code))


class ThreadBackend:
    """N worker threads in this process, each holding its own model.

    Parameters
    ----------
    factory : callable, torch module or "module:attr" string, or a list of N of them
        Each worker thread builds its model from it once (so N copies of the
        weights; a torch module is used by all N threads if passed as is).
    n_workers : int
    threads : int or None
        Compute threads for torch/OpenMP, set once for the whole process
        (``torch.set_num_threads`` is process-wide): default 1, so that N
        worker threads do not oversubscribe the cores. None leaves it.
    start_timeout : float
        Seconds to wait for every worker to build its model.
    max_abandoned : int
        Most hung threads kept abandoned at once (see Notes).

    Notes
    -----
    Implements :class:`~gencc.runtime.backends.Backend`. Use it for models
    that release the GIL while they compute (torch, numpy's BLAS): the worker
    threads then run in parallel, and a task costs no pickling, no pipe and no
    process hop. Keep the process backend (``"local"``) where isolation is
    needed: a model that crashes the interpreter, leaks, or holds the GIL.

    What a restart means here: a thread cannot be killed. When the executor
    restarts a worker (a task ran past ``hang_timeout``), the old thread is
    *abandoned*: its generation is retired (anything it still reports is
    dropped), it is told to stop at its next chance (an injected hang or
    delay stops at once; a real hang inside f stops only when f returns),
    and a new thread with a fresh model takes its place. At most
    ``max_abandoned`` abandoned threads may be alive at once; past that a
    restart fails, the worker stays lost (its tasks are erasures), and it is
    started again once an abandoned thread has ended. An injected ``crash``
    ends the thread, not the process. At shutdown, abandoned threads that
    are still stuck in f are left behind (daemon threads: they do not keep the
    interpreter alive).
    """

    name = "threads"

    def __init__(self, factory, n_workers, *, threads=1, start_timeout=120.0, max_abandoned=8):
        factories = list(factory) if isinstance(factory, (list, tuple)) else [factory] * n_workers
        if len(factories) != n_workers:
            raise ValueError(f"model must be one factory or one per worker ({n_workers}), got {len(factories)}")
        if not isinstance(max_abandoned, int) or max_abandoned < 0:
            raise ValueError(f"max_abandoned must be an int >= 0, got {max_abandoned!r}")
        self._factories = factories
        self.factory = factory
        self.n_workers = n_workers
        self.threads = threads
        self.start_timeout = start_timeout
        self.max_abandoned = max_abandoned
        self._events: queue.SimpleQueue = queue.SimpleQueue()
        self._workers: list[_WorkerThread | None] = [None] * n_workers
        self._lost: set[int] = set()  # restart refused (too many abandoned threads): retried in poll
        self._abandoned: list[_WorkerThread] = []
        self._generations = itertools.count()
        self._restarts = [0] * n_workers
        self.pids = [os.getpid()] * n_workers
        self.pid_history: list[int] = []  # no process is ever started

    def _spawn(self, w):
        self._workers[w] = _WorkerThread(self._factories[w], w, next(self._generations), self._events)

    def start(self):
        """Start all worker threads and wait until each has built its model."""
        set_threads(self.threads)
        try:
            for w in range(self.n_workers):
                self._spawn(w)
            pending = set(range(self.n_workers))
            deadline = _now() + self.start_timeout
            while pending:
                left = deadline - _now()
                if left <= 0:
                    raise TimeoutError(f"workers {sorted(pending)} did not build the model within "
                                       f"{self.start_timeout} s")
                try:
                    w, _, msg = self._events.get(timeout=left)
                except queue.Empty:
                    continue
                if isinstance(msg, tuple) and msg[0] == "init_error":
                    raise ValueError(f"model cannot be built on worker {w}:\n{msg[1]}")
                if isinstance(msg, tuple) and msg[0] == "exited":
                    raise ValueError(f"worker {w} died while building the model ({msg[1]})")
                if isinstance(msg, tuple) and msg[0] == "ready":
                    pending.discard(w)
        except BaseException:
            self.shutdown()
            raise

    def submit(self, w, task: Task) -> bool:
        inc = self._workers[w]
        return inc is not None and inc.send(task)

    def cancel(self, w, batch):
        inc = self._workers[w]
        if inc is not None:
            inc.cancel(batch)

    def poll(self, timeout: float) -> list:
        """Events from the current threads, waiting up to ``timeout`` for the first."""
        events = []
        try:
            item = self._events.get(timeout=timeout)
            while True:
                events.extend(self._translate(*item))
                item = self._events.get_nowait()
        except queue.Empty:
            pass
        self._abandoned = [t for t in self._abandoned if t.thread.is_alive()]
        for w in sorted(self._lost):
            if len(self._abandoned) <= self.max_abandoned:
                self._lost.discard(w)
                self._spawn(w)  # its "ready" comes back as WorkerReady
        return events

    def _translate(self, w, generation, msg):
        inc = self._workers[w]
        if inc is None or inc.generation != generation:
            return []  # from a thread the executor already replaced
        if not isinstance(msg, tuple):
            return [msg]
        if msg[0] == "ready":
            return [WorkerReady(w)]
        if msg[0] == "init_error":
            log.warning("worker thread %d failed to build its model on restart:\n%s", w, msg[1])
            return []  # its "exited" follows and reports the death once
        return [WorkerDied(w, f"thread ended (code {msg[1]})")]  # "exited"

    def restart(self, w):
        """Abandon worker w's thread (a thread cannot be killed) and start a new one.

        Raises
        ------
        RuntimeError
            If ``max_abandoned`` abandoned threads are still alive; the worker
            is then started again by a later :meth:`poll`, once one has ended.
        """
        old = self._workers[w]
        self._restarts[w] += 1
        if old is not None:
            old.abandon()
            if old.thread.is_alive():
                self._abandoned.append(old)
        self._workers[w] = None
        self._abandoned = [t for t in self._abandoned if t.thread.is_alive()]
        if len(self._abandoned) > self.max_abandoned:
            self._lost.add(w)
            raise RuntimeError(f"{len(self._abandoned)} abandoned worker threads are still running "
                               f"(max_abandoned={self.max_abandoned}); worker {w} restarts once one ends")
        self._spawn(w)

    @property
    def restarts(self) -> list[int]:
        return list(self._restarts)

    def alive(self) -> list[bool]:
        return [inc is not None and inc.thread.is_alive() for inc in self._workers]

    def shutdown(self, timeout: float = 5.0):
        """Stop every worker thread; wait up to ``timeout`` for them to end."""
        incs = [inc for inc in self._workers if inc is not None] + self._abandoned
        for inc in incs:
            inc.abandon()
        deadline = _now() + timeout
        for inc in incs:
            inc.thread.join(timeout=max(0.0, deadline - _now()))
        stuck = [inc.worker for inc in incs if inc.thread.is_alive()]
        if stuck:
            log.warning("worker threads %s still inside f at shutdown; left behind (daemon)", stuck)
        self._workers = [None] * self.n_workers
        self._abandoned, self._lost = [], set()
