"""Recorded straggler traces: the loader says what is wrong with a file, and the runtime replays
each worker's recorded tasks in order."""

from pathlib import Path

import numpy as np
import pytest

import gencc
from gencc.runtime import CodedExecutor, WorkerStragglers
from gencc.stragglers import TRACE_COLUMNS, LatencyStragglers, TraceStragglers

from test_runtime import MODEL

COMMITTED = Path(__file__).resolve().parents[1] / "results" / "traces" / "cpu_mem_hog.csv"


def _write(tmp_path, text, name="t.csv"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_the_loader_reads_a_trace_in_each_workers_task_order(tmp_path):
    p = _write(tmp_path, "worker,task,start,duration\n1,0,0.5,0.3\n0,0,-1.0,0.1\n0,1,0.2,0.2\n1,1,0.1,0.4\n")
    tr = TraceStragglers.load(p)
    assert tr.n_workers == 2 and tr.source == "t.csv"
    assert tr.durations[0].tolist() == [0.1, 0.2] and tr.durations[1].tolist() == [0.4, 0.3]  # ordered by start
    assert "2 workers, 4 tasks" in repr(tr)


@pytest.mark.parametrize("text, message", [
    ("worker,start\n0,0.1\n", "missing columns ['duration']"),
    ("worker,start,duration\n", "has no tasks"),
    ("worker,start,duration\n0,0.0,0.1\n0,0.1,fast\n", "line 3: duration must be a number, got 'fast'"),
    ("worker,start,duration\n0,0.0,-0.1\n", "duration must be finite and >= 0; row 2"),
    ("worker,start,duration\n0,0.0,nan\n", "duration must be finite and >= 0"),
    ("worker,start,duration\n0.5,0.0,0.1\n", "worker must be an integer id, row 2"),
    ("worker,start,duration\n0,0.0,0.1\n0,0.1,0.1\n2,0.0,0.1\n", "numbered 0..W-1; no task of workers [1]"),
    ("worker,start,duration\n0,0.0,0.1\n1000000000,0.0,0.1\n", "has worker 1000000000 but the file has only 2"),
    ("worker,start,duration\n0,inf,0.1\n", "start must be finite; row 2"),
])
def test_the_loader_names_what_is_wrong_with_a_file(tmp_path, text, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")):
        TraceStragglers.load(_write(tmp_path, text))


def test_a_missing_file_or_parquet_without_pyarrow_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        TraceStragglers.load(tmp_path / "nope.csv")
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    table = pa.table({"worker": [0, 0, 1], "start": [0.0, 1.0, 0.0], "duration": [0.1, 0.2, 0.3]})
    pq.write_table(table, tmp_path / "t.parquet")
    tr = TraceStragglers.load(tmp_path / "t.parquet")
    assert tr.durations[0].tolist() == [0.1, 0.2] and tr.durations[1].tolist() == [0.3]


def test_worker_stragglers_replay_each_workers_sequence_from_a_seeded_offset():
    tr = TraceStragglers([np.arange(5) * 0.01, np.array([1.0, 2.0])])
    faults = WorkerStragglers(tr, 3, seed=4)
    seq = [[faults.task_fault(w).delay for _ in range(6)] for w in range(3)]
    for w, s in enumerate(seq):
        d = tr.durations[w % 2]
        start = int(np.flatnonzero(np.isclose(d, s[0]))[0])
        np.testing.assert_allclose(s, d[(start + np.arange(6)) % d.size])  # in recorded order, cycling
    again = WorkerStragglers(tr, 3, seed=4)
    assert [[again.task_fault(w).delay for _ in range(6)] for w in range(3)] == seq  # common random numbers
    lat = LatencyStragglers(tr, wait_for=2).returned(4, np.random.default_rng(0))
    assert len(lat) == 2


def test_the_committed_trace_loads_and_the_runtime_injects_its_delays():
    tr = TraceStragglers.load(COMMITTED)
    assert tr.n_workers == 8 and min(d.size for d in tr.durations) >= 100
    header = COMMITTED.read_text().splitlines()[0].split(",")
    assert all(c in header for c in TRACE_COLUMNS)
    slow = TraceStragglers([np.zeros(3), np.full(3, 0.25)])
    with CodedExecutor(MODEL, gencc.Uncoded(4), "threads", faults=WorkerStragglers(slow, 4, seed=0),
                       timeout=30, n_wait=4) as ex:
        res = ex.submit(np.ones((4, 3))).result(timeout=30)
    assert res.returned == (0, 1, 2, 3)
    assert [res.compute_seconds[s] >= 0.25 for s in range(4)] == [False, True, False, True]  # workers 1, 3: trace 1
