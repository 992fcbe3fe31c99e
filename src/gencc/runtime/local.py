"""The embedded backend: a pool of worker processes on this machine."""

from __future__ import annotations

import multiprocessing as mp
import sys
import threading
import time
from multiprocessing.connection import wait

from .worker import worker_main

__all__ = ["LocalBackend"]


class LocalBackend:
    """N worker processes, each holding the model, fed through one pipe each.

    Parameters
    ----------
    factory : callable, torch module or "module:attr" string
        Picklable; each worker builds the model from it once at start-up.
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
    """

    name = "local"

    def __init__(self, factory, n_workers, *, start_method=None, preload=None, threads=1, start_timeout=120.0):
        self.factory = factory
        self.n_workers = n_workers
        method = start_method or ("forkserver" if sys.platform.startswith("linux") else "spawn")
        self._ctx = mp.get_context(method)
        if preload is None:
            preload = ("gencc.runtime.worker", *getattr(factory, "preload", ()))
        if method == "forkserver" and preload:
            self._ctx.set_forkserver_preload(list(preload))
        self.threads = threads
        self.start_timeout = start_timeout
        self._procs = [None] * n_workers
        self._conns = [None] * n_workers
        self._locks = [threading.Lock() for _ in range(n_workers)]
        self._restarts = [0] * n_workers
        self.pids = [None] * n_workers

    def _spawn(self, w):
        parent, child = self._ctx.Pipe(duplex=True)
        p = self._ctx.Process(target=worker_main, args=(child, self.factory, w, self.threads),
                              name=f"gencc-worker-{w}", daemon=True)
        p.start()
        child.close()
        self._procs[w], self._conns[w] = p, parent

    def start(self):
        """Start all workers and wait until each has built its model."""
        for w in range(self.n_workers):
            self._spawn(w)
        pending = set(range(self.n_workers))
        deadline = time.monotonic() + self.start_timeout
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                self.shutdown()
                raise TimeoutError(f"workers {sorted(pending)} did not build the model within {self.start_timeout} s")
            ready = wait([self._conns[w] for w in pending] + [self._procs[w].sentinel for w in pending], left)
            for w in list(pending):
                if self._conns[w] in ready:
                    try:
                        msg = self._conns[w].recv()
                    except EOFError:
                        msg = ("init_error", w, "worker exited during start-up")
                    if msg[0] == "init_error":
                        self.shutdown()
                        raise ValueError(f"model cannot be built on worker {w}:\n{msg[2]}")
                    self.pids[w] = msg[2]
                    pending.discard(w)
                elif self._procs[w].sentinel in ready:
                    code = self._procs[w].exitcode
                    self.shutdown()
                    raise ValueError(f"worker {w} died while building the model (exit code {code})")

    def send(self, w, msg) -> bool:
        """Send a message to worker w; False if its pipe is gone."""
        with self._locks[w]:
            try:
                self._conns[w].send(msg)
                return True
            except (BrokenPipeError, OSError, AttributeError):
                return False

    def submit(self, w, batch, slot, x, fault) -> bool:
        return self.send(w, ("task", batch, slot, x, fault))

    def cancel(self, w, batch):
        self.send(w, ("cancel", batch))

    def poll(self, timeout: float) -> list[tuple]:
        """Events from workers: result, error, ready, died."""
        conns = {c: w for w, c in enumerate(self._conns) if c is not None}
        sentinels = {p.sentinel: w for w, p in enumerate(self._procs) if p is not None}
        events = []
        for obj in wait(list(conns) + list(sentinels), timeout):
            if obj in conns:
                w = conns[obj]
                try:
                    while obj.poll():
                        msg = obj.recv()
                        if msg[0] == "ready":
                            self.pids[w] = msg[2]
                        events.append(msg)
                except (EOFError, OSError):
                    pass
        for sent, w in sentinels.items():
            p = self._procs[w]
            if p is not None and not p.is_alive():
                events.append(("died", w, p.exitcode))
                self.restart(w)
        return events

    def restart(self, w):
        """Kill worker w (if alive) and start a fresh one in its place."""
        p, c = self._procs[w], self._conns[w]
        with self._locks[w]:
            if p is not None and p.is_alive():
                p.kill()
            if p is not None:
                p.join(timeout=5)
            if c is not None:
                c.close()
            self._restarts[w] += 1
            self._spawn(w)

    @property
    def restarts(self) -> list[int]:
        return list(self._restarts)

    def alive(self) -> list[bool]:
        return [p is not None and p.is_alive() for p in self._procs]

    def shutdown(self, timeout: float = 5.0):
        """Stop every worker; kill those that do not stop within ``timeout``."""
        for w in range(self.n_workers):
            if self._conns[w] is not None:
                self.send(w, ("stop",))
        deadline = time.monotonic() + timeout
        for w, p in enumerate(self._procs):
            if p is None:
                continue
            p.join(timeout=max(0.0, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join(timeout=2)
            if self._conns[w] is not None:
                self._conns[w].close()
            self._procs[w], self._conns[w] = None, None
