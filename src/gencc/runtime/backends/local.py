"""The embedded backend: a pool of worker processes on this machine."""

from __future__ import annotations

import dataclasses
import fcntl
import itertools
import logging
import multiprocessing as mp
import os
import pickle
import selectors
import signal
import struct
import sys
import threading
import time

import numpy as np

from ..events import Task, TaskCancelled, TaskError, TaskResult, WorkerDied, WorkerReady
from .shared import Arena, arena_size
from .worker import worker_main

__all__ = ["LocalBackend"]

log = logging.getLogger("gencc.runtime")

_PIPE_BYTES = 1 << 20
_EXIT_WAIT_S = 5.0  # after a worker's pipe closes, how long to wait for its exit code


def frame(msg) -> bytes:
    """``msg`` pickled and framed as :meth:`multiprocessing.connection.Connection.send` frames it
    (a signed 4-byte big-endian length, or -1 and an 8-byte one), so the worker reads it with ``recv``."""
    data = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
    n = len(data)
    head = struct.pack("!i", n) if n <= 0x7FFFFFFF else struct.pack("!i", -1) + struct.pack("!Q", n)
    return head + data


def unframe(buf: bytearray) -> list:
    """The whole messages at the front of ``buf``, unpickled, removed from it; a partial one stays."""
    out, pos = [], 0
    while len(buf) - pos >= 4:
        (n,), head = struct.unpack_from("!i", buf, pos), 4
        if n == -1:
            if len(buf) - pos < 12:
                break
            (n,), head = struct.unpack_from("!Q", buf, pos + 4), 12
        if len(buf) - pos - head < n:
            break
        out.append(pickle.loads(memoryview(buf)[pos + head:pos + head + n]))
        pos += head + n
    del buf[:pos]
    return out


def _start_time(pid: int) -> int | None:
    """A process's start time in clock ticks since boot (Linux ``/proc``), or None if it is gone
    (or the system has no ``/proc``)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    fields = stat[stat.rindex(b")") + 2:].split()  # after the command name, which may hold spaces
    return int(fields[19]) if fields[0] != b"Z" else None  # field 22 of proc(5); a zombie is gone


def _widen(fd):
    """Let the pipe hold up to 1 MiB (Linux; 64 KiB by default) where the system allows: a large task
    then takes a few writes, each after a wake-up of the poll, not one per 64 KiB."""
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
    except (AttributeError, OSError):  # not Linux, or above /proc/sys/fs/pipe-max-size
        pass


class _Incarnation:
    """One worker process and the master's ends of its two pipes, both non-blocking.

    No thread of its own: :meth:`send` writes what the task pipe takes at once
    and keeps the rest for the backend's poll to write when the pipe drains,
    so a worker that stops reading (hung, SIGSTOP) never blocks the caller;
    the poll reads the events pipe and sees the process's death when it closes.
    """

    def __init__(self, ctx, factory, worker, threads, generation, wake):
        tasks_r, tasks_w = ctx.Pipe(duplex=False)
        events_r, events_w = ctx.Pipe(duplex=False)
        self.worker, self.generation = worker, generation
        self.proc = ctx.Process(target=worker_main, args=(tasks_r, events_w, factory, worker, threads, os.getpid()),
                                name=f"gencc-worker-{worker}", daemon=True)
        self.proc.start()
        tasks_r.close()
        events_w.close()
        self.pid = self.proc.pid
        self._started = _start_time(self.pid)  # tells this process from a later one given its pid
        self._tasks_w, self._events_r = tasks_w, events_r
        self.write_fd, self.read_fd = tasks_w.fileno(), events_r.fileno()
        os.set_blocking(self.write_fd, False)
        os.set_blocking(self.read_fd, False)
        _widen(self.write_fd)  # the task pipe only: widened pipes count against the user's pipe pages
        self._out = bytearray()  # framed messages the pipe did not take yet
        self._in = bytearray()  # bytes read, not yet a whole message
        self._lock = threading.Lock()  # the task pipe's writes and ``_out``
        self._wake = wake
        self.broken = False  # no more sends: the worker is gone, killed or told to stop
        self.closed_at: float | None = None  # when its events pipe closed (the process is ending)
        self.arena: Arena | None = None  # created at this worker's first large task
        self._arena_lock = threading.Lock()

    def kill(self):
        """SIGKILL the process and the processes f started (its process group), also when its
        parent (the forkserver) is gone and ``multiprocessing`` can no longer tell whether it runs."""
        if self._started is not None and _start_time(self.pid) == self._started:  # this very process
            try:
                if os.getpgid(self.pid) == self.pid:
                    os.killpg(self.pid, signal.SIGKILL)
                else:  # before it made its group
                    os.kill(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):  # ended meanwhile
                pass
        elif self.proc.is_alive():  # no /proc: multiprocessing's own kill
            self.proc.kill()

    def send(self, msg) -> bool:
        """Write ``msg`` now, as far as the pipe takes it; False if the worker is gone or ``msg``
        cannot be pickled (the executor erases the task, "send failed")."""
        try:
            data = frame(msg)
        except Exception as exc:  # e.g. a fault's parameters that do not pickle
            log.warning("worker %d: message cannot be pickled (%s): not sent", self.worker, exc)
            return False
        with self._lock:
            if self.broken:
                return False
            if not self._out:
                try:
                    data = data[os.write(self.write_fd, data):]
                except BlockingIOError:
                    pass
                except OSError:  # EPIPE: the worker closed its end (it is gone)
                    self.broken = True
                    return False
                if not data:
                    return True
                self._out += data
                self._wake()  # the poll now watches this pipe for room
            else:
                self._out += data
        return True

    def wants_write(self) -> bool:
        return bool(self._out) and not self.broken

    def flush(self):
        """Write what the pipe takes of the pending bytes (the poll, when the pipe has room)."""
        with self._lock:
            if self.broken:  # closed (its fd number may belong to another file by now)
                return
            try:
                del self._out[:os.write(self.write_fd, self._out)]
            except BlockingIOError:
                pass
            except OSError:
                self.broken = True
                self._out.clear()

    def read(self) -> tuple[list, bool]:
        """Messages readable now, and whether the events pipe closed (the process ended)."""
        closed = False
        while True:
            try:
                chunk = os.read(self.read_fd, 1 << 20)
            except BlockingIOError:
                break
            except OSError:
                closed = True
                break
            if not chunk:
                closed = True
                break
            self._in += chunk
        try:
            msgs = unframe(self._in)
        except Exception as exc:  # a corrupt stream: this worker is lost, not every worker's events
            log.warning("worker %d sent an unreadable message (%s): treating it as dead", self.worker, exc)
            self._in.clear()
            msgs, closed = [], True
        return msgs, closed

    def share(self, task: Task, min_bytes: int) -> Task:
        """``task`` with its coded inputs moved into this worker's arena, if they
        are at least ``min_bytes`` and fit; else ``task`` (sent through the pipe)."""
        x = task.x
        if not isinstance(x, np.ndarray) or x.nbytes < min_bytes or self.broken:
            return task
        with self._arena_lock:
            if self.broken:  # closing: its arena may be unlinked already
                return task
            if self.arena is None:
                self.arena = Arena(arena_size(x.nbytes))
                self.send(("arena", self.arena.name))
        where = self.arena.put((task.batch, task.slot), x)
        return task if where is None else dataclasses.replace(task, x=where)

    def task_ended(self, batch, slot):
        """Free the arena block of a task whose end has arrived."""
        if self.arena is not None and self.arena.free((batch, slot)):
            self.arena.mapped()  # the worker read a block: it has mapped the arena and removed its name

    def close_arena(self):
        """Unlink this worker's arena; later tasks of it (none, once it is gone) use the pipe."""
        with self._arena_lock:
            arena = self.arena
        if arena is not None:
            arena.close()

    def close_tasks(self):
        """No more sends; the worker reads the end of its task pipe once it has read what is in it."""
        with self._lock:
            self.broken = True
            self._out.clear()  # a partly written message ends the worker's reads, as the end does
            self._tasks_w.close()

    def close_events(self):
        self._events_r.close()



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
        shared memory (:mod:`gencc.runtime.backends.shared`) instead of the pipe;
        None: always the pipe. Default 64 KiB: ``bench_overhead.py``'s
        transport table measured the pipe at 0.77-1.17x the shared path's
        wall time (seven runs) on 32 KB tasks, a wash, and 1.26-1.81x on
        400 KB, 2.0-4.2x on 4 MB (1.43-2.41x and 1.59-2.64x with the
        non-blocking pipes of this version).

    Attributes
    ----------
    shared_tasks, piped_tasks : int
        Tasks sent through shared memory and through the pipe.

    Notes
    -----
    Implements :class:`~gencc.runtime.backends.Backend`. Nothing here blocks
    the caller on a worker, and no thread stands between the caller and the
    pipes: :meth:`submit` writes a task into its worker's pipe at once (the
    pipe's non-blocking end; what does not fit waits in a buffer), and
    :meth:`poll` waits on every worker's events pipe with one
    :mod:`selectors` call, reads whole messages and writes the buffers the
    pipes have room for. The first version had a sender and a receiver thread
    per worker, 2N threads whose hand-offs cost the master CPU on every task.
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
            preload = ("gencc.runtime.backends.worker", *dict.fromkeys(m for f in factories for m in getattr(f, "preload", ())))
        if method == "forkserver" and preload:
            self._ctx.set_forkserver_preload(list(preload))
        self.threads = threads
        self.start_timeout = start_timeout
        self.shared_min_bytes = shared_min_bytes
        self.shared_tasks = self.piped_tasks = 0
        self._workers: list[_Incarnation | None] = [None] * n_workers
        self._live: dict[int, _Incarnation] = {}  # events pipe fd -> incarnation, until its process ended
        self._live_lock = threading.Lock()
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        # the selector's owner: one poll at a time, and a pipe is unregistered before it is closed
        # (a closed fd's number is reused by the next pipe)
        self._poll_lock = threading.RLock()
        self._generations = itertools.count()
        self._restarts = [0] * n_workers
        self.pids = [None] * n_workers
        self.pid_history: list[int] = []  # every worker process started, for leak checks

    def _wake(self):
        try:
            os.write(self._wake_w, b"\0")
        except (BlockingIOError, OSError):  # full: a wake-up is already pending; -1: shut down
            pass

    def _forget(self, fd, inc):
        """Unregister ``inc``'s pipe ``fd`` (not another pipe that reuses the number)."""
        key = None if self._selector is None else self._selector.get_map().get(fd)
        if key is not None and key.data is inc:
            self._selector.unregister(fd)

    def _close_tasks(self, inc):
        """Close ``inc``'s task pipe (no more sends), unregistered first."""
        with self._poll_lock:
            self._forget(inc.write_fd, inc)
            inc.close_tasks()

    def _spawn(self, w):
        inc = _Incarnation(self._ctx, self._factories[w], w, self.threads, next(self._generations), self._wake)
        with self._live_lock:
            self._live[inc.read_fd] = inc
            self._workers[w] = inc
        self.pids[w] = inc.pid
        self.pid_history.append(inc.pid)
        self._wake()

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
                for w, _, msg in self._io(min(left, 0.1)):
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
        deadline = time.monotonic() + timeout
        while True:
            events = [ev for item in self._io(max(0.0, deadline - time.monotonic())) for ev in self._translate(*item)]
            if events or time.monotonic() >= deadline:
                return events

    def _io(self, timeout: float) -> list:
        """One wait on every pipe: ``(worker, generation, message)`` read, pending bytes written, and
        an ``("exited", code)`` for each process whose events pipe closed."""
        with self._poll_lock:
            if self._selector is None:  # shut down
                time.sleep(min(timeout, 0.05))
                return []
            with self._live_lock:
                live = list(self._live.values())
            self._watch(live)
            if any(inc.closed_at is not None for inc in live):  # exit codes come soon after: look again shortly
                timeout = min(timeout, 0.01)
            out = []
            for key, mask in self._selector.select(timeout):
                if key.fd == self._wake_r:
                    try:
                        while os.read(self._wake_r, 4096):
                            pass
                    except BlockingIOError:
                        pass
                    continue
                inc = key.data
                if mask & selectors.EVENT_WRITE:
                    inc.flush()
                if mask & selectors.EVENT_READ and inc.closed_at is None:
                    msgs, closed = inc.read()
                    out.extend((inc.worker, inc.generation, m) for m in msgs)
                    if closed:
                        inc.closed_at = time.monotonic()
                        self._forget(inc.read_fd, inc)
                        self._close_tasks(inc)
            for inc in live:
                if inc.closed_at is not None and self._ended(inc):
                    out.append((inc.worker, inc.generation, ("exited", inc.proc.exitcode)))
            return out

    def _watch(self, live):
        """Point the selector at every open events pipe and every task pipe with bytes waiting."""
        want = {}
        for inc in live:
            if inc.closed_at is None:
                want[inc.read_fd] = (selectors.EVENT_READ, inc)
            if inc.wants_write():
                want[inc.write_fd] = (selectors.EVENT_WRITE, inc)
        have = self._selector.get_map()
        for fd in [fd for fd in have if fd != self._wake_r and fd not in want]:
            self._selector.unregister(fd)
        for fd, (mask, inc) in want.items():
            key = have.get(fd)
            if key is None:
                self._selector.register(fd, mask, inc)
            elif key.events != mask or key.data is not inc:
                self._selector.modify(fd, mask, inc)

    def _ended(self, inc) -> bool:
        """Whether the process whose pipe closed has an exit code; then it is forgotten, its pipes
        closed and its arena unlinked. One still running ``_EXIT_WAIT_S`` after closing its events
        pipe (its own code closed the descriptor) can report nothing more: it is killed."""
        if inc.proc.exitcode is None:
            if time.monotonic() - inc.closed_at < _EXIT_WAIT_S:
                return False
            log.warning("worker %d closed its events pipe but did not exit: killing it", inc.worker)
            inc.proc.kill()
            inc.proc.join(timeout=_EXIT_WAIT_S)  # the forkserver reaps it and reports the code
        with self._live_lock:
            self._live.pop(inc.read_fd, None)
        inc.close_events()
        inc.close_arena()
        return True

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
        """Kill worker w (if alive) and start a fresh one in its place; does not wait.
        After :meth:`shutdown` it does nothing: no process outlives the backend."""
        with self._poll_lock:  # shutdown closes the selector under it: no spawn after its snapshot
            if self._selector is None:
                return
            old = self._workers[w]
            if old is not None:  # SIGKILL works on a stopped process too; the poll sees its pipe close
                old.kill()
                self._close_tasks(old)
            self._restarts[w] += 1
            self._spawn(w)

    @property
    def restarts(self) -> list[int]:
        return list(self._restarts)

    def alive(self) -> list[bool]:
        return [inc is not None and inc.proc.is_alive() for inc in self._workers]

    def shutdown(self, timeout: float = 5.0):
        """Stop every worker; kill those that do not stop within ``timeout``."""
        with self._poll_lock:
            if self._selector is not None:
                self._selector.close()
                self._selector = None
                wake, self._wake_w = (self._wake_r, self._wake_w), -1
                for fd in wake:
                    os.close(fd)
        with self._live_lock:
            incs = list(self._live.values())
            self._live = {}
            self._workers = [None] * self.n_workers
        for inc in incs:  # ask each to stop after what it holds, then end its task pipe
            inc.send(("stop",))
            inc.close_tasks()
        deadline = time.monotonic() + timeout
        running = list(incs)
        while running and time.monotonic() < deadline:
            for inc in running:  # read and drop what they still send: a worker blocked writing a
                if inc.closed_at is None and inc.read()[1]:  # large result would never see the end
                    inc.closed_at = time.monotonic()
            running = [inc for inc in running if inc.proc.is_alive()]
            if running:
                time.sleep(0.01)
        for inc in incs:
            inc.proc.join(timeout=max(0.0, deadline - time.monotonic()))
            if inc.proc.is_alive():
                inc.proc.kill()
                inc.proc.join(timeout=2)
            inc.kill()  # one whose forkserver is gone: multiprocessing cannot tell it still runs
            inc.close_events()
            inc.close_arena()
