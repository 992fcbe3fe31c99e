"""The local backend's pipes: frames a worker's Connection reads, and tasks larger than a pipe holds."""

import multiprocessing as mp
import os
import signal
import time

import numpy as np
import pytest

from gencc.runtime.events import Task, TaskResult, WorkerDied
from gencc.runtime.faults import TaskFault
from gencc.runtime.backends.local import LocalBackend, frame, unframe

RNG = np.random.default_rng(11)


def _first(be, kind, timeout=60.0) -> list:
    """The first poll's events of type ``kind`` (within ``timeout`` seconds; [] if none came)."""
    deadline, got = time.monotonic() + timeout, []
    while not got and time.monotonic() < deadline:
        got = [ev for ev in be.poll(0.1) if isinstance(ev, kind)]
    return got


def _exists(pid) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_connection_reads_our_frames_and_we_read_its_frames_in_any_pieces():
    msgs = [("task", Task(3, 1, RNG.normal(size=(5, 7)), TaskFault(), True)), ("cancel", 3), ("stop",),
            ("big", np.arange(40_000.0))]  # 320 KB: more than a pipe holds
    r, w = mp.Pipe(duplex=False)
    try:
        data = b"".join(frame(m) for m in msgs[:3])
        os.write(w.fileno(), data)
        got = [r.recv() for _ in range(3)]
        assert got[0][1].batch == 3 and np.array_equal(got[0][1].x, msgs[0][1].x) and got[1:] == msgs[1:3]
    finally:
        r.close()
        w.close()
    r, w = mp.Pipe(duplex=False)  # the other way: what Connection.send writes, cut anywhere
    try:
        raw = bytearray()
        for m in msgs[:3]:
            w.send(m)
        while r.poll(0):
            raw += os.read(r.fileno(), 7)
        buf, out = bytearray(), []
        cuts = sorted(RNG.choice(np.arange(1, len(raw)), size=6, replace=False))
        for a, b in zip([0, *cuts], [*cuts, len(raw)]):
            buf += raw[a:b]
            out += unframe(buf)
        assert len(out) == 3 and out[1:] == msgs[1:3] and not buf
        big = bytearray(frame(msgs[3]))
        assert unframe(big[:100]) == [] and np.array_equal(unframe(big)[0][1], msgs[3][1])
    finally:
        r.close()
        w.close()


@pytest.mark.timeout(120)
def test_tasks_larger_than_the_pipe_wait_in_a_buffer_for_a_stopped_worker_and_arrive_whole():
    be = LocalBackend("_models:xsinx", 2, preload=("gencc.runtime.backends.worker", "_models"), shared_min_bytes=None)
    be.start()
    try:
        xs = [RNG.normal(size=(2, 50_000)) for _ in range(3)]  # 800 KB each: a pipe holds 64 KB
        os.kill(be.pids[0], signal.SIGSTOP)  # worker 0 reads nothing: a blocking write would hang here
        for i, x in enumerate(xs):
            assert be.submit(0 if i < 2 else 1, Task(i, 0 if i < 2 else 1, x, TaskFault(), True))
        results = {}

        def collect(n):
            deadline = time.monotonic() + 60
            while len(results) < n and time.monotonic() < deadline:
                for ev in be.poll(0.1):
                    assert isinstance(ev, TaskResult), ev
                    results[ev.batch] = ev.output

        collect(1)
        assert sorted(results) == [2]  # worker 1 served while worker 0's tasks waited
        os.kill(be.pids[0], signal.SIGCONT)
        collect(3)
        assert sorted(results) == [0, 1, 2]
        for i, x in enumerate(xs):
            np.testing.assert_array_equal(results[i], x * np.sin(x))
        assert be.piped_tasks == 3 and be.shared_tasks == 0
    finally:
        be.shutdown()
    assert not any(be.alive())


@pytest.mark.timeout(120)
def test_a_task_that_does_not_pickle_is_refused_and_the_worker_serves_the_next():
    be = LocalBackend("_models:xsinx", 1, preload=("gencc.runtime.backends.worker", "_models"))
    be.start()
    try:
        bad = Task(0, 0, np.ones((1, 3)), TaskFault(kind="attack", params={"f": lambda y: y}), True)
        assert be.submit(0, bad) is False  # the executor erases it ("send failed"); nothing half-written
        assert be.submit(0, Task(1, 0, np.ones((1, 3)), TaskFault(), True))
        got = _first(be, TaskResult, timeout=30)
        assert [ev.batch for ev in got] == [1]
        np.testing.assert_allclose(got[0].output, np.sin(1.0))
    finally:
        be.shutdown()
    assert not any(be.alive())


@pytest.mark.timeout(120)
def test_a_worker_that_closes_its_events_pipe_but_lives_is_killed_and_reported_dead():
    be = LocalBackend("_models:closes_its_pipes", 2, preload=("gencc.runtime.backends.worker", "_models"))
    be.start()
    try:
        pid = be.pids[0]
        assert be.submit(0, Task(0, 0, np.full((1, 3), 777.0), TaskFault(), True))
        died = _first(be, WorkerDied)
        assert [ev.worker for ev in died] == [0] and "exit code -9" in died[0].why
        deadline = time.monotonic() + 10  # gone (reaped by its parent), not left running unseen
        while time.monotonic() < deadline and _exists(pid):
            time.sleep(0.05)
        assert not _exists(pid)
        be.restart(0)
        assert be.submit(0, Task(1, 0, np.ones((1, 3)), TaskFault(), True))
        got = _first(be, TaskResult)
        assert [(ev.worker, ev.batch) for ev in got] == [(0, 1)]
    finally:
        be.shutdown()
    assert not any(be.alive())
    n_started = len(be.pid_history)
    be.restart(1)  # after shutdown: starts nothing
    assert len(be.pid_history) == n_started and not any(be.alive())
