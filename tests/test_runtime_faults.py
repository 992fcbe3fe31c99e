"""Faults from inside and outside on real workers: no hang, no lost input, no answer the decoder cannot back.

Each test bounds itself (pytest-timeout) and checks that nothing is left running.
"""

import os
import signal
import time

import numpy as np
import pytest

import gencc
from gencc.errors import BatchFailedError, ErrorBoundExceededError, InvalidInputError
from gencc.runtime import CodedExecutor, Faults
from gencc.runtime.backends.local import LocalBackend

from test_runtime import MODEL, _alive, _importable_models, _opts, f  # noqa: F401

RNG = np.random.default_rng(7)


@pytest.mark.timeout(120)
def test_a_worker_that_stops_reading_blocks_nothing():
    """Defect 1: a hung worker's pipe fills up; the master used to block in send() holding its lock."""
    scheme = gencc.GCC(4, 8)
    inputs = list(RNG.uniform(-1, 1, size=(200, 4000)))  # 32 kB a task: a pipe holds only a few
    with CodedExecutor(MODEL, scheme, n_wait=7, deadline=0.5, timeout=20, hang_timeout=60,
                       faults=Faults(workers={7: "hang"}), backend_options=_opts("local")) as ex:
        pids = list(ex.backend.pids)
        t0 = time.monotonic()
        outs = list(ex.map(inputs))
        assert time.monotonic() - t0 < 60
        assert ex.stats["hangs"] == 0  # not rescued by the hang detector: it never fired
    assert len(outs) == 200
    assert not any(_alive(p) for p in pids)  # the hung worker does not outlive shutdown


@pytest.mark.timeout(120)
def test_sigstop_from_outside_is_detected_as_a_hang_and_killed():
    scheme = gencc.Replication(4, 8)
    inputs = list(RNG.uniform(-3, 3, size=(120, 3)))
    with CodedExecutor(MODEL, scheme, timeout=20, hang_timeout=1.0, max_in_flight=2,
                       faults=Faults(latency=gencc.stragglers.ShiftedExponential(0.005, 200.0), seed=3),
                       backend_options=_opts("local")) as ex:
        victim = ex.backend.pids[2]
        outs = []
        for i, y in enumerate(ex.map(inputs)):
            if i == 8:
                os.kill(victim, signal.SIGSTOP)
            outs.append(y)
        deadline = time.monotonic() + 10
        while not ex.backend.restarts[2] and time.monotonic() < deadline:  # detected within hang_timeout
            time.sleep(0.05)
        assert ex.stats["hangs"] >= 1 and ex.backend.restarts[2] >= 1
        while _alive(victim) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(victim)
    np.testing.assert_allclose(np.stack(outs), f(np.stack(inputs)))


@pytest.mark.timeout(120)
def test_sigkill_from_outside_loses_no_batch_of_a_code():
    """Defect 5b: after a SIGKILL a GCC batch sometimes failed with '0 usable results'."""
    scheme = gencc.GCC(4, 10, kernel="sobolev2")
    inputs = list(RNG.uniform(-3, 3, size=(80, 2)))
    with CodedExecutor(MODEL, scheme, n_wait=8, timeout=20, backend_options=_opts("local"), max_in_flight=2,
                       faults=Faults(latency=gencc.stragglers.ShiftedExponential(0.01, 100.0), seed=2)) as ex:
        outs = []
        for i, y in enumerate(ex.map(inputs, return_exceptions=True)):
            if i in (8, 40):
                os.kill(ex.backend.pids[i % 10], signal.SIGKILL)
            outs.append(y)
        assert ex.stats["crashes"] >= 2
    assert len(outs) == 80 and not any(isinstance(o, BaseException) for o in outs)


@pytest.mark.timeout(120)
def test_one_bad_input_fails_only_itself():
    """Defect 4: a NaN input (or another shape, or a complex one) used to end the whole map."""
    scheme = gencc.Replication(3, 6)
    inputs = [np.asarray(x) for x in RNG.uniform(-3, 3, size=(40, 2))]
    inputs[21] = np.array([np.nan, 1.0])
    inputs[5] = np.ones(3)  # a different shape
    inputs[30] = np.array([1 + 2j, 0])
    with CodedExecutor(MODEL, scheme, timeout=20, backend_options=_opts("local")) as ex:
        outs = list(ex.map(inputs, return_exceptions=True, progress=False))
        assert len(outs) == 40
        for i in (5, 21, 30):
            assert isinstance(outs[i], InvalidInputError) and outs[i].index == i
        assert "NaN" in str(outs[21]) and "shape (3,)" in str(outs[5]) and "complex" in str(outs[30])
        good = [i for i in range(40) if i not in (5, 21, 30)]
        np.testing.assert_allclose(np.stack([outs[i] for i in good]), f(np.stack([inputs[i] for i in good])))
        seen = []
        with pytest.raises(InvalidInputError, match="input 5 has shape"):
            for y in ex.map(inputs):
                seen.append(y)
        assert len(seen) == 5  # everything before the bad input was answered first


@pytest.mark.timeout(120)
def test_too_many_failures_give_explicit_errors_not_wrong_answers():
    """Defect 3: with 8 of 12 workers failing, GCC 'answered' from 4 and agreed with f on half the inputs."""
    scheme = gencc.GCC(4, 12)
    X = RNG.uniform(-3, 3, size=(4, 2))
    bad = Faults(workers={w: "error" for w in range(9)})  # 3 of 12 return: fewer than K = 4
    with CodedExecutor(MODEL, scheme, timeout=20, backend_options=_opts("local"), faults=bad) as ex:
        # it fails as soon as no outcome could reach 4, whatever has arrived by then
        with pytest.raises(BatchFailedError, match=r"too few workers returned\): [0-3] usable results, 4 needed"):
            ex.submit(X).result(timeout=30)
    with CodedExecutor(MODEL, gencc.BACC(4, 12), timeout=20, max_error=1e-30, backend_options=_opts("local")) as ex:
        with pytest.raises(BatchFailedError, match="error estimate .* above max_error"):  # a batch estimate only
            ex.submit(X).result(timeout=30)
    with CodedExecutor(MODEL, scheme, timeout=20, max_error=1e-30, backend_options=_opts("local")) as ex:
        res = ex.submit(X).result(timeout=30)  # GCC bounds each input: every one is refused, on its own
        assert res.refused == (0, 1, 2, 3) and np.isnan(res.outputs).all() and ex.stats["refused_inputs"] == 4
        with pytest.raises(ErrorBoundExceededError, match="input 2 refused"):
            res.output(2)
        futs = [ex.submit_one(x) for x in X]
        for fut in futs:
            with pytest.raises(ErrorBoundExceededError, match="above max_error = 1e-30"):
                fut.result(timeout=30)
    systematic = gencc.GCC(4, 12, worker_points="systematic")
    with CodedExecutor(MODEL, systematic, timeout=20, max_error=1e-30, backend_options=_opts("local"),
                       faults=Faults(workers={0: "error"})) as ex:  # input 0 decoded, 1-3 exact
        futs = [ex.submit_one(x) for x in X]
        with pytest.raises(ErrorBoundExceededError, match="input 0 refused"):
            futs[0].result(timeout=30)
        for fut, x in zip(futs[1:], X[1:]):  # the rest of the batch is answered, exactly
            np.testing.assert_allclose(fut.result(timeout=30), x * np.sin(x))
            assert fut.info.exact and fut.info.rmse_p90 == 0.0
        got = list(ex.map(X, return_exceptions=True, timeout=60))  # map's ordered path refuses the same row
        assert isinstance(got[0], ErrorBoundExceededError)
        np.testing.assert_allclose(np.stack(got[1:]), X[1:] * np.sin(X[1:]))
        with pytest.raises(ErrorBoundExceededError):
            list(ex.map(X, timeout=60))
    with CodedExecutor(MODEL, scheme, timeout=20, max_error=1e6, backend_options=_opts("local")) as ex:
        res = ex.submit(X).result(timeout=30)
        assert 0 <= res.error_estimate <= 1e6 and res.refused == ()
        assert res.rmse.shape == res.rmse_p90.shape == (4,) and (0 < res.rmse).all()
        np.testing.assert_allclose(res.rmse_p90, gencc.schemes.gcc.RMSE_P90_FACTOR * res.rmse)
        fut = ex.submit_one(X[0])
        fut.result(timeout=30)
        assert not fut.info.exact and fut.info.rmse_p90 is not None and fut.info.rmse_p90 > 0
    with CodedExecutor(MODEL, gencc.BACC(4, 12), timeout=20, backend_options=_opts("local")) as ex:
        assert ex.submit(X).result(timeout=30).error_estimate > 0  # every kernel scheme reports one


@pytest.mark.timeout(60)
def test_map_timeout_bounds_the_whole_call():
    slow = Faults(workers={w: "slow" for w in range(4)}, slow_delay=3.0)
    with CodedExecutor(MODEL, gencc.Replication(2, 4), timeout=20, backend_options=_opts("local"),
                       faults=slow) as ex:
        t0 = time.monotonic()
        with pytest.raises(TimeoutError):
            list(ex.map(list(np.ones((6, 2))), timeout=0.5))
        assert time.monotonic() - t0 < 2.0


@pytest.mark.timeout(60)
def test_interrupted_start_leaves_no_worker():
    be = LocalBackend("_models:slow_start", 3, preload=("gencc.runtime.backends.worker", "_models"), start_timeout=0.5)
    with pytest.raises(TimeoutError, match="did not build the model"):
        be.start()
    pids = [p for p in be.pids if p]
    assert len(pids) == 3 and not any(_alive(p) for p in pids)


def _listening_sockets(pids):
    import ipaddress

    import psutil

    out = []
    for c in psutil.net_connections(kind="tcp"):
        if c.status == psutil.CONN_LISTEN and c.pid in pids:
            a = ipaddress.ip_address(c.laddr.ip.split("%")[0])
            out.append((c.pid, c.laddr.ip, (getattr(a, "ipv4_mapped", None) or a).is_loopback))
    return out


@pytest.mark.ray
@pytest.mark.timeout(180)
def test_ray_listens_on_loopback_only_and_leaves_nothing_behind():
    ray = pytest.importorskip("ray")
    import psutil

    assert not ray.is_initialized()
    scheme = gencc.GCC(3, 6)
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}  # e.g. the local backend's forkserver
    with CodedExecutor(MODEL, scheme, "ray", timeout=60) as ex:
        ex.submit(RNG.uniform(-1, 1, size=(3, 2))).result(timeout=60)
        ray_pids = {p.pid for p in me.children(recursive=True)} - before
        socks = _listening_sockets(ray_pids | {me.pid})
        names = " ".join(" ".join(psutil.Process(p).cmdline()) for p in ray_pids if psutil.pid_exists(p))
    assert socks and all(ok for _, _, ok in socks), socks
    assert "dashboard/dashboard.py" not in names or "--disable-frontend" in names  # no dashboard UI
    deadline = time.monotonic() + 20
    while any(_alive(p) for p in ray_pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [p for p in ray_pids if _alive(p)]


@pytest.mark.ray
@pytest.mark.timeout(180)
def test_a_ray_actor_serves_its_tasks_in_order_like_a_local_worker():
    """Async actors used to overlap their tasks, so a slow task did not delay the ones queued behind it."""
    pytest.importorskip("ray")
    from gencc.runtime.events import Task, TaskResult
    from gencc.runtime.faults import TaskFault
    from gencc.runtime.backends.ray import RayBackend

    with pytest.raises(ValueError, match="max_concurrency"):
        RayBackend(MODEL, 1, max_concurrency=0)
    be = RayBackend(MODEL, 1)
    be.start()
    try:
        t0 = time.monotonic()
        be.submit(0, Task(0, 0, np.ones(2), TaskFault(delay=1.0)))  # slow
        be.submit(0, Task(1, 0, np.ones(2)))  # queued behind it
        done = {}
        while len(done) < 2 and time.monotonic() - t0 < 60:
            for ev in be.poll(0.1):
                assert isinstance(ev, TaskResult)
                done[ev.batch] = time.monotonic() - t0
        assert set(done) == {0, 1} and done[1] >= 1.0 and done[1] >= done[0]
    finally:
        be.shutdown()


@pytest.mark.parametrize("backend", ["local", pytest.param("ray", marks=pytest.mark.ray)])
@pytest.mark.timeout(240)
def test_short_chaos_soak_accounts_for_every_input(backend):
    """The benchmark's soak, small: every fault kind at once, from inside and outside, and bad inputs."""
    from gencc.experiments.chaos import chaos_soak

    X = RNG.uniform(-3, 3, size=(50, 3))
    faults = Faults(latency=gencc.stragglers.SlowNodes(base=0.002, fraction=0.05, slowdown=20),
                    crash=0.01, hang=0.01, error=0.02, nan=0.02, wrong_shape=0.02, seed=5)
    r = chaos_soak(MODEL, f, gencc.GCC(4, 12), X, task="regression", backend=backend, n_inputs=600,
                   faults=faults, signal_every=0.3, bad_input_rate=0.02, seed=5, hang_timeout=0.5,
                   backend_options=_opts(backend))
    assert r.finished and r.seconds < r.bound_s
    assert r.lost == 0 and r.answers + r.errors == 600
    assert r.bad_inputs > 0 and r.bad_inputs_rejected == r.bad_inputs
    assert r.fewest_returns >= r.trusted_returns == 4
    assert r.stats.get("crashes", 0) + r.stats.get("hangs", 0) > 0 and sum(r.signals.values()) > 0
    assert r.pids_left == 0
    if backend == "local":  # replaced workers came up during the run
        assert r.pids_seen > 12
    # a Ray actor takes seconds to start on 2 busy cores, and the soak can end first (measured: 12
    # restarts, none ready within the 19 s run); test_a_restarted_ray_actor_comes_back checks them


@pytest.mark.ray
@pytest.mark.timeout(180)
def test_a_restarted_ray_actor_comes_back_after_sigstop_and_sigkill():
    pytest.importorskip("ray")
    from gencc.runtime.events import WorkerReady
    from gencc.runtime.backends.ray import RayBackend

    be = RayBackend(MODEL, 4)
    be.start()
    try:
        old = list(be.pids)
        os.kill(old[1], signal.SIGSTOP)
        os.kill(old[2], signal.SIGKILL)
        be.restart(1)
        be.restart(2)
        ready, end = set(), time.monotonic() + 120
        while ready != {1, 2} and time.monotonic() < end:
            ready.update(ev.worker for ev in be.poll(0.1) if isinstance(ev, WorkerReady))
        assert ready == {1, 2} and be.restarts == [0, 1, 1, 0]
        assert be.pids[1] not in old and be.pids[2] not in old and be.pids[0] == old[0]
        assert not _alive(old[2])
    finally:
        be.shutdown()
    end = time.monotonic() + 15
    while any(_alive(p) for p in old + be.pids if p) and time.monotonic() < end:
        time.sleep(0.1)
    assert not any(_alive(p) for p in old + be.pids if p)


@pytest.mark.parametrize("backend", ["local", "threads", pytest.param("ray", marks=pytest.mark.ray)])
@pytest.mark.timeout(120)
def test_a_hung_worker_is_restarted_while_batches_keep_finishing_without_it(backend):
    """Defect 2, on both backends: finished batches cancel the hung task, which must not hide the hang."""
    scheme = gencc.GCC(3, 6)
    with CodedExecutor(MODEL, scheme, backend, n_wait=5, timeout=20, hang_timeout=1.0,
                       faults=Faults(workers={2: "hang"}), backend_options=_opts(backend)) as ex:
        end = time.monotonic() + 30
        n = 0
        while not ex.backend.restarts[2] and time.monotonic() < end:
            res = ex.submit(RNG.uniform(-1, 1, size=(3, 2))).result(timeout=30)
            assert 2 not in res.returned
            n += 1
        assert ex.backend.restarts[2] >= 1 and ex.stats["hangs"] >= 1 and n > 3
