"""Gap-aware decoder selection and GCC.calibrate."""

import numpy as np
import pytest

import gencc
from gencc.kernels import make_kernel
from gencc.ridge.holes import _hole_ranges
from gencc.ridge import KernelRidge, hole_blocks, hole_residuals, hole_rmse, ridge_path, select_ridge
from gencc.stragglers import NoStragglers, RandomStragglers


def _xsinx(X):
    return X * np.sin(X)


def test_block_residuals_match_refits():
    t = np.cos(np.pi * np.arange(20) / 19)[::-1]
    t = t[np.r_[0:8, 13:20]]
    Y = np.c_[np.sin(3 * t), t**3]
    alpha = gencc.points.make_points("chebyshev1", 4)
    blocks = hole_blocks(t, alpha)
    assert any(B.size >= 3 for _, B in blocks)  # the 5-node hole is copied
    for kernel in (make_kernel("sobolev2"), make_kernel("matern32", 0.5)):
        row = ridge_path(t, Y, kernel, [1e-6], targets=alpha, blocks=blocks)[0]
        np.testing.assert_allclose(row.pred, KernelRidge(kernel, 1e-6).fit(t, Y).predict(alpha), atol=1e-10)
        for (j, B), res in zip(blocks, row.block):
            keep = np.setdiff1d(np.arange(t.size), B)
            fit = KernelRidge(kernel, row.lam * t.size / keep.size).fit(t[keep], Y[keep])
            np.testing.assert_allclose(res, Y[j] - fit.predict(t[j : j + 1])[0], atol=1e-7)


def test_hole_blocks_copy_the_real_hole():
    t = np.linspace(-1, 1, 21)
    t = t[np.r_[0:8, 13:21]]  # 5 nodes missing around 0
    blocks = hole_blocks(t, [0.0])
    assert blocks and all(B.size >= 3 for _, B in blocks)  # the gap the real hole left widens them
    assert hole_blocks(t, [0.0], wide=1.5)  # that hole is wide ...
    assert hole_blocks(t, [-0.65], wide=1.5) == []  # ... one between adjacent nodes is not
    assert [B.tolist() for _, B in hole_blocks(t, [-0.65])] == [[j] for j in (2, 3, 4, 5)]


def test_each_target_is_paired_with_exactly_the_blocks_that_copy_its_hole():
    rng = np.random.default_rng(1)
    for trial in range(60):
        t = np.sort(rng.uniform(-1, 1, rng.integers(5, 30)))
        a = np.sort(rng.uniform(-1, 1, rng.integers(1, 8)))
        if trial % 3 == 0:
            a = np.r_[a, a[:1] + 1e-9]  # two targets in one hole share their blocks
        rows, tests = _hole_ranges(t, a, centres=3, return_tests=True)
        np.testing.assert_array_equal(rows, _hole_ranges(t, a, centres=3))
        for k in range(a.size):
            own = {(j, tuple(B)) for j, B in hole_blocks(t, a[k:k + 1], centres=3)}
            paired = [hole_blocks(t, a, centres=3)[r] for r in tests[tests[:, 0] == k, 1]]
            assert {(j, tuple(B)) for j, B in paired} == own


def test_hole_errors_match_refits_and_average_per_target():
    t = np.cos(np.pi * np.arange(24) / 23)[::-1][np.r_[0:9, 15:24]]
    Y = np.c_[np.sin(3 * t), np.exp(t)]
    alpha = gencc.points.make_points("chebyshev1", 5)
    kernel = make_kernel("matern52", 0.5)
    R, tests = hole_residuals(t, Y, kernel, 1e-7, alpha, centres=2)
    blocks = hole_blocks(t, alpha, centres=2)
    assert R.shape == (len(blocks), 2) and tests[:, 0].max() == alpha.size - 1
    for (j, B), res in zip(blocks, R):  # a dense refit without the block, at the same normalised ridge
        keep = np.setdiff1d(np.arange(t.size), B)
        fit = KernelRidge(kernel, 1e-7 * t.size / keep.size, solver="dense").fit(t[keep], Y[keep])
        np.testing.assert_allclose(res, Y[j] - fit.predict(t[j:j + 1])[0], atol=1e-7)
    rmse = hole_rmse(R, tests, alpha.size)
    for k in range(alpha.size):
        rows = tests[tests[:, 0] == k, 1]
        np.testing.assert_allclose(rmse[k], np.sqrt(np.mean(R[rows] ** 2)))
    # a target with no test of its own has no estimate (or the one asked for); no test at all: the fallback
    partial = hole_rmse(R, tests[tests[:, 0] != 0], alpha.size)
    assert partial[0] == np.inf and np.all(np.isfinite(partial[1:]))
    np.testing.assert_allclose(partial[1:], rmse[1:])
    assert hole_rmse(R, tests[tests[:, 0] != 0], alpha.size, untested=0.5)[0] == 0.5
    np.testing.assert_allclose(hole_rmse(R[:0], tests[:0], 3, fallback=4.0), [2.0, 2.0, 2.0])


def test_an_input_whose_hole_no_test_can_copy_gets_no_bound():
    K, N = 2, 15
    s = gencc.GCC(K, N)
    X = np.array([[-1.0], [1.2]])
    Y = np.tanh(s.encode(X))
    order = np.argsort(s.beta)
    ret = np.sort(order[np.r_[0:3, 9:15]])  # six adjacent workers missing: alpha_0's hole spans most of [-1, 1]
    got = s.decode_with_info(Y[ret], ret)
    assert got.info["rmse"][0] == np.inf and got.info["rmse_p90"][0] == np.inf
    assert np.isfinite(got.info["rmse"][1])  # the other input's hole is copied by tests
    fixed = gencc.GCC(K, N, kernel="sobolev2")  # the cached fixed decoder says the same
    fixed.set_decoder_cache(8)
    for _ in range(2):
        info = fixed.decode_with_info(Y[ret], ret).info
        assert info["rmse"][0] == np.inf and np.isfinite(info["rmse"][1])


def test_every_decoded_input_gets_its_own_error_estimate_and_exact_ones_zero():
    X = np.random.default_rng(4).uniform(-2, 2, (6, 3))
    ret = np.r_[1:4, 9:24]
    for s in (gencc.GCC(6, 24), gencc.GCC(6, 24, kernel="matern32", scale=0.5), gencc.LeTCC(6, 24),
              gencc.GCC(6, 24, worker_points="systematic")):
        Y = _xsinx(s.encode(X))[ret]
        d = s.decode_with_info(Y, ret)
        assert d.info["rmse"].shape == d.info["rmse_p90"].shape == (6,)
        np.testing.assert_allclose(d.info["rmse_p90"], gencc.schemes.gcc.RMSE_P90_FACTOR * d.info["rmse"])
        exact = d.info.get("exact", np.zeros(6, bool))
        assert (d.info["rmse"][exact] == 0).all() and (d.info["rmse"][~exact] > 0).all()
        many = s.decode_many_with_info(np.stack([Y, 2 * Y]), ret)
        np.testing.assert_allclose(many[0].info["rmse"], d.info["rmse"], rtol=1e-9)
        np.testing.assert_allclose(many[1].info["rmse"], 2 * d.info["rmse"], rtol=1e-9)  # linear in Y


def test_gap_criterion_needs_targets():
    t = np.linspace(-1, 1, 9)
    with pytest.raises(ValueError, match="targets"):
        select_ridge(t, np.sin(t), [make_kernel("sobolev2")], criterion="gap")


def test_gap_picks_right_where_loo_picks_wrong():
    # x sin x, K = 8, N = 40, workers 12..21 straggle: leave-one-out scores one-node
    # holes and picks a kernel that cannot bridge the 10-node one.
    K, N = 8, 40
    X = np.random.default_rng(1).uniform(-3, 3, (K, 4))
    ret = np.r_[0:12, 22:40]
    errs = {}
    for crit in ("loo", "gap"):
        s = gencc.GCC(K, N, criterion=crit, mix=1)
        d = s.decode_with_info(_xsinx(s.encode(X))[ret], ret)
        errs[crit] = np.mean((d.estimate - _xsinx(X)) ** 2)
    fixed = []
    for name, sc in gencc.schemes.gcc.DEFAULT_CANDIDATES:
        s = gencc.GCC(K, N, kernel=name, scale=sc)
        fixed.append(np.mean((s.decode(_xsinx(s.encode(X))[ret], ret) - _xsinx(X)) ** 2))
    assert errs["gap"] <= 1.25 * min(fixed)
    assert errs["loo"] > 5 * errs["gap"]
    mixed = gencc.GCC(K, N)  # the default mixes the 3 best by the gap criterion
    assert np.mean((mixed.decode(_xsinx(mixed.encode(X))[ret], ret) - _xsinx(X)) ** 2) < errs["loo"] / 2


def test_mixture_decoder_matrix_matches_decode():
    s = gencc.GCC(4, 12, mix_within=np.inf)
    X = np.random.default_rng(0).uniform(-2, 2, (4, 3))
    ret = np.r_[0:3, 6:12]
    Y = np.sin(s.encode(X))[ret]
    d = s.decode_with_info(Y, ret)
    assert len(d.info["mixture"]) == 3
    np.testing.assert_allclose(s.decoder_matrix(ret, Y) @ Y, d.estimate, atol=1e-8)
    with pytest.raises(ValueError, match="mix"):
        gencc.GCC(4, 8, mix=0)
    for bad in (0.5, float("nan"), "1.5", True):
        with pytest.raises(ValueError, match="mix_within"):
            gencc.GCC(4, 8, mix_within=bad)


def test_the_mixture_takes_only_candidates_close_to_the_best():
    X = np.random.default_rng(3).uniform(-2, 2, (8, 3))
    ret = np.r_[0:5, 14:32]
    for within in (1.0, 1.5, 4.0):
        s = gencc.GCC(8, 32, mix_within=within)
        Y = np.sin(s.encode(X))[ret]
        d = s.decode_with_info(Y, ret)
        scores = dict((name, sc) for name, _, sc in d.info["scores"])
        best = min(scores.values())
        members = d.info.get("mixture", [d.info["kernel"]])
        assert all(scores[m] <= within * best for m in members)
        ranked = sorted(scores, key=scores.get)[:3]
        assert members == [m for m in ranked if scores[m] <= within * best]
        np.testing.assert_allclose(s.decoder_matrix(ret, Y) @ Y, d.estimate, atol=1e-8)


def test_default_is_gap_and_loo_stays_available():
    assert gencc.GCC(4, 8).criterion == "auto"
    s = gencc.GCC(4, 8, criterion="loo")
    X = np.linspace(-1, 1, 4)[:, None]
    assert s.decode(np.sin(s.encode(X))[1:], range(1, 8)).shape == (4, 1)
    with pytest.raises(ValueError, match="criterion"):
        gencc.GCC(4, 8, criterion="aic")


def test_calibrate_recovers_planted_configuration():
    X = np.random.default_rng(1).uniform(-3, 3, (200, 2))
    grid = [("matern12", 0.01, 1e-8), ("sobolev2", 1.0, 1e-8), ("sobolev2", 1.0, 10.0), ("matern52", 0.5, 1.0)]
    s = gencc.GCC(4, 10)
    cal = s.calibrate(_xsinx, X, RandomStragglers(2), rounds=5, grid=grid)
    assert (cal.kernel, cal.scale, cal.lam_dec) == ("sobolev2", 1.0, 1e-8)
    assert not cal.adaptive
    assert len(cal.calibration_) == 4
    assert cal.calibration_[0][0] == {"kernel": "sobolev2", "scale": 1.0, "lam_dec": 1e-8}
    mses = [m for _, m in cal.calibration_]
    assert mses == sorted(mses)
    # the table is what evaluate measures for each configuration
    ev = gencc.evaluate(_xsinx, s.with_params(kernel="matern12", scale=0.01, candidates=None), X,
                        RandomStragglers(2), rounds=5, seed=0)
    row = [m for c, m in cal.calibration_ if c["kernel"] == "matern12"][0]
    assert row == pytest.approx(ev.mean("mse"))
    assert not hasattr(s, "calibration_")


def test_calibrate_dict_grid_and_adversary():
    X = np.random.default_rng(2).uniform(-2, 2, (50, 3))
    grid = [{"kernel": "matern32", "scale": 0.5, "lam_dec": 1e-8, "lam_enc": 0.0},
            {"kernel": "matern32", "scale": 0.5, "lam_dec": 1e-8, "lam_enc": 1e-2}]
    cal = gencc.GCC(4, 8).calibrate(np.sin, X, gencc.stragglers.ContiguousStragglers(2), rounds=3, grid=grid)
    assert cal.lam_enc in (0.0, 1e-2) and len(cal.calibration_) == 2


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"rounds": 0}, ValueError, "rounds"),
    ({"grid": []}, ValueError, "at least one"),
    ({"grid": [("matern32", 0.5)]}, ValueError, "tuples"),
    ({"grid": [{"kernel": "matern32", "ridge": 1}]}, ValueError, "only"),
    ({"grid": [("auto", 1.0, 1e-8)]}, ValueError, "auto"),
    ({"grid": [("cosine", 1.0, 1e-8)]}, ValueError, "kernel"),
    ({"grid": [("matern32", 1.0, -1.0)]}, ValueError, "lam_dec"),
])
def test_calibrate_bad_arguments(kwargs, exc, match):
    X = np.zeros((10, 2))
    with pytest.raises(exc, match=match):
        gencc.GCC(4, 8).calibrate(np.sin, X, NoStragglers(), **kwargs)


def test_calibrate_bad_f_and_stragglers():
    X = np.zeros((10, 2))
    with pytest.raises(TypeError, match="callable"):
        gencc.GCC(4, 8).calibrate(3, X, NoStragglers())
    with pytest.raises(TypeError, match="StragglerModel"):
        gencc.GCC(4, 8).calibrate(np.sin, X, "random")
    with pytest.raises(ValueError, match="no configuration"):
        gencc.GCC(4, 8).calibrate(np.sin, np.ones((10, 2)), _Everyone(), rounds=2, grid=[("matern32", 0.5, 1e-8)])


class _Everyone(gencc.stragglers.StragglerModel):
    """Every worker straggles."""

    def returned(self, n_workers, rng=None, error=None):
        return np.empty(0, dtype=int)


def test_widest_hole_counts_adjacent_missing_workers_in_point_order():
    from gencc.schemes.gcc import widest_hole

    beta = np.linspace(-1, 1, 8)
    assert widest_hole(beta, range(8)) == 0
    assert widest_hole(beta, [0, 2, 4, 6]) == 1  # one beyond the right end, the rest single holes
    assert widest_hole(beta, [0, 2, 3, 6, 7]) == 2
    assert widest_hole(beta[::-1], [7, 5]) == 5  # order is by point, not by index
    assert widest_hole(beta, [3, 4]) == 3


def test_default_criterion_is_leave_one_out_for_single_holes_and_gap_for_blocks():
    K, N = 4, 16
    s = gencc.GCC(K, N)
    X = np.linspace(-1, 1, K)[:, None] * 1.5
    Y = np.sin(3 * s.encode(X))
    single = [n for n in range(N) if n % 3]  # no two adjacent workers missing
    block = [n for n in range(N) if not 6 <= n < 9]  # three adjacent workers missing
    for ret, crit in ((single, "loo"), (block, "gap")):
        got = s.decode_with_info(Y[ret], ret)
        assert got.info["criterion"] == crit
        ref = gencc.GCC(K, N, criterion=crit).decode_with_info(Y[ret], ret)
        np.testing.assert_array_equal(got.estimate, ref.estimate)
        assert got.info["rmse"].shape == (K,) and np.all(np.isfinite(got.info["rmse"]))
    with pytest.raises(ValueError, match="criterion must be one of \\('auto'"):
        gencc.GCC(K, N, criterion="aic")
