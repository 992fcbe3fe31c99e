"""The load experiment's pieces (``gencc.experiments.load``): arrivals, straggler processes, and an
open-loop run of every scheme that counts every request as answered, failed or lost."""

import time

import numpy as np
import pytest

from gencc.experiments.load import (LoadRun, arrival_times, make_executor, run_open_loop, straggler_model,
                                    summarize, worker_stragglers)
from gencc.runtime import WorkerStragglers
from gencc.runtime.coordinator import covers

from test_runtime import MODEL, _opts, f

K, N = 2, 4


def test_arrivals_are_seeded_poisson_with_the_asked_rate():
    t = arrival_times(rate=50.0, n=20_000, seed=3)
    np.testing.assert_array_equal(t, arrival_times(rate=50.0, n=20_000, seed=3))
    gaps = np.diff(t)
    assert np.all(gaps > 0)
    assert abs(gaps.mean() * 50.0 - 1.0) < 0.03  # mean gap 1/rate (sd of the mean: 0.7%)
    assert abs(gaps.std() / gaps.mean() - 1.0) < 0.05  # exponential: coefficient of variation 1


def test_straggler_processes_and_a_clear_error_for_an_unknown_one():
    rng = np.random.default_rng(0)
    slow = straggler_model("slow-nodes", base=0.01).sample(20_000, rng)
    assert 0.04 < np.mean(slow > 0.05) < 0.06  # 5% of tasks 10x slow
    with pytest.raises(ValueError, match="stragglers must be one of"):
        straggler_model("slowish", base=0.01)


@pytest.mark.parametrize("name", ["uncoded", "replication", "hedged", "gcc-sys", "gcc-sys-direct", "gcc-sys-any",
                                  "gcc-sys-direct-any", "gcc", "bacc"])
def test_an_open_loop_run_answers_every_request(name):
    X = np.random.default_rng(5).uniform(-1, 1, size=(24, 2))
    faults = WorkerStragglers(straggler_model("slow-nodes", base=0.002), N, seed=1)
    with make_executor(name, MODEL, K, N, micro_batch=2, base=0.002, window=0.004, faults=faults,
                       backend="threads") as ex:
        if name.endswith("-any"):  # decodes at the deadline from K - 1 returns
            assert ex.n_min == K - 1
        assert getattr(ex, "direct_dispatch", False) == ("direct" in name)
        run = run_open_loop(ex, X, arrival_times(rate=400.0, n=len(X), seed=2), run_limit=30.0)
    row = summarize(run, f(X), offered=0.5)
    assert run.lost == 0 and run.errors == 0 and run.answered.all()
    assert np.isfinite(run.latencies).all()
    if name in ("uncoded", "replication", "hedged"):  # exact answers
        np.testing.assert_allclose(run.outputs, f(X), rtol=1e-12, atol=1e-12)
        assert run.said_exact.all() and row["said_exact"] == 1.0
    if name in ("gcc", "bacc"):  # every answer decoded
        assert not run.said_exact.any()
    assert row["said_exact_wrong"] == 0  # an answer called exact is f's own output
    assert run.said_untrusted.any() <= name.endswith("-any")  # only a decode from K - 1 is untrusted
    assert row["lost"] == row["unaccounted"] == 0 and row["answered"] == len(X)


def test_an_unknown_scheme_name_is_a_clear_error():
    with pytest.raises(ValueError, match="name must be one of"):
        make_executor("gcc-sys-fast", MODEL, K, N, micro_batch=2, base=0.002, window=0.004, faults=None,
                      backend="threads")


def test_the_deadline_and_the_hedge_quantile_are_settable_for_the_grid():
    with make_executor("hedged", MODEL, K, N, micro_batch=2, base=0.002, window=0.004, faults=None,
                       backend="threads", hedge_q=0.8, hedge_copies=3) as ex:
        assert ex._rule.q == 0.8 and ex.max_copies == 3
    with make_executor("gcc-sys-direct-any", MODEL, K, N, micro_batch=2, base=0.002, window=0.004, faults=None,
                       backend="threads", deadline_factor=1.0) as ex:
        assert ex.deadline_rule.factor == 1.0 and ex.deadline_rule.q == 0.9


def test_cpu_work_burns_the_thread_clock_not_the_wall_clock_of_a_sleep():
    from gencc.runtime.faults import TaskFault, burn_cpu, run_faulty

    t0, c0 = time.monotonic(), time.thread_time()
    assert burn_cpu(0.03) > 0
    assert time.thread_time() - c0 >= 0.03  # CPU time, which a sleep would not spend
    assert time.monotonic() - t0 >= 0.03
    c0 = time.thread_time()
    y = run_faulty(lambda: np.arange(3.0), TaskFault(work=0.02))
    assert time.thread_time() - c0 >= 0.02
    np.testing.assert_array_equal(y, np.arange(3.0))  # the work changes no output


def test_a_cpu_straggler_process_gives_every_task_its_work_and_no_delay():
    faults = worker_stragglers("cpu-hog", 0.01, 3, seed=2, cpu=True)
    tasks = [faults.task_fault(w) for w in (0, 1, 2, 0)]
    assert all(t.work == 0.01 and t.delay == 0.0 for t in tasks)
    slept = worker_stragglers("cpu-hog", 0.01, 3, seed=2)  # the sleeping form: a delay, no work
    t = slept.task_fault(0)
    assert t.work == 0.0 and 0.01 <= t.delay <= 0.0105
    with pytest.raises(ValueError, match="stragglers must be 'none' or 'cpu-hog'"):
        worker_stragglers("slow-nodes", 0.01, 3, seed=2, cpu=True)
    with pytest.raises(ValueError, match="work must be a finite number of seconds"):
        WorkerStragglers(None, 3, work=-1.0)


@pytest.mark.parametrize("backend", ["local", "threads"])
def test_task_cpu_work_reaches_the_worker_and_shows_in_its_compute_time(backend):
    X = np.random.default_rng(1).uniform(-1, 1, size=(8, 2))
    faults = worker_stragglers("none", 0.02, N, seed=0, cpu=True)
    with make_executor("gcc-sys", MODEL, K, N, micro_batch=2, base=0.02, window=0.004, faults=faults,
                       backend=backend, backend_options=_opts(backend)) as ex:
        res = ex.submit(X[:4]).result(timeout=30)
    np.testing.assert_allclose(res.outputs[res.decode_info["exact"]], f(X[:4])[res.decode_info["exact"]],
                               rtol=1e-12)
    assert res.compute_seconds and min(res.compute_seconds.values()) >= 0.02  # each task burned its 20 ms first


def test_latency_quantiles_count_a_failed_request_as_infinitely_late():
    from gencc.experiments.load import latency_quantile

    lat = np.random.default_rng(4).exponential(0.05, size=1000)
    every = np.ones(1000, dtype=bool)
    for p in (50, 99, 99.9):
        assert latency_quantile(lat, every, p) == pytest.approx(np.percentile(lat, p), rel=1e-12)
    failed = every.copy()
    failed[[3, 500]] = False  # 0.2% of requests got no answer: above the 0.1% that p99.9 leaves
    assert latency_quantile(lat, failed, 99.9) == np.inf
    assert np.isfinite(latency_quantile(lat, failed, 99))
    assert np.isnan(latency_quantile(np.array([]), np.array([], dtype=bool), 50))


def test_errors_of_one_kind_count_together_whatever_their_batch():
    from gencc.errors import BatchFailedError
    from gencc.experiments.load import error_kind

    a = error_kind(BatchFailedError(18, {0: "hung"}, 2, 3, "timed out after 30 s"))
    assert a == error_kind(BatchFailedError(212, {4: "hung"}, 2, 3, "timed out after 30 s"))
    assert a.startswith("BatchFailedError: batch #") and "#" in a and "18" not in a


def test_parm_has_no_special_floor_the_gather_waits_for_the_task_that_answers_its_inputs():
    from gencc.workloads import WorkloadFactory

    with make_executor("parm", WorkloadFactory("lenet5"), 4, 5, micro_batch=2, base=0.002, window=0.004,
                       faults=None, backend="threads") as ex:
        assert ex.n_min is None
        scheme = ex.scheme
        # K - 1 systematic returns with the last systematic task and the parity still out: not a cover
        assert not covers(scheme, [0, 1, 2], {3: 3, 4: 4})
        assert covers(scheme, [0, 1, 2, 4], {3: 3})  # the parity fills the one gap
        assert scheme.available([0, 1, 2, 4]).all()


def test_summarize_rates_the_decoded_answers_on_their_own():
    truth = np.array([[0.0, 1.0, 0.0], [2.0, 0.0, 0.0], [0.0, 0.0, 3.0], [1.0, 0.0, 0.0]])
    outputs = np.array([truth[0],  # exact
                        [1.5, 0.2, 0.1],  # decoded, same argmax
                        [0.0, 2.0, 1.0],  # decoded, wrong argmax
                        [np.nan] * 3])  # never answered
    answered = np.array([True, True, True, False])
    run = LoadRun(latencies=np.array([0.01, 0.02, 0.03, np.nan]), answered=answered, errors=1, lost=0,
                  outputs=outputs, duration_s=1.0, said_exact=np.array([True, False, False, False]),
                  said_untrusted=np.array([False, False, True, False]))
    row = summarize(run, truth, offered=1.0)
    assert row["agreement"] == pytest.approx(2 / 3) and row["exact"] == pytest.approx(1 / 3)
    assert row["decoded_agreement"] == pytest.approx(1 / 2)
    seeds = _load_seeds_module()  # runs written before the column: the same figure from the shares
    assert seeds.decoded_agreement({"agreement": row["agreement"], "exact": row["exact"]}) == pytest.approx(1 / 2)
    assert np.isnan(seeds.decoded_agreement({"agreement": 1.0, "exact": 1.0}))
    run.outputs = truth.copy()  # all exact: no decoded answer to rate
    run.answered[:] = True
    assert np.isnan(summarize(run, truth, offered=1.0)["decoded_agreement"])


def _load_seeds_module():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "load_seeds.py"
    spec = importlib.util.spec_from_file_location("load_seeds", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
