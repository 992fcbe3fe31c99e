"""The load experiment's pieces (``gencc.experiments.load``): arrivals, straggler processes, and an
open-loop run of every scheme that counts every request as answered, failed or lost."""

import numpy as np
import pytest

from gencc.experiments.load import arrival_times, make_executor, run_open_loop, straggler_model, summarize
from gencc.runtime import WorkerStragglers

from test_runtime import MODEL, f

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
        assert ex._adaptive.factor == 1.0 and ex._adaptive.q == 0.9
