"""Coded inputs through shared memory: the local backend's zero-pickle path for large tasks.

Through a pipe, a task's coded inputs are pickled, written in 64 KiB pieces,
read and unpickled: for lenet5 at B = 64 (400 KB per task) that costs about
0.5 ms of the master's CPU and as much of the worker's, several times the
memory copy itself. Instead, the master keeps one shared-memory segment per
worker process (an :class:`Arena`), copies each large task's inputs into a
free block of it, and sends only a :class:`SharedSlice` naming the block
through the pipe; the worker reads the block (:class:`ArenaView`).

A block is freed when its task ends (the worker's result, error or
cancellation has arrived), so the master never writes over inputs a worker
may still read. A worker that dies or is replaced takes its arena with it.
The worker removes the segment's name from ``/dev/shm`` as soon as it has
mapped it: from then on the memory lives exactly as long as the two
mappings, and nothing is left behind when either process is killed.
When a task does not fit (the arena is full of unfinished tasks, or the task
is larger than half the arena), it goes through the pipe as before: the
arena is a fast path, never a condition for progress.
"""

from __future__ import annotations

import bisect
import mmap
import os
import secrets
import threading
from dataclasses import dataclass
from multiprocessing import resource_tracker, shared_memory

import numpy as np

__all__ = ["Arena", "ArenaView", "SharedSlice", "arena_size"]

_ALIGN = 64  # bytes: cache-line aligned blocks


@dataclass(frozen=True)
class SharedSlice:
    """Where a task's coded inputs lie in its worker's arena.

    Attributes
    ----------
    offset : int
        Byte offset of the block.
    shape : tuple of int
    dtype : str
    """

    offset: int
    shape: tuple
    dtype: str


def arena_size(task_bytes: int, minimum: int = 16 << 20, tasks: int = 8) -> int:
    """Bytes of a worker's arena for tasks of ``task_bytes``: room for ``tasks``
    of them (a worker rarely holds more than ``max_in_flight`` tasks), at least
    ``minimum``."""
    return max(minimum, tasks * (-(-task_bytes // _ALIGN) * _ALIGN))


class Arena:
    """The master's side of one worker's shared-memory segment: a first-fit allocator.

    Parameters
    ----------
    size : int
        Bytes.

    Notes
    -----
    Blocks are keyed by the task they carry, ``(batch, slot)``. Frees come
    in any order (a cancelled task ends before the tasks ahead of it), so
    the used blocks are kept sorted by offset and a new block goes into the
    first gap that holds it: O(blocks in use), a handful per worker.
    """

    def __init__(self, size: int):
        # named after the master: whose segment it is shows in /dev/shm
        self._shm = shared_memory.SharedMemory(name=f"gencc_{os.getpid()}_{secrets.token_hex(6)}", create=True,
                                               size=size)
        self.name = self._shm.name
        self._tracked = True  # by the resource tracker, which unlinks it if this process dies first
        self.size = size
        self._lock = threading.Lock()
        self._starts: list[int] = []  # offsets of used blocks, sorted
        self._ends: dict[int, int] = {}  # offset -> end
        self._keys: dict[object, int] = {}  # task key -> offset
        self._closed = False

    def put(self, key, x: np.ndarray) -> SharedSlice | None:
        """Copy ``x`` into a free block for task ``key``; None if it does not fit."""
        x = np.ascontiguousarray(x)
        need = -(-max(x.nbytes, 1) // _ALIGN) * _ALIGN
        with self._lock:
            if self._closed or key in self._keys or 2 * need > self.size:
                return None
            offset = self._first_fit(need)
            if offset is None:
                return None
            i = bisect.bisect_left(self._starts, offset)
            self._starts.insert(i, offset)
            self._ends[offset] = offset + need
            self._keys[key] = offset
            np.ndarray(x.shape, x.dtype, buffer=self._shm.buf, offset=offset)[...] = x
        return SharedSlice(offset, tuple(x.shape), x.dtype.str)

    def _first_fit(self, need: int) -> int | None:
        prev_end = 0
        for start in self._starts:
            if start - prev_end >= need:
                return prev_end
            prev_end = self._ends[start]
        return prev_end if self.size - prev_end >= need else None

    def free(self, key) -> bool:
        """Release task ``key``'s block (no-op for a task sent through the pipe)."""
        with self._lock:
            offset = self._keys.pop(key, None)
            if offset is None:
                return False
            self._starts.pop(bisect.bisect_left(self._starts, offset))
            del self._ends[offset]
        return True

    @property
    def in_use(self) -> int:
        """Blocks held by unfinished tasks."""
        with self._lock:
            return len(self._keys)

    def mapped(self):
        """The worker has read a block, so it has mapped the segment and removed its name
        (:class:`ArenaView`): the resource tracker has nothing left to clean up."""
        if not os.path.isdir("/dev/shm"):  # pragma: no cover - there the worker keeps the name
            return
        with self._lock:
            if self._tracked and not self._closed:
                self._tracked = False
                resource_tracker.unregister(self._shm._name, "shared_memory")

    def close(self):
        """Unlink the segment (a worker still mapping it keeps its view until it exits).
        Idempotent; returns once the segment is unlinked, whichever thread closed it."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._keys.clear()
            self._starts.clear()
            self._ends.clear()
            self._shm.close()
            if self._tracked:
                try:
                    self._shm.unlink()  # unlinks and tells the tracker
                except FileNotFoundError:  # the worker removed the name, and no block told us yet
                    resource_tracker.unregister(self._shm._name, "shared_memory")
            else:
                try:
                    os.unlink(os.path.join("/dev/shm", self.name.lstrip("/")))
                except OSError:  # removed by the worker, as expected
                    pass


class ArenaView:
    """A worker's side of its arena: read-only arrays over the master's blocks.

    Parameters
    ----------
    name : str
        The segment's name (:attr:`Arena.name`).
    """

    def __init__(self, name: str):
        path = os.path.join("/dev/shm", name.lstrip("/"))
        if os.path.exists(path):
            # Map the file directly: attaching through SharedMemory would register the
            # segment with the resource tracker (Python < 3.13), which the master owns.
            fd = os.open(path, os.O_RDONLY)
            try:
                self._map = mmap.mmap(fd, os.fstat(fd).st_size, prot=mmap.PROT_READ)
            finally:
                os.close(fd)
            # both sides have it mapped now: the name can go, so that no segment outlives its
            # users, however the master ends (the memory lasts until the last mapping goes)
            try:
                os.unlink(path)
            except OSError:  # pragma: no cover - the master closed the arena meanwhile
                pass
            self._buf = memoryview(self._map)
        else:  # pragma: no cover - platforms without /dev/shm
            self._map = shared_memory.SharedMemory(name=name)
            self._buf = self._map.buf

    def array(self, where: SharedSlice) -> np.ndarray:
        """The task's coded inputs: a private copy (one memory copy, about 30 us
        for 400 KB), so f may keep or modify its input like one from the pipe."""
        return np.array(np.ndarray(where.shape, np.dtype(where.dtype), buffer=self._buf, offset=where.offset))

    def close(self):
        try:
            self._buf.release()
            self._map.close()
        except BufferError:  # a view still alive (a hung task's): the process exit releases it
            pass
