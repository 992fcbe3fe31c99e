"""Coded inputs through shared memory (gencc.runtime.backends.shared) and the local backend's use of it."""

import os

import numpy as np
import pytest

import gencc
from gencc.runtime import CodedExecutor, Faults
from gencc.runtime.microbatch import decode_stacked, encode_stacked
from gencc.runtime.backends.shared import Arena, ArenaView, SharedSlice, arena_size

MODEL = "_models:xsinx"
RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def _importable_models(monkeypatch):
    monkeypatch.syspath_prepend(os.path.dirname(__file__))
    monkeypatch.setenv("PYTHONPATH", os.path.dirname(__file__) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _segments():
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


def test_arena_first_fit_reuses_freed_blocks_in_any_order_and_refuses_what_does_not_fit():
    arena = Arena(1024)
    try:
        a = arena.put("a", np.arange(16.0))  # 128 bytes
        b = arena.put("b", np.arange(32.0))  # 256 bytes
        c = arena.put("c", np.arange(8.0))  # 64 bytes
        assert (a.offset, b.offset, c.offset) == (0, 128, 384)
        assert arena.put("a", np.zeros(2)) is None  # one block per task
        assert arena.put("big", np.zeros(80)) is None  # 640 bytes: more than half the arena
        assert arena.free("b") and not arena.free("b")
        d = arena.put("d", np.arange(24.0))  # 192 bytes: fits in b's hole
        assert d.offset == 128 and arena.in_use == 3
        e = arena.put("e", np.arange(64.0))  # 512 bytes: only after c
        assert e.offset == 448
        assert arena.put("f", np.arange(16.0)) is None  # full: the caller uses the pipe
        view = ArenaView(arena.name)
        for where, x in ((a, np.arange(16.0)), (c, np.arange(8.0)), (d, np.arange(24.0)), (e, np.arange(64.0))):
            got = view.array(where)
            np.testing.assert_array_equal(got, x)
            got[0] = -1.0  # a private copy: the arena is untouched
        np.testing.assert_array_equal(view.array(a), np.arange(16.0))
        assert view.array(SharedSlice(0, (2, 8), "<f8")).shape == (2, 8)
        view.close()
    finally:
        arena.close()
    arena.close()  # idempotent
    assert arena.put("g", np.zeros(2)) is None
    assert arena_size(400_000) == 16 << 20 and arena_size(4 << 20) == 32 << 20


def test_large_tasks_go_through_shared_memory_and_give_the_pipes_answers():
    scheme = gencc.GCC(4, 8, kernel="sobolev2")
    X = RNG.uniform(-3, 3, size=(4 * 3, 6000))  # 3 coded inputs of 48 KB per task
    before = _segments()
    outs = {}
    for label, smb in (("shared", 32 << 10), ("pipe", None)):
        opts = {"preload": ("gencc.runtime.backends.worker", "_models"), "shared_min_bytes": smb}
        with CodedExecutor(MODEL, scheme, "local", micro_batch=3, timeout=60, backend_options=opts) as ex:
            outs[label] = [ex.submit(X).result(timeout=90) for _ in range(5)]
            be = ex.backend
            counts = (be.shared_tasks, be.piped_tasks)
        assert counts == ((40, 0) if label == "shared" else (0, 40))
    for res in outs["shared"] + outs["pipe"]:  # the simulation's decode from the same returned workers
        ret = np.array(res.returned)
        coded = encode_stacked(scheme, X, 3)
        Y = np.stack([coded[n] * np.sin(coded[n]) for n in ret])
        expected = decode_stacked(scheme, Y, ret, 3)[0]
        np.testing.assert_allclose(res.outputs, expected, rtol=1e-12, atol=1e-12)
    assert _segments() <= before  # every arena unlinked at shutdown


def test_a_worker_that_crashes_with_blocks_in_its_arena_is_replaced_and_nothing_leaks():
    scheme = gencc.GCC(4, 8, kernel="sobolev2")
    X = RNG.uniform(-3, 3, size=(4, 10000))  # 80 KB per task: shared memory by default
    before = _segments()
    opts = {"preload": ("gencc.runtime.backends.worker", "_models")}
    faults = Faults(workers={3: "crash"})
    with CodedExecutor(MODEL, scheme, "local", timeout=60, backend_options=opts, faults=faults) as ex:
        results = [ex.submit(X).result(timeout=90) for _ in range(3)]
        assert ex.backend.shared_tasks > 0 and ex.backend.restarts[3] >= 1
    coded = scheme.encode(X)
    for res in results:
        assert 3 in res.failed and 3 not in res.returned
        ret = np.array(res.returned)
        expected = scheme.decode(coded[ret] * np.sin(coded[ret]), ret)
        np.testing.assert_allclose(res.outputs, expected, rtol=1e-12, atol=1e-12)
    assert _segments() <= before
