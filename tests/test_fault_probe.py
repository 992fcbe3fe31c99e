"""Fault probe: ordinary Python habits that must never give an input another input's answer, stall
the dispatcher or leave anything running. Every wait is bounded; loopback only."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import gencc
from gencc.experiments.chaos import process_alive
from gencc.runtime import BatchFailedError, CodedExecutor, HedgedExecutor

BACKENDS = ["local", "threads", pytest.param("ray", marks=pytest.mark.ray)]
HERE = os.path.dirname(__file__)
N_INPUTS = 16


@pytest.fixture(autouse=True)
def _importable_models(monkeypatch):
    monkeypatch.syspath_prepend(HERE)
    monkeypatch.setenv("PYTHONPATH", HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _opts(backend):
    if backend == "ray":
        pytest.importorskip("ray")
    return {"preload": ("gencc.runtime.backends.worker", "_models")} if backend == "local" else {}


def _x(i):
    """Input i: well apart from every other, so an answer can only be near its own input's f."""
    return 0.5 * i + np.array([0.0, 0.125, 0.25])


def xsinx(X):
    return X * np.sin(X)


def doubled_xsinx(X):  # what _models.in_place computes
    return xsinx(2.0 * X)


def _executor(kind, model, backend):
    opts = _opts(backend)
    if kind == "hedged":  # every request hedged at once: two copies race on two workers
        return HedgedExecutor(model, 4, backend, micro_batch=2, hedge_delay=0.0, timeout=60, backend_options=opts)
    scheme = gencc.GCC(4, 6, worker_points="systematic") if kind == "gcc" else gencc.Replication(4, 8)
    return CodedExecutor(model, scheme, backend, micro_batch=2, timeout=60, backend_options=opts)


def _check_own(answers, g, what):
    """Each answer is f of its own input: nearest to it among every input's f, and close."""
    expected = np.stack([g(_x(i)[None])[0] for i in range(len(answers))])
    got = np.stack([np.asarray(a, dtype=np.float64) for a in answers])
    dist = np.linalg.norm(got[:, None, :] - expected[None], axis=2)
    assert list(dist.argmin(axis=1)) == list(range(len(answers))), f"{what}: answers of other inputs"
    np.testing.assert_allclose(got, expected, atol=1e-6, err_msg=what)


def _refilled(n, dtype):
    """A reader that refills one buffer: the generator hands out the same array each time."""
    buf = np.empty(3, dtype=dtype)
    for i in range(n):
        buf[:] = _x(i)
        yield buf


def _probe(ex, g, *, batch_rows):
    """Every buffer pattern on one executor; returns every answer handed out, for a second look."""
    given = []
    for dtype in (np.float64, np.float32):
        answers = list(ex.map(_refilled(N_INPUTS, dtype), timeout=60))
        _check_own(answers, g, f"map over a refilled {np.dtype(dtype).name} buffer")
        given.append(answers)
        buf = np.empty(3, dtype=dtype)
        futs = []
        for i in range(N_INPUTS):
            buf[:] = _x(i)
            futs.append(ex.submit_one(buf))
        answers = [fut.result(timeout=60) for fut in futs]
        _check_own(answers, g, f"submit_one with a refilled {np.dtype(dtype).name} buffer")
        given.append(answers)
    X = np.empty((batch_rows, 3))  # one batch buffer, refilled after each submit
    futs = []
    for first in range(0, N_INPUTS, batch_rows):
        X[:] = np.stack([_x(i) for i in range(first, first + batch_rows)])
        futs.append(ex.submit(X))
    answers = [y for fut in futs for y in np.asarray(fut.result(timeout=60).outputs).reshape(batch_rows, -1)]
    _check_own(answers, g, "submit with a refilled batch buffer")
    given.append(answers)
    arr = np.stack([_x(i) for i in range(N_INPUTS)])
    kept = arr.copy()
    answers = list(ex.map(arr, timeout=60))
    _check_own(answers, g, "map over an array")
    np.testing.assert_array_equal(arr, kept, err_msg="the caller's array changed")
    given.append(answers)
    return given


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["gcc", "replication", "hedged"])
@pytest.mark.parametrize("model, g", [("_models:reused_output", xsinx), ("_models:in_place", doubled_xsinx)],
                         ids=["reused_output", "in_place"])
def test_every_answer_is_f_of_its_own_input_under_every_buffer_pattern(backend, kind, model, g):
    with _executor(kind, model, backend) as ex:
        given = _probe(ex, g, batch_rows=8 if kind != "hedged" else 2)
    for answers in given:  # answers already handed out never change afterwards
        _check_own(answers, g, "an answer changed after it was given")


# -- callbacks off the dispatcher -------------------------------------------------------------------
def _executors_for_callbacks():
    # f takes 1 s on an input holding 555: the first batch is still running when its callback is added
    return [("coded", lambda b: CodedExecutor("_models:slow_on_555", gencc.GCC(4, 6), b, timeout=20,
                                              backend_options=_opts(b))),
            ("hedged", lambda b: HedgedExecutor("_models:slow_on_555", 3, b, timeout=20, backend_options=_opts(b)))]


def _slow(X):
    X = X.copy()
    X[0, 0] = 555.0
    return X


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name, make", _executors_for_callbacks(), ids=["coded", "hedged"])
def test_a_blocking_callback_stalls_no_other_future(backend, name, make):
    release = threading.Event()
    where = []

    def blocks(fut):
        where.append(threading.current_thread().name)
        release.wait(timeout=30)

    X = np.stack([_x(i) for i in range(4 if name == "coded" else 1)])
    with make(backend) as ex:
        first = ex.submit(_slow(X))
        first.add_done_callback(blocks)
        first.result(timeout=30)
        try:
            later = [ex.submit(X + 0.01 * j) for j in range(1, 4)]
            for fut in later:  # the dispatcher goes on while a callback blocks
                fut.result(timeout=15)
            one = ex.submit_one(X[0])
            one.result(timeout=15)
        finally:
            release.set()
    assert where == ["gencc-callbacks"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name, make", _executors_for_callbacks(), ids=["coded", "hedged"])
def test_shutdown_from_a_done_callback_resolves_every_future_and_ends_every_worker(backend, name, make):
    X = np.stack([_x(i) for i in range(4 if name == "coded" else 1)])
    errors, where = [], []
    threads_before = set(threading.enumerate())
    ex = make(backend)
    pids = [p for p in ex.backend.pids if p] if backend == "local" else []

    def stop(fut):
        where.append(threading.current_thread().name)
        try:
            ex.shutdown()
        except BaseException as exc:  # noqa: BLE001 - the test asserts there is none
            errors.append(exc)

    first = ex.submit(_slow(X))
    first.add_done_callback(stop)
    others = [ex.submit(X + 0.01 * j) for j in range(1, 4)]
    requests = [ex.submit_one(X[0] + 0.5), ex.submit_one(X[0] + 0.6)]
    first.result(timeout=30)
    for fut in others + requests:  # each answered or failed, none left waiting
        try:
            fut.result(timeout=30)
        except BatchFailedError:
            pass
    ex.shutdown()  # a second call returns once the first has ended the workers
    assert errors == [] and where == ["gencc-callbacks"]
    def left():
        return [p for p in pids if process_alive(p)] + [t.name for t in set(threading.enumerate()) - threads_before]

    deadline = time.monotonic() + 5
    while left() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left() == []
    with pytest.raises(RuntimeError, match="shut down"):
        ex.submit(X)


# -- nothing outlives its owner ---------------------------------------------------------------------
def _shm(pid=None) -> set:
    """The executors' shared-memory segments in /dev/shm (of master ``pid``, else of any)."""
    prefix = "gencc_" if pid is None else f"gencc_{pid}_"
    try:
        return {n for n in os.listdir("/dev/shm") if n.startswith(prefix)}
    except FileNotFoundError:  # pragma: no cover
        return set()


def _children(root: int) -> set:
    """Every live descendant of ``root`` (from /proc)."""
    parent = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as fh:
                    rest = fh.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if rest[0] != "Z":
                parent[int(name)] = int(rest[1])
    out, frontier = set(), {root}
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier} - out
        out |= frontier
    return out


def _gone(pids, seconds=5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(process_alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and PR_SET_PDEATHSIG")

_MASTER = textwrap.dedent("""
    import sys, time
    import numpy as np
    import gencc
    from gencc.runtime import CodedExecutor
    ex = CodedExecutor("_models:sleeps_on_999", gencc.Replication(4, 6), "local", timeout=300,
                       backend_options={"shared_min_bytes": 0})
    ex.submit(np.full((4, 2000), 1.0)).result(timeout=60)  # the workers have arenas
    ex.submit(np.full((4, 2000), 999.0))  # every worker now inside f for 120 s
    print(" ".join(map(str, ex.backend.pids)), flush=True)
    time.sleep(300)
""")


@linux_only
def test_a_killed_master_leaves_no_worker_and_no_shared_memory():
    proc = subprocess.Popen([sys.executable, "-c", _MASTER], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": HERE + os.pathsep + os.environ.get("PYTHONPATH", "")})
    try:
        line = proc.stdout.readline()
        pids = [int(p) for p in line.split()]
        assert len(pids) == 6, line
        family = _children(proc.pid)  # the workers, the forkserver, the resource tracker
        time.sleep(0.5)  # the workers are inside f
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert _gone(family), f"left running: {sorted(p for p in family if process_alive(p))}"
    deadline = time.monotonic() + 5
    while _shm(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _shm(proc.pid)


@linux_only
def test_a_killed_forkserver_leaves_no_worker_and_the_executor_recovers():
    with CodedExecutor("_models:sleeps_on_999", gencc.Replication(2, 4), "local", timeout=60,
                       backend_options=_opts("local")) as ex:
        ex.submit(np.ones((2, 3))).result(timeout=60)
        old = list(ex.backend.pids)
        busy = ex.submit(np.full((2, 3), 999.0))  # every worker inside f
        time.sleep(0.5)
        with open(f"/proc/{old[0]}/stat") as fh:
            forkserver = int(fh.read().rsplit(")", 1)[1].split()[1])
        assert forkserver != os.getpid()
        os.kill(forkserver, signal.SIGKILL)
        assert _gone(old), "workers of a dead forkserver still run"
        with pytest.raises(BatchFailedError):
            busy.result(timeout=60)
        deadline = time.monotonic() + 30  # restarted through a fresh forkserver: answers again
        while True:
            try:
                res = ex.submit(np.full((2, 3), 0.5)).result(timeout=30)
                break
            except BatchFailedError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        np.testing.assert_allclose(res.outputs, xsinx(np.full((2, 3), 0.5)))
        new = list(ex.backend.pids)
    assert _gone(old + new)


def _resources():
    return {"processes": len(_children(os.getpid())), "threads": threading.active_count(),
            "fds": len(os.listdir("/proc/self/fd")), "shm": len(_shm())}


@linux_only
@pytest.mark.parametrize("backend", ["local", "threads"])
def test_fifty_executor_lifetimes_leave_nothing_behind(backend):
    def lifetime(j):
        release = threading.Event()
        with CodedExecutor("_models:xsinx", gencc.GCC(2, 3, worker_points="systematic"), backend, timeout=20,
                           backend_options={**_opts(backend), "shared_min_bytes": 0} if backend == "local"
                           else {}) as ex:
            fut = ex.submit(np.full((2, 64), 0.01 * j))
            fut.add_done_callback(lambda _: release.set())
            ex.submit_one(np.full(64, 0.5)).result(timeout=20)
            list(ex.map(np.full((3, 64), 0.25), timeout=20))
            fut.result(timeout=20)
            assert release.wait(timeout=20)

    lifetime(-1)  # the forkserver, started once per master, and first imports
    time.sleep(0.5)
    before = _resources()
    for j in range(50):
        lifetime(j)
    deadline = time.monotonic() + 5
    while _resources() != before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _resources() == before
