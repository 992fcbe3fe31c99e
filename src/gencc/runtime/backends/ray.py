"""The cluster backend: Ray actors holding the model, gathered with ``ray.wait``.

Needs the optional extra: ``pip install gencc[ray]``.
"""

from __future__ import annotations

import asyncio
import os
import time

import numpy as np

from ..events import TaskCancelled, TaskError, TaskResult, WorkerDied, WorkerReady
from ..faults import run_faulty
from .ray_loopback import loopback_ray_init
from .worker import build_model, compute, set_threads

__all__ = ["RayBackend"]


class _RayWorker:
    """Actor body: builds the model once; ``run`` is async so that an
    injected delay (a sleep) can be cancelled like the local backend's.
    How many ``run`` calls overlap is the actor's ``max_concurrency``."""

    def __init__(self, factory, threads):
        set_threads(threads)
        self.f = build_model(factory)
        set_threads(threads)  # torch, if the model imported it

    def ready(self):
        import ray

        return os.getpid(), ray.get_runtime_context().get_node_id()

    async def run(self, task):
        start = time.monotonic()
        if task.fault.delay:
            await asyncio.sleep(task.fault.delay)
        # the input is a read-only view of the object store: f gets a copy it may modify
        y = run_faulty(lambda: compute(self.f, task.x, task.stacked, copy_input=True), task.fault)
        return y, time.monotonic() - start


class RayBackend:
    """N Ray actors holding the model; the executor restarts them, not Ray.

    Parameters
    ----------
    factory : callable, torch module or "module:attr" string, or a list of N of them
    n_workers : int
    address : str, optional
        Address of an existing Ray cluster; default starts Ray on this machine
        (every socket on 127.0.0.1, no dashboard) unless Ray is already
        initialised.
    threads : int
        Compute threads per actor.
    num_cpus : float
        CPUs each actor reserves (0 lets N actors share a small machine).
    start_timeout : float
    max_concurrency : int
        Tasks an actor runs at once. 1 (the default) makes an actor serve its
        tasks one after another, in order, like a local worker process or a
        model server with one execution slot: a task sent to a busy (slow)
        worker waits behind it. Larger values let an async actor overlap its
        tasks (Ray's default for async actors is 1000), which hides a slow
        task's delay from the tasks after it, so straggling then lasts one
        task, not a queue.
    resources : dict or list of dict, optional
        Ray custom resources each actor requires (one dict for all, or one per
        worker): how workers are placed on the nodes of a cluster, e.g.
        ``[{"node_a": 1}] * 4 + [{"node_b": 1}] * 4`` with each node started
        with its own resource (``ray start ... --resources '{"node_a": 8}'``).
        A worker whose node is lost dies (``WorkerDied``); its replacement
        waits, not ready, until a node with its resource joins (the
        executor's ``restart_timeout`` bounds that wait, then it tries again).

    Attributes
    ----------
    nodes : list of str or None
        The Ray node id each actor runs on (once ready).

    Notes
    -----
    Implements :class:`~gencc.runtime.backends.Backend`. Actors run with
    ``max_restarts=0``: a dead actor is reported once as ``WorkerDied`` and
    replaced when the executor calls :meth:`restart`; results of a replaced
    actor are dropped.
    """

    name = "ray"

    def __init__(self, factory, n_workers, *, address=None, threads=1, num_cpus=0.0, start_timeout=180.0,
                 max_concurrency=1, resources=None):
        try:
            import ray
        except ImportError:
            raise ImportError("the ray backend needs Ray: pip install 'gencc[ray]'") from None
        self._ray = ray
        self.factory, self.n_workers = factory, n_workers
        self.address, self.threads, self.num_cpus = address, threads, num_cpus
        self.start_timeout = start_timeout
        if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int) or max_concurrency < 1:
            raise ValueError(f"max_concurrency must be an int >= 1, got {max_concurrency!r}")
        self.max_concurrency = max_concurrency
        if resources is not None and not isinstance(resources, dict) and (
                not isinstance(resources, (list, tuple)) or len(resources) != n_workers
                or not all(isinstance(r, dict) for r in resources)):
            raise ValueError(f"resources must be a dict or a list of {n_workers} dicts (one per worker), "
                             f"got {resources!r:.200}")
        self.resources = resources
        self.nodes = [None] * n_workers
        self._owns_ray = False
        self._actors = []
        self._generation = [0] * n_workers
        self._refs = {}  # ObjectRef -> (worker, generation, batch, slot)
        self._ready_refs = {}  # ObjectRef -> (worker, generation)
        self.pids = [None] * n_workers
        self.pid_history: list[int] = []  # every actor process seen, for leak checks
        self._restarts = [0] * n_workers

    def _new_actor(self, w):
        res = self.resources[w] if isinstance(self.resources, (list, tuple)) else self.resources
        actor = self._ray.remote(max_restarts=0, max_task_retries=0, num_cpus=self.num_cpus,
                                 max_concurrency=self.max_concurrency, resources=res or None)(_RayWorker)
        factory = self.factory[w] if isinstance(self.factory, (list, tuple)) else self.factory
        return actor.remote(factory, self.threads)

    def start(self):
        ray = self._ray
        try:
            if not ray.is_initialized():
                if self.address:
                    ray.init(address=self.address, log_to_driver=False, configure_logging=False)
                else:
                    loopback_ray_init()
                self._owns_ray = True
            self._actors = [self._new_actor(w) for w in range(self.n_workers)]
            try:
                ready = ray.get([a.ready.remote() for a in self._actors], timeout=self.start_timeout)
                self.pids, self.nodes = [p for p, _ in ready], [n for _, n in ready]
                self.pid_history.extend(self.pids)
            except Exception as exc:
                raise ValueError(f"model cannot be built on the Ray actors: {exc}") from exc
        except BaseException:
            self.shutdown()
            raise

    def submit(self, w, task) -> bool:
        ref = self._actors[w].run.remote(task)
        self._refs[ref] = (w, self._generation[w], task.batch, task.slot)
        return True

    def cancel(self, w, batch):
        """Ask Ray to cancel the batch's tasks on actor w. Each still ends in an
        event when Ray settles it; a hung actor never settles it, so its task
        stays the oldest and the executor's hang timer sees it."""
        for ref, (rw, gen, rb, slot) in self._refs.items():
            if rw == w and rb == batch:
                self._ray.cancel(ref)

    def poll(self, timeout: float) -> list:
        ray = self._ray
        events = []
        refs = list(self._refs) + list(self._ready_refs)
        if not refs:
            time.sleep(timeout)
            return events
        ready, _ = ray.wait(refs, num_returns=1, timeout=timeout)
        if ready:
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        for ref in ready:
            if ref in self._ready_refs:
                w, gen = self._ready_refs.pop(ref)
                try:
                    pid, node = ray.get(ref)
                except Exception as exc:
                    if gen == self._generation[w]:
                        events.append(WorkerDied(w, f"actor failed to start: {type(exc).__name__}"))
                    continue
                if gen == self._generation[w]:
                    self.pids[w], self.nodes[w] = pid, node
                    self.pid_history.append(pid)
                    events.append(WorkerReady(w))
                continue
            w, gen, batch, slot = self._refs.pop(ref)
            if gen != self._generation[w]:
                continue
            try:
                y, secs = ray.get(ref)
                # a copy: from the object store, ray.get gives a read-only view it may hold
                events.append(TaskResult(w, batch, slot, np.array(y), secs))
            except ray.exceptions.RayActorError as exc:
                self._generation[w] += 1  # drop the rest of the dead actor's tasks: the executor erases them
                events.append(WorkerDied(w, f"actor died: {type(exc).__name__}"))
            except ray.exceptions.TaskCancelledError:
                events.append(TaskCancelled(w, batch, slot))
            except Exception as exc:  # the task raised: an erasure
                events.append(TaskError(w, batch, slot, f"{type(exc).__name__}: {str(exc)[:200]}"))
        return events

    def restart(self, w):
        """Kill actor w and start a fresh one; its pending tasks are forgotten."""
        self._restarts[w] += 1
        self._generation[w] += 1
        try:
            self._ray.kill(self._actors[w], no_restart=True)
        except Exception:  # already gone
            pass
        for ref, (rw, *_rest) in list(self._refs.items()):
            if rw == w:
                del self._refs[ref]
        self._actors[w] = self._new_actor(w)
        self._ready_refs[self._actors[w].ready.remote()] = (w, self._generation[w])

    @property
    def restarts(self) -> list[int]:
        return list(self._restarts)

    def shutdown(self, timeout: float = 5.0):
        ray = self._ray
        for a in self._actors:
            try:
                ray.kill(a, no_restart=True)
            except Exception:  # already gone
                pass
        self._actors, self._refs, self._ready_refs = [], {}, {}
        if self._owns_ray:
            ray.shutdown()
            self._owns_ray = False
