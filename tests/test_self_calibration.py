"""Self-calibration: its tests drop the right workers, its scores are the errors they claim, it
switches when (and only when) a decoder is better with confidence, and the executor uses it."""

import math

import numpy as np
import pytest

from gencc import GCC, BACC
from gencc.schemes.self_calibration import SelfCalibration, calibration_tests, choose

W = np.random.default_rng(3).normal(size=(3, 2))


def smooth(X):
    return np.tanh(0.7 * np.asarray(X) @ W)


def _ranks(scheme):
    return np.argsort(np.argsort(scheme.beta))


def _points(K, N):
    """Each worker's rank along the systematic points, and the workers in that order."""
    ranks = _ranks(GCC(K, N, worker_points="systematic"))
    return ranks, np.argsort(ranks)


def test_tests_drop_a_copy_of_a_seen_shape_and_keep_enough_returns():
    K, N = 6, 20
    ranks, by_rank = _points(K, N)
    rng = np.random.default_rng(0)
    block = list(by_rank[8:12])  # four workers adjacent in their points
    for _ in range(200):
        missing = set(rng.choice(N, size=int(rng.integers(0, 6)), replace=False).tolist())
        F = np.array(sorted(set(range(N)) - missing))
        for kept, targets in calibration_tests(F, [block], ranks, K, K, rng, n_tests=3):
            dropped = np.setdiff1d(F, kept)
            assert kept.size >= K and set(kept) <= set(F)
            assert targets.size >= 1 and set(targets) <= set(dropped) and np.all(targets < K)
            assert dropped.size <= len(block)
            r = np.sort(ranks[dropped])  # the copy is a shifted piece of the block: within its span
            assert r[-1] - r[0] < len(block)


def test_near_copies_overlap_or_abut_the_place_of_the_stragglers():
    K, N = 8, 24
    ranks, by_rank = _points(K, N)
    rng = np.random.default_rng(3)
    near = anywhere = 0
    for lo in range(0, N - 4):
        block = by_rank[lo:lo + 4]  # the stragglers of this batch: four adjacent points
        F = np.setdiff1d(np.arange(N), block)
        for kept, targets in calibration_tests(F, [list(block)], ranks, K, K, rng, n_tests=4):
            r = ranks[np.setdiff1d(F, kept)]
            if r.min() >= lo - 4 and r.max() <= lo + 7:  # within one span of the block's own place
                near += 1
            else:
                anywhere += 1
            assert targets.size >= 1
    assert near > 0 and anywhere <= near // 4  # "anywhere" only where no nearby systematic worker returned


def test_no_test_without_room_or_without_a_returned_systematic_worker():
    K, N = 4, 10
    ranks = _ranks(GCC(K, N, worker_points="systematic"))
    rng = np.random.default_rng(1)
    assert calibration_tests(np.arange(K), [], ranks, K, K, rng) == []  # exactly K returned: no room
    assert calibration_tests(np.arange(K, N), [], ranks, K, K, rng) == []  # no systematic worker returned
    tests = calibration_tests(np.arange(N), [], ranks, K, K, rng, n_tests=5)  # no history: one worker each
    assert len(tests) == 5 and all(t.size == 1 and k.size == N - 1 for k, t in tests)


def test_choose_switches_only_with_confidence_and_margin():
    rng = np.random.default_rng(2)
    base = rng.normal(size=(40, 1))
    noise = 0.1 * rng.normal(size=(40, 3))
    better = np.hstack([base, base + math.log(2), base - math.log(2)]) + noise  # candidate 2: half the MSE
    assert choose(better, 0) == 2
    assert choose(better[:5], 0) == 0  # fewer than min_trials
    same = np.hstack([base, base, base]) + noise  # equal but for noise
    assert choose(same, 0) == 0
    slightly = np.hstack([base, base, base - math.log(1.05)]) + 0.001 * noise  # 5% better: under the margin
    assert choose(slightly, 0) == 0
    assert choose(slightly, 0, margin=1.01) == 2


def test_scores_are_each_candidates_error_on_the_dropped_systematic_workers():
    K, N = 5, 16
    scheme = GCC(K, N, kernel="matern12", scale=0.1, lam_dec=1e-2, worker_points="systematic")
    cal = SelfCalibration(scheme, configs=[("sobolev2", 1.0, 1e-8)], seed=4)
    rng = np.random.default_rng(5)
    X = rng.uniform(-1, 1, size=(K, 3))
    Y = smooth(scheme.encode(X))  # (N, 2)
    F = np.array([n for n in range(N) if n not in (7, 8)])
    state = np.random.default_rng(4)  # replay the calibration's own draws: the column, then the tests
    state.integers(1)
    tests = calibration_tests(F, [[7, 8]], cal._ranks, K, K, state, cal.tests_per_batch)
    cal.observe(Y[F][:, None, :], F)
    scores = np.array(cal._scores)
    assert scores.shape == (len(tests), 2)
    scale = float(np.mean(Y[F] ** 2))
    truth = smooth(X)  # systematic workers' outputs are f(x_k) exactly
    for (kept, targets), row in zip(tests, scores):
        for c, cand in enumerate(cal.candidates):
            est = cand.decode(Y[kept], kept)[targets]
            mse = float(np.mean((est - truth[targets]) ** 2)) / scale
            assert row[c] == pytest.approx(math.log(max(mse, 1e-12)), abs=1e-6)  # f(x_k) up to encode round-off


def test_switches_from_a_bad_decoder_to_a_good_one_and_reports_it():
    K, N = 6, 18
    bad = GCC(K, N, kernel="matern12", scale=0.1, lam_dec=1e-2, worker_points="systematic")
    cal = SelfCalibration(bad, configs=[("sobolev2", 1.0, 1e-8), ("matern52", 1.0, 1e-8)], min_trials=6)
    rng = np.random.default_rng(6)
    for _ in range(20):
        X = rng.uniform(-1, 1, size=(K, 3))
        Y = smooth(bad.encode(X))
        start = int(rng.integers(0, N - 3))
        F = np.array([n for n in range(N) if not start <= n < start + 3])
        cal.observe(Y[F][:, None, :], F)
    rep = cal.report()
    assert cal.current != 0 and rep["current"] == cal.labels[cal.current]
    assert rep["switches"] and rep["switches"][0]["from"].startswith("as configured")
    assert rep["switches"][0]["mse_ratio"] < 1 / 1.1
    in_use = [r for r in rep["candidates"] if r["in_use"]]
    assert len(in_use) == 1 and in_use[0]["mse_ratio"] == 1.0 and in_use[0]["decoder"] == rep["current"]
    ratios = [r["mse_ratio"] for r in rep["candidates"]]
    assert ratios == sorted(ratios)  # best first
    bad_row = next(r for r in rep["candidates"] if r["decoder"].startswith("as configured"))
    assert bad_row["low"] > 1.0  # the starting decoder is measured worse with confidence
    assert rep["tests_seen"] >= 20 and rep["busy_seconds"] > 0


def test_needs_a_systematic_scheme_with_decoder_parameters():
    with pytest.raises(ValueError, match="systematic"):
        SelfCalibration(GCC(4, 10))
    with pytest.raises(ValueError, match="kernel, scale and lam_dec"):
        SelfCalibration(BACC(4, 10, worker_points="systematic"))
    with pytest.raises(ValueError, match="configs may set only"):
        SelfCalibration(GCC(4, 10, worker_points="systematic"), configs=[{"kernel": "sobolev2", "mix": 2}])
    with pytest.raises(ValueError, match="window"):
        SelfCalibration(GCC(4, 10, worker_points="systematic"), window=1)
    with pytest.raises(TypeError, match="CodingScheme"):
        SelfCalibration("gcc")
    with pytest.raises(ValueError, match="shape"):
        SelfCalibration(GCC(4, 10, worker_points="systematic")).observe(np.ones((3, 2)), [0, 1, 2, 3])


def _factory():
    return smooth


def test_executor_switches_its_decoder_on_live_traffic():
    from gencc.runtime import CodedExecutor, Faults

    K, N = 4, 12
    bad = GCC(K, N, kernel="matern12", scale=0.1, lam_dec=1e-2, worker_points="systematic")
    good = bad.with_params(kernel="sobolev2", scale=1.0, lam_dec=1e-8)
    cal = SelfCalibration(bad, configs=[("sobolev2", 1.0, 1e-8)], min_trials=6)
    faults = Faults(workers={1: "slow", 2: "slow", 3: "slow"}, slow_delay=5.0)  # a block of systematic workers
    rng = np.random.default_rng(7)
    with CodedExecutor(_factory, bad, "threads", n_wait=N - 3, timeout=20, faults=faults,
                       self_calibrate=cal) as ex:
        for _ in range(12):
            ex.submit(rng.uniform(-1, 1, size=(K, 3))).result(timeout=30)
            ex.decoder_report(wait=10)  # score every batch, for a deterministic test
        rep = ex.decoder_report(wait=10)
        assert rep["current"] == "sobolev2@1, lam 1e-08" and rep["skipped_batches"] == 0
        X = rng.uniform(-1, 1, size=(K, 3))
        res = ex.submit(X).result(timeout=30)
    ret = np.array(res.returned)
    expected = good.decode(smooth(good.encode(X))[ret], ret)
    np.testing.assert_allclose(res.outputs, expected, rtol=1e-9, atol=1e-12)  # decoded by the chosen decoder
    assert rep["cpu_share"] == pytest.approx(0.1)


def test_executor_refuses_self_calibration_it_cannot_do():
    from gencc.runtime import CodedExecutor

    with pytest.raises(ValueError, match="systematic"):
        CodedExecutor(_factory, GCC(4, 8), "threads", self_calibrate=True)
    with pytest.raises(TypeError, match="self_calibrate"):
        CodedExecutor(_factory, GCC(4, 8, worker_points="systematic"), "threads", self_calibrate="yes")
    with CodedExecutor(_factory, GCC(4, 8, worker_points="systematic"), "threads") as ex:
        with pytest.raises(RuntimeError, match="self_calibrate=True"):
            ex.decoder_report()


def test_stream_bench_scores_every_decoder_against_the_grid_in_hindsight():
    from gencc.experiments.self_calibration_bench import run_drift, score_stream
    from gencc.schemes.gcc import CALIBRATION_GRID
    from gencc.stragglers import BlockStragglers

    X = np.random.default_rng(8).uniform(-1, 1, size=(64, 3))
    res = score_stream(smooth, X, 3, 9, BlockStragglers(2, 1), batches=8, seed=1, calibrate_rounds=2)
    assert set(res["ratio"]) == {"gcc", "self-cal", "calibrated"}
    assert res["ratio"]["calibrated"] >= 1 - 1e-12  # calibrate picks one of the grid, the oracle is its best
    names = {f"{k}@{sc:g},{lam:g}" for k, sc, lam in CALIBRATION_GRID}
    assert res["oracle"] in names and res["oracle_mse"] <= res["mse"]["calibrated"]
    drift = run_drift(seed=2, K=3, N=9, batches=12)
    assert all(len(v) == 12 for v in drift["errors"].values()) and drift["drift_at"] == 6
    assert all(p["oracle_decoder"] in names for p in drift["phase_mse"])
    decoded = [e for e in drift["errors"]["gcc"] if not np.isnan(e)]
    assert decoded and min(decoded) >= 1e-12  # floored, never zero


def test_docstring_examples_run():
    import doctest

    from gencc.schemes import self_calibration

    result = doctest.testmod(self_calibration, raise_on_error=False)
    assert result.attempted >= 5 and result.failed == 0

