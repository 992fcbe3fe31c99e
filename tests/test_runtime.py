"""The runtime on real workers: every wait bounded, loopback only."""

import os
import signal
import time

import numpy as np
import pytest

import gencc
from gencc.experiments.chaos import process_alive as _alive
from gencc.runtime import BatchFailedError, CodedExecutor, Faults

MODEL = "_models:xsinx"
RNG = np.random.default_rng(0)
BACKENDS = ["local", "threads", pytest.param("ray", marks=pytest.mark.ray)]


def f(X):
    return X * np.sin(X)


def _opts(backend):
    if backend == "ray":
        pytest.importorskip("ray")
        return {}
    if backend == "threads":
        return {}
    return {"preload": ("gencc.runtime.backends.worker", "_models")}


@pytest.fixture(autouse=True)
def _importable_models(monkeypatch):
    monkeypatch.syspath_prepend(os.path.dirname(__file__))
    monkeypatch.setenv("PYTHONPATH", os.path.dirname(__file__) + os.pathsep + os.environ.get("PYTHONPATH", ""))


@pytest.mark.parametrize("backend", BACKENDS)
def test_faulty_workers_are_erasures_and_outputs_match_the_simulation(backend):
    scheme = gencc.GCC(4, 10)
    faults = Faults(workers={2: "error", 5: "nan", 7: "wrong_shape", 8: "crash"})
    X = RNG.uniform(-3, 3, size=(4, 3))
    with CodedExecutor(MODEL, scheme, backend, timeout=60, backend_options=_opts(backend), faults=faults) as ex:
        res = ex.submit(X).result(timeout=90)
        pids = list(ex.backend.pids)
    assert set(res.failed) == {2, 5, 7, 8}
    assert "nan" in res.failed[5] and "shape" in res.failed[7] and "error" in res.failed[2]
    ret = np.array(res.returned)
    assert ret.tolist() == [0, 1, 3, 4, 6, 9]
    expected = scheme.decode(f(scheme.encode(X))[ret], ret)
    np.testing.assert_allclose(res.outputs, expected, rtol=1e-9, atol=1e-12)
    assert set(res.latencies) == set(res.returned) and res.wall_time > 0
    assert res.error_estimate is not None
    if backend == "local":  # shutdown leaves no process behind
        assert not any(_alive(p) for p in pids)


@pytest.mark.parametrize("backend", BACKENDS)
def test_map_returns_one_result_per_input_in_order(backend):
    scheme = gencc.Replication(3, 6)
    inputs = list(RNG.uniform(-3, 3, size=(10, 2)))  # not a multiple of K = 3
    with CodedExecutor(MODEL, scheme, backend, timeout=60, backend_options=_opts(backend), max_in_flight=2) as ex:
        outs = list(ex.map(inputs))
    assert len(outs) == 10
    np.testing.assert_allclose(np.stack(outs), f(np.stack(inputs)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_hang_past_the_deadline_is_decoded_around(backend):
    scheme = gencc.BACC(3, 8)
    faults = Faults(workers={3: "hang"})
    with CodedExecutor(MODEL, scheme, backend, deadline=1.0, hang_timeout=4.0, timeout=30,
                       backend_options=_opts(backend), faults=faults) as ex:
        t0 = time.monotonic()
        res = ex.submit(RNG.uniform(-1, 1, size=(3, 2))).result(timeout=30)
        took = time.monotonic() - t0
        assert 3 not in res.returned and len(res.returned) == 7
        assert took < 4.0  # decoded at the deadline, not after the hang was detected
        # the hung worker is restarted and the next batch still gets an answer
        res2 = ex.submit(RNG.uniform(-1, 1, size=(3, 2))).result(timeout=30)
        assert len(res2.returned) == 7


def test_worker_killed_mid_run_loses_no_input():
    scheme = gencc.Replication(4, 8)  # exact answers, so order and completeness are checked exactly
    inputs = list(RNG.uniform(-3, 3, size=(24, 2)))
    faults = Faults(latency=gencc.stragglers.ShiftedExponential(0.05, 20.0), seed=1)
    with CodedExecutor(MODEL, scheme, timeout=30, backend_options=_opts("local"), faults=faults,
                       max_in_flight=2) as ex:
        victim = ex.backend.pids[1]
        outs = []
        for i, y in enumerate(ex.map(inputs)):
            if i == 3:
                os.kill(victim, signal.SIGKILL)
            outs.append(y)
        assert ex.stats["crashes"] >= 1
        assert ex.backend.restarts[1] >= 1
    assert len(outs) == 24 and all(np.all(np.isfinite(o)) for o in outs)
    np.testing.assert_allclose(np.stack(outs), f(np.stack(inputs)))


def test_too_few_returns_fails_the_batch_clearly_or_redispatches():
    scheme = gencc.LCC(3, 6, degree=1)  # needs 3 of 6
    faults = Faults(workers={0: "error", 1: "error", 2: "error", 3: "error"})
    X = RNG.uniform(-1, 1, size=(3, 2))
    with CodedExecutor(MODEL, scheme, timeout=20, backend_options=_opts("local"), faults=faults) as ex:
        with pytest.raises(BatchFailedError, match=r"batch 0 failed \(too few workers returned\): [0-2] usable results, 3 needed.*0: error") as e:
            ex.submit(X).result(timeout=30)
        assert set(e.value.failed) == {0, 1, 2, 3}
        outs = list(ex.map(list(X), return_exceptions=True))
        assert all(isinstance(o, BatchFailedError) for o in outs) and len(outs) == 3
    with CodedExecutor(MODEL, scheme, timeout=20, on_insufficient="redispatch", backend_options=_opts("local"),
                       faults=faults) as ex:
        res = ex.submit(X).result(timeout=30)
        assert len(res.returned) >= 3 and ex.stats["redispatched"] >= 1
        np.testing.assert_allclose(res.outputs, scheme.decode(f(scheme.encode(X))[list(res.returned)],
                                                              list(res.returned)))


def test_replication_missing_input_is_an_explicit_error_in_map():
    scheme = gencc.Replication(2, 4)
    faults = Faults(workers={1: "error", 3: "error"})  # both copies of input 1
    with CodedExecutor(MODEL, scheme, timeout=20, backend_options=_opts("local"), faults=faults) as ex:
        outs = list(ex.map([np.ones(2), 2 * np.ones(2)], return_exceptions=True))
    np.testing.assert_allclose(outs[0], f(np.ones(2)))
    assert isinstance(outs[1], gencc.MissingOutputsError)


def test_bad_arguments_fail_at_construction():
    s = gencc.GCC(3, 6)
    with pytest.raises(ValueError, match=r"n_wait must be in \[3, 6\].*got 7"):
        CodedExecutor(MODEL, s, n_wait=7)
    with pytest.raises(ValueError, match=r"n_wait must be in \[3, 6\].*trusted returns 3.*got 2"):
        CodedExecutor(MODEL, s, n_wait=2)  # below K without lowering n_min knowingly
    with pytest.raises(ValueError, match="hang_timeout must be > 0"):
        CodedExecutor(MODEL, s, hang_timeout=0)
    with pytest.raises(TypeError, match="scheme must be a coding scheme.*got 'gcc'"):
        CodedExecutor(MODEL, "gcc")
    with pytest.raises(TypeError, match="model must be picklable"):
        CodedExecutor(lambda: f, s)
    with pytest.raises(ValueError, match="n_workers must be >= n_inputs = 4"):
        gencc.GCC(4, 3)
    with pytest.raises(TypeError, match="model must be picklable"):
        CodedExecutor(MODEL, gencc.ParM(2, parity_model=lambda X: X), backend_options=_opts("local"))
    with pytest.raises(ValueError, match="deadline must be a finite number >= 0"):
        CodedExecutor(MODEL, s, deadline=-1)
    with pytest.raises(ValueError, match="on_insufficient must be one of"):
        CodedExecutor(MODEL, s, on_insufficient="pray")
    with pytest.raises(ValueError, match="backend must be"):
        CodedExecutor(MODEL, s, backend="mpi")
    with pytest.raises(ValueError, match="(?s)model cannot be built on worker.*no weights here"):
        CodedExecutor("_models:broken", s, backend_options=_opts("local"))
    with pytest.raises(ValueError, match="model path must look like"):
        CodedExecutor("no_colon_here", s, backend_options=_opts("local"))


def test_run_batches_times_every_batch_and_marks_unanswered_inputs():
    from gencc.experiments.latency import latency_summary, run_batches

    scheme = gencc.LCC(2, 4, degree=1)  # needs 2 of 4
    X = RNG.uniform(-1, 1, size=(6, 2))
    run = run_batches(MODEL, scheme, X, timeout=20, backend_options=_opts("local"))
    assert run.failed == 0 and run.walls.shape == (3,) and run.answered.all()
    np.testing.assert_allclose(run.outputs, scheme.decode(f(scheme.encode(X[:2])), range(4)).tolist()
                               + scheme.decode(f(scheme.encode(X[2:4])), range(4)).tolist()
                               + scheme.decode(f(scheme.encode(X[4:])), range(4)).tolist(), rtol=1e-9, atol=1e-12)
    bad = run_batches(MODEL, scheme, X, timeout=20, backend_options=_opts("local"),
                      faults=Faults(workers={0: "error", 1: "error", 2: "error"}))
    assert bad.failed == 3 and bad.walls.shape == (3,) and not bad.answered.any()
    assert bad.outputs.shape == (6, 0)  # no batch answered: output shape unknown
    with pytest.raises(ValueError, match="multiple of K = 2"):
        run_batches(MODEL, scheme, X[:5])
    s = latency_summary([1.0, 2.0, 3.0, 4.0])
    assert s["p50_s"] == 2.5 and s["mean_s"] == 2.5 and 3.9 < s["p99_s"] <= s["p999_s"] <= 4.0
    assert np.isnan(latency_summary([])["p99_s"])


def test_parm_runs_its_parity_model_on_the_parity_worker():
    import _models

    scheme = gencc.ParM(2, parity_model=_models.twice)
    X = RNG.uniform(-3, 3, size=(2, 3))
    with CodedExecutor(MODEL, scheme, timeout=20, backend_options=_opts("local"),
                       faults=Faults(workers={0: "error"})) as ex:
        res = ex.submit(X).result(timeout=30)
    assert res.returned == (1, 2)
    np.testing.assert_allclose(res.outputs[1], f(X[1]))
    np.testing.assert_allclose(res.outputs[0], 2 * (X[0] + X[1]) - f(X[1]))  # F_P(x0 + x1) - f(x1)


def test_the_executor_calibrates_its_scheme_at_start_up():
    X = RNG.uniform(-3, 3, size=(40, 2))
    cal = {"X": X, "stragglers": gencc.stragglers.RandomStragglers(2), "rounds": 2,
           "grid": [("sobolev2", 1.0, 1e-8), ("matern32", 0.5, 1e-6)]}
    with CodedExecutor(MODEL, gencc.GCC(4, 8), n_wait=6, timeout=20, calibration=cal,
                       backend_options=_opts("local")) as ex:
        assert not ex.scheme.adaptive and len(ex.scheme.calibration_) == 2
        res = ex.submit(X[:4]).result(timeout=30)
    ret = list(res.returned)
    np.testing.assert_allclose(res.outputs, ex.scheme.decode(f(ex.scheme.encode(X[:4]))[ret], ret), rtol=1e-9)
    with pytest.raises(ValueError, match="calibration must be a dict with keys 'X' and 'stragglers'"):
        CodedExecutor(MODEL, gencc.GCC(4, 8), calibration={"X": X})


def _xsinx():
    return f


def test_a_slow_decode_holds_no_lock_that_submitters_or_stats_readers_need():
    """The dispatcher decodes outside the executor's lock: while one batch's decode is stuck, a
    second batch is accepted (submit registers it under the lock) and ``stats`` reads through."""
    import threading

    armed, entered, gate = threading.Event(), threading.Event(), threading.Event()

    class GatedGCC(gencc.GCC):
        def decode_with_info(self, Y, returned):
            if armed.is_set():
                entered.set()
                gate.wait(timeout=30)
            return super().decode_with_info(Y, returned)

    scheme = GatedGCC(2, 4, kernel="sobolev2", lam_dec=1e-6)
    X1, X2 = RNG.uniform(-1, 1, size=(2, 3)), RNG.uniform(-1, 1, size=(2, 3))
    with CodedExecutor(_xsinx, scheme, "threads", timeout=60) as ex:
        armed.set()
        first = ex.submit(X1)
        assert entered.wait(timeout=30), "the first batch never reached its decode"
        accepted = threading.Event()
        second = []
        t = threading.Thread(target=lambda: (second.append(ex.submit(X2)), dict(ex.stats), accepted.set()))
        t.start()
        try:
            assert accepted.wait(timeout=10), "submit waited for another batch's decode"
            assert not first.done()
        finally:
            armed.clear()
            gate.set()
            t.join(timeout=30)
        np.testing.assert_allclose(first.result(timeout=60).outputs, scheme.decode(
            f(scheme.encode(X1)), range(4)), atol=1e-12)
        assert second[0].result(timeout=60).outputs.shape == (2, 3)
