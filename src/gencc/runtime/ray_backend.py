"""The cluster backend: Ray actors holding the model, gathered with ``ray.wait``.

Needs the optional extra: ``pip install gencc[ray]``.
"""

from __future__ import annotations

import asyncio
import os
import time

from .faults import apply_output_fault
from .worker import build_model, compute, set_threads

__all__ = ["RayBackend"]


class _RayWorker:
    """Actor body: builds the model once; ``run`` is async so that an
    injected delay (a sleep) can be cancelled like the local backend's."""

    def __init__(self, factory, threads):
        set_threads(threads)
        self.f = build_model(factory)

    def ready(self):
        return os.getpid()

    async def run(self, batch, slot, x, fault):
        start = time.monotonic()
        if fault.delay:
            await asyncio.sleep(fault.delay)
        if fault.kind == "crash":
            os._exit(17)
        if fault.kind == "hang":
            await asyncio.sleep(10**6)
        if fault.kind == "error":
            raise RuntimeError("injected fault")
        return apply_output_fault(compute(self.f, x), fault.kind), time.monotonic() - start


class RayBackend:
    """N Ray actors, restarted by Ray when they crash.

    Parameters
    ----------
    factory : callable, torch module or "module:attr" string
    n_workers : int
    address : str, optional
        Address of an existing Ray cluster; default starts Ray on this machine
        (loopback only, no dashboard) unless Ray is already initialised.
    threads : int
        Compute threads per actor.
    num_cpus : float
        CPUs each actor reserves (0 lets N actors share a small machine).
    start_timeout : float
    """

    name = "ray"

    def __init__(self, factory, n_workers, *, address=None, threads=1, num_cpus=0.0, start_timeout=180.0):
        try:
            import ray
        except ImportError:
            raise ImportError("the ray backend needs Ray: pip install 'gencc[ray]'") from None
        self._ray = ray
        self.factory, self.n_workers = factory, n_workers
        self.address, self.threads, self.num_cpus = address, threads, num_cpus
        self.start_timeout = start_timeout
        self._owns_ray = False
        self._refs = {}  # ObjectRef -> (worker, batch, slot)
        self.pids = [None] * n_workers
        self._restarts = [0] * n_workers

    def start(self):
        ray = self._ray
        if not ray.is_initialized():
            kw = {"address": self.address} if self.address else {
                "include_dashboard": False, "_node_ip_address": "127.0.0.1"}
            ray.init(log_to_driver=False, configure_logging=False, **kw)
            self._owns_ray = True
        actor = ray.remote(max_restarts=-1, max_task_retries=0, num_cpus=self.num_cpus)(_RayWorker)
        self._actors = [actor.remote(self.factory, self.threads) for _ in range(self.n_workers)]
        try:
            self.pids = ray.get([a.ready.remote() for a in self._actors], timeout=self.start_timeout)
        except Exception as exc:
            self.shutdown()
            raise ValueError(f"model cannot be built on the Ray actors: {exc}") from exc

    def submit(self, w, batch, slot, x, fault) -> bool:
        self._refs[self._actors[w].run.remote(batch, slot, x, fault)] = (w, batch, slot)
        return True

    def cancel(self, w, batch):
        for ref, (rw, rb, _) in list(self._refs.items()):
            if rw == w and rb == batch:
                del self._refs[ref]
                self._ray.cancel(ref)

    def poll(self, timeout: float) -> list[tuple]:
        ray = self._ray
        if not self._refs:
            time.sleep(timeout)
            return []
        refs = list(self._refs)
        ready, _ = ray.wait(refs, num_returns=1, timeout=timeout)
        if ready:
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        events = []
        for ref in ready:
            w, batch, slot = self._refs.pop(ref)
            try:
                y, secs = ray.get(ref)
                events.append(("result", w, batch, slot, y, secs))
            except ray.exceptions.RayActorError as exc:
                events.append(("error", w, batch, slot, f"actor died: {type(exc).__name__}", 0.0))
            except ray.exceptions.TaskCancelledError:
                continue
            except Exception as exc:  # the task raised: an erasure
                events.append(("error", w, batch, slot, f"{type(exc).__name__}: {str(exc)[:200]}", 0.0))
        return events

    def restart(self, w):
        """Kill actor w; Ray restarts it (its pending tasks fail as erasures)."""
        self._restarts[w] += 1
        self._ray.kill(self._actors[w], no_restart=False)

    @property
    def restarts(self) -> list[int]:
        return list(self._restarts)

    def shutdown(self, timeout: float = 5.0):
        ray = self._ray
        for a in getattr(self, "_actors", []):
            try:
                ray.kill(a, no_restart=True)
            except Exception:  # already gone
                pass
        self._actors, self._refs = [], {}
        if self._owns_ray:
            ray.shutdown()
            self._owns_ray = False
