"""The embedded backend: a pool of worker processes on this machine."""

from __future__ import annotations

import dataclasses
import itertools
import logging
import multiprocessing as mp
import pickle
import queue
import sys
import threading
import time

import numpy as np

from .events import Task, TaskCancelled, TaskError, TaskResult, WorkerDied, WorkerReady
from .shared import Arena, arena_size
from .worker import worker_main

__all__ = ["LocalBackend"]

log = logging.getLogger("gencc.runtime")

_STOP = object()


class _Incarnation:
    """One worker process and its two pipes, each served by its own thread.

    The sender thread does the blocking writes, so a worker that stops
    reading (hung, SIGSTOP) blocks only that thread; the receiver thread does
    the blocking reads and reports the process's death when its pipe closes.
    """

    def __init__(self, ctx, factory, worker, threads, generation, events):
        tasks_r, tasks_w = ctx.Pipe(duplex=False)
        events_r, events_w = ctx.Pipe(duplex=False)
        self.worker, self.generation = worker, generation
        self.proc = ctx.Process(target=worker_main, args=(tasks_r, events_w, factory, worker, threads),
                                name=f"gencc-worker-{worker}", daemon=True)
        self.proc.start()
        tasks_r.close()
        events_w.close()
        self.pid = self.proc.pid
        self._tasks_w, self._events_r = tasks_w, events_r
        self._outbox: queue.SimpleQueue = queue.SimpleQueue()
        self.broken = False
        self._events = events
        self.arena: Arena | None = None  # created at this worker's first large task
        self._arena_lock = threading.Lock()
        threading.Thread(target=self._send_loop, name=f"gencc-send-{worker}", daemon=True).start()
        threading.Thread(target=self._receive_loop, name=f"gencc-recv-{worker}", daemon=True).start()

    def send(self, msg) -> bool:
        if self.broken:
            return False
        self._outbox.put(msg)
        return True

    def share(self, task: Task, min_bytes: int) -> Task:
        """``task`` with its coded inputs moved into this worker's arena, if they
        are at least ``min_bytes`` and fit; else ``task`` (sent through the pipe)."""
        x = task.x
        if not isinstance(x, np.ndarray) or x.nbytes < min_bytes or self.broken:
            return task
        with self._arena_lock:
            if self.arena is None:
                self.arena = Arena(arena_size(x.nbytes))
                self._outbox.put(("arena", self.arena.name))
        where = self.arena.put((task.batch, task.slot), x)
        return task if where is None else dataclasses.replace(task, x=where)

    def task_ended(self, batch, slot):
        """Free the arena block of a task whose end has arrived."""
        if self.arena is not None:
            self.arena.free((batch, slot))

    def close_arena(self):
        """Unlink this worker's arena; later tasks of it (none, once it is gone) use the pipe."""
        with self._arena_lock:
            arena = self.arena
        if arena is not None:
            arena.close()

    def _send_loop(self):
        try:
            while (msg := self._outbox.get()) is not _STOP:
                self._tasks_w.send(msg)
        except (OSError, ValueError, pickle.PicklingError):  # the worker is gone
            self.broken = True
        finally:
            self.broken = True
            self._tasks_w.close()

    def _receive_loop(self):
        try:
            while True:
                msg = self._events_r.recv()
                self._events.put((self.worker, self.generation, msg))
        except (EOFError, OSError, pickle.UnpicklingError):
            pass
        finally:
            self.broken = True
            self._outbox.put(_STOP)
            self.proc.join(timeout=5)
            code = self.proc.exitcode
            self.close_arena()
            self._events.put((self.worker, self.generation, ("exited", code)))
            self._events_r.close()

    def kill(self):
        """SIGKILL (works on a stopped process too); the threads wind down on their own."""
        self.broken = True
        if self.proc.is_alive():
            self.proc.kill()
        self._outbox.put(_STOP)

    def stop(self):
        self.send(("stop",))
        self._outbox.put(_STOP)


class LocalBackend:
    """N worker processes, each holding the model, fed through pipes.

    Parameters
    ----------
    factory : callable, torch module or "module:attr" string, or a list of N of them
        Picklable; each worker builds its model from it once at start-up
        (a list gives each worker its own, e.g. ParM's parity model).
    n_workers : int
    start_method : str, optional
        multiprocessing start method; default "forkserver" on Linux (children
        fork from a clean server that has ``preload`` imported), else "spawn".
    preload : sequence of str, optional
        Modules the forkserver imports once, so that workers fork with them
        loaded (e.g. ``["torch"]``). Default: this package's worker module
        plus the factory's own ``preload`` attribute, if it has one.
    threads : int
        Compute threads per worker (torch/OpenMP).
    start_timeout : float
        Seconds to wait for every worker to build its model.
    shared_min_bytes : int or None
        Tasks whose coded inputs take at least this many bytes go through
        shared memory (:mod:`gencc.runtime.shared`) instead of the pipe;
        None: always the pipe. Default 64 KiB: ``bench_overhead.py``'s
        transport table measured the pipe at 0.84x and 1.11x the shared
        path's wall time (two runs) on 32 KB tasks, a wash, and 1.26-1.81x
        on 400 KB, 2.0-4.2x on 4 MB.

    Attributes
    ----------
    shared_tasks, piped_tasks : int
        Tasks sent through shared memory and through the pipe.

    Notes
    -----
    Implements :class:`~gencc.runtime.backend.Backend`. Nothing here blocks
    the caller on a worker: tasks go through a per-worker outbox drained by a
    sender thread, and events come back through one queue fed by a receiver
    thread per worker.
    """

    name = "local"

    def __init__(self, factory, n_workers, *, start_method=None, preload=None, threads=1, start_timeout=120.0,
                 shared_min_bytes=64 << 10):
        factories = list(factory) if isinstance(factory, (list, tuple)) else [factory] * n_workers
        if len(factories) != n_workers:
            raise ValueError(f"model must be one factory or one per worker ({n_workers}), got {len(factories)}")
        for fac in {id(f): f for f in factories}.values():
            try:
                pickle.dumps(fac)
            except Exception as exc:
                raise TypeError(
                    f"model must be picklable to reach the worker processes (a module-level factory, a torch "
                    f"module or a 'package.module:factory' string), got {type(fac).__name__}: {exc}"
                ) from None
        self._factories = factories
        self.factory = factory
        self.n_workers = n_workers
        method = start_method or ("forkserver" if sys.platform.startswith("linux") else "spawn")
        self._ctx = mp.get_context(method)
        if preload is None:
            preload = ("gencc.runtime.worker", *dict.fromkeys(m for f in factories for m in getattr(f, "preload", ())))
        if method == "forkserver" and preload:
            self._ctx.set_forkserver_preload(list(preload))
        self.threads = threads
        self.start_timeout = start_timeout
        self.shared_min_bytes = shared_min_bytes
        self.shared_tasks = self.piped_tasks = 0
        self._events: queue.SimpleQueue = queue.SimpleQueue()
        self._workers: list[_Incarnation | None] = [None] * n_workers
        self._old: list[_Incarnation] = []
        self._generations = itertools.count()
        self._restarts = [0] * n_workers
        self.pids = [None] * n_workers
        self.pid_history: list[int] = []  # every worker process started, for leak checks

    def _spawn(self, w):
        self._workers[w] = _Incarnation(self._ctx, self._factories[w], w, self.threads, next(self._generations),
                                        self._events)
        self.pids[w] = self._workers[w].pid
        self.pid_history.append(self.pids[w])

    def start(self):
        """Start all workers and wait until each has built its model."""
        try:
            for w in range(self.n_workers):
                self._spawn(w)
            pending = set(range(self.n_workers))
            deadline = time.monotonic() + self.start_timeout
            while pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"workers {sorted(pending)} did not build the model within "
                                       f"{self.start_timeout} s")
                try:
                    w, _, msg = self._events.get(timeout=left)
                except queue.Empty:
                    continue
                if msg[0] == "init_error":
                    raise ValueError(f"model cannot be built on worker {w}:\n{msg[1]}")
                if msg[0] == "exited":
                    raise ValueError(f"worker {w} died while building the model (exit code {msg[1]})")
                pending.discard(w)
        except BaseException:  # a failure or an interruption leaves nothing running
            self.shutdown()
            raise

    def submit(self, w, task: Task) -> bool:
        inc = self._workers[w]
        if inc is None:
            return False
        if self.shared_min_bytes is not None:
            task = inc.share(task, self.shared_min_bytes)
        shared = not isinstance(task.x, np.ndarray)
        if not inc.send(("task", task)):
            if shared:
                inc.task_ended(task.batch, task.slot)
            return False
        if shared:
            self.shared_tasks += 1
        else:
            self.piped_tasks += 1
        return True

    def cancel(self, w, batch):
        inc = self._workers[w]
        if inc is not None:
            inc.send(("cancel", batch))

    def poll(self, timeout: float) -> list:
        """Events from the current workers, waiting up to ``timeout`` for the first."""
        events = []
        try:
            item = self._events.get(timeout=timeout)
            while True:
                events.extend(self._translate(*item))
                item = self._events.get_nowait()
        except queue.Empty:
            pass
        self._old = [inc for inc in self._old if inc.proc.is_alive()]
        return events

    def _translate(self, w, generation, msg):
        inc = self._workers[w]
        if inc is None or inc.generation != generation:
            return []  # from an incarnation the executor already replaced
        if not isinstance(msg, tuple):
            if isinstance(msg, (TaskResult, TaskError, TaskCancelled)):
                inc.task_ended(msg.batch, msg.slot)
            return [msg]  # a task event
        if msg[0] == "ready":
            self.pids[w] = msg[1]
            return [WorkerReady(w)]
        if msg[0] == "init_error":
            log.warning("worker %d failed to build its model on restart:\n%s", w, msg[1])
            return []  # its "exited" follows and reports the death once
        return [WorkerDied(w, f"crashed (exit code {msg[1]})")]  # "exited"

    def restart(self, w):
        """Kill worker w (if alive) and start a fresh one in its place; does not wait."""
        old = self._workers[w]
        if old is not None:
            old.kill()
            self._old.append(old)
        self._restarts[w] += 1
        self._spawn(w)

    @property
    def restarts(self) -> list[int]:
        return list(self._restarts)

    def alive(self) -> list[bool]:
        return [inc is not None and inc.proc.is_alive() for inc in self._workers]

    def shutdown(self, timeout: float = 5.0):
        """Stop every worker; kill those that do not stop within ``timeout``."""
        incs = [inc for inc in self._workers if inc is not None] + self._old
        for inc in incs:
            inc.stop()
        deadline = time.monotonic() + timeout
        for inc in incs:
            inc.proc.join(timeout=max(0.0, deadline - time.monotonic()))
            if inc.proc.is_alive():
                inc.proc.kill()
                inc.proc.join(timeout=2)
            inc.close_arena()
        self._workers = [None] * self.n_workers
        self._old = []
