import numpy as np
import pytest

import gencc
from gencc import byzantine as bz
from gencc import stragglers as st
from gencc.robust import screen_outliers

RET = np.array([0, 2, 3, 5, 6, 7, 9, 11, 12, 14])  # ten returned workers of N = 16


def _Y(shape=(2, 3)):
    return np.random.default_rng(3).normal(size=(RET.size, *shape))


ALL = [bz.SignFlip(3), bz.ScaledOutput(3, factor=-4.0), bz.RandomOutput(3), bz.ConstantBias(3, multiple=2.0),
       bz.CopyOutput(3), bz.ColludingSmooth(3, amplitude=1.5, frequency=2.0)]


@pytest.mark.parametrize("attack", ALL, ids=lambda a: type(a).__name__)
def test_each_attack_is_seeded_keeps_shapes_and_changes_only_the_liars(attack):
    Y, pts = _Y(), np.linspace(-1, 1, RET.size)
    Ya, liars = attack.attack(Y, RET, np.random.default_rng(7), points=pts)
    Yb, liars_b = attack.attack(Y, RET, np.random.default_rng(7), points=pts)
    assert Ya.shape == Y.shape and np.array_equal(Ya, Yb) and np.array_equal(liars, liars_b)
    assert liars.size == 3 and np.all(np.isin(liars, RET)) and np.all(np.diff(liars) > 0)
    bad = np.isin(RET, liars)
    assert np.array_equal(Ya[~bad], Y[~bad])
    assert np.all(np.any((Ya[bad] != Y[bad]).reshape(3, -1), axis=1))
    other, _ = attack.attack(Y, RET, np.random.default_rng(8), points=pts)
    assert not np.array_equal(other, Ya)


def test_what_each_attack_returns():
    Y, pts = _Y((4,)), np.linspace(-1, 1, RET.size)
    liars = [3, 9, 14]
    bad = np.isin(RET, liars)
    honest = Y[~bad]
    assert np.array_equal(bz.SignFlip(workers=liars).attack(Y, RET, 0)[0][bad], -Y[bad])
    assert np.allclose(bz.ScaledOutput(workers=liars, factor=10).attack(Y, RET, 0)[0][bad], 10 * Y[bad])
    R = bz.RandomOutput(workers=liars).attack(Y, RET, 0)[0][bad]
    assert np.all(R >= honest.min(axis=0)) and np.all(R <= honest.max(axis=0))
    B = bz.ConstantBias(workers=liars, multiple=2.5).attack(Y, RET, 0)[0][bad]
    assert np.allclose(B - Y[bad], 2.5 * honest.std(axis=0))
    C = bz.CopyOutput(workers=liars).attack(Y, RET, 0)[0][bad]
    assert all(any(np.array_equal(row, h) for h in honest) for row in C)
    D = bz.ColludingSmooth(workers=liars, amplitude=1.0).attack(Y, RET, 0, points=pts)[0][bad] - Y[bad]
    # one direction for all liars, a curve g(beta) of amplitude <= 1 std along it
    assert np.linalg.matrix_rank(D, tol=1e-10) == 1
    d = D[np.argmax(np.abs(D).sum(axis=1))]
    g = D @ d / (d @ d)
    assert np.allclose(np.outer(g, d), D)


def test_fixed_workers_lie_only_when_they_returned():
    Y = _Y()
    Ya, liars = bz.SignFlip(workers=[1, 3, 15]).attack(Y, RET, 0)
    assert liars.tolist() == [3]
    assert np.array_equal(Ya[RET != 3], Y[RET != 3])
    Yn, none = bz.SignFlip(0).attack(Y, RET, 0)
    assert none.size == 0 and np.array_equal(Yn, Y)


def test_bad_attack_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="attack must be one of"):
        bz.make_attack("cosmic-rays", 2)
    with pytest.raises(ValueError, match="n_adversaries"):
        bz.SignFlip(-1)
    with pytest.raises(ValueError, match="factor must differ from 1"):
        bz.ScaledOutput(2, factor=1.0)
    with pytest.raises(ValueError, match="multiple must be > 0"):
        bz.ConstantBias(2, multiple=0)
    with pytest.raises(ValueError, match="workers must not repeat"):
        bz.SignFlip(workers=[1, 1])
    with pytest.raises(ValueError, match="needs points"):
        bz.ColludingSmooth(2).attack(_Y(), RET, 0)
    with pytest.raises(ValueError, match="points must have shape"):
        bz.ColludingSmooth(2).attack(_Y(), RET, 0, points=np.zeros(3))
    with pytest.raises(ValueError, match="Y must have 10 rows"):
        bz.SignFlip(2).attack(_Y()[:4], RET, 0)
    with pytest.raises(TypeError, match="takes no parameter"):
        bz.make_attack("sign-flip", 2, factor=3.0)
    assert isinstance(bz.make_attack("scale", 2, factor=3.0), bz.ScaledOutput)


def _smooth_batch(scheme, m=3):
    X = np.random.default_rng(0).uniform(-1, 1, size=(scheme.n_inputs, m))
    return X, np.sin(2 * scheme.encode(X))


def test_robust_decode_flags_a_gross_outlier_and_decodes_without_it():
    s = gencc.GCC(8, 32, robust=True)
    X, Y = _smooth_batch(s)
    ret = np.setdiff1d(np.arange(32), [4, 20])
    Yr = Y[ret].copy()
    Yr[ret == 13] += 50.0
    dec = s.decode_with_info(Yr, ret)
    assert dec.info["flagged"].tolist() == [13]
    keep = ret != 13
    plain = s.with_params(robust=False).decode(Yr[keep], ret[keep])
    assert np.allclose(dec.estimate, plain, rtol=0, atol=1e-12)
    # the same for a fixed-kernel GCC, whose kept set then goes through the decoder cache
    f = gencc.GCC(8, 32, kernel="sobolev2", robust=True)
    for _ in range(3):
        d2 = f.decode_with_info(Yr, ret)
        assert d2.info["flagged"].tolist() == [13]
        assert np.allclose(d2.estimate, f.with_params(robust=False).decode(Yr[keep], ret[keep]), atol=1e-9)
    # LeTCC inherits the parameter
    assert gencc.LeTCC(8, 32, robust=True).decode_with_info(Yr, ret).info["flagged"].tolist() == [13]


def test_no_flags_without_adversaries_on_a_curve_the_spline_follows():
    s = gencc.GCC(4, 16, robust=True)
    X = np.linspace(-1, 1, 4)[:, None] * np.array([[1.0, -2.0, 0.5]]) + 0.3  # u_enc(t) is linear in t
    C = s.encode(X)
    for Y in (3 * C - 1, C**2 - C, 0.2 * C**3):  # degrees 1-3 in t
        for ret in (np.arange(16), np.setdiff1d(np.arange(16), [2, 9])):
            dec = s.decode_with_info(Y[ret], ret)
            assert dec.info["flagged"].size == 0
            assert np.array_equal(dec.estimate, s.with_params(robust=False).decode(Y[ret], ret))


def test_robust_decode_keeps_at_least_trusted_returns():
    s = gencc.GCC(4, 8, robust=True)
    X, Y = _smooth_batch(s)
    ret = np.arange(6)
    Yr = Y[ret] + np.array([0, 40, -40, 0, 40, 0])[:, None]
    dec = s.decode_with_info(Yr, ret)
    assert ret.size - dec.info["flagged"].size >= s.trusted_returns
    assert dec.info["flagged"].size <= max(1, ret.size // 5)


def test_robust_decode_many_matches_per_batch_decodes():
    s = gencc.GCC(4, 16, kernel="sobolev2", robust=True)
    X, Y = _smooth_batch(s)
    ret = np.arange(1, 16)
    Yb = np.stack([Y[ret], Y[ret] + 30.0 * (ret == 7)[:, None]])
    many = s.decode_many_with_info(Yb, ret)
    assert [d.info["flagged"].tolist() for d in many] == [[], [7]]
    for b in range(2):
        assert np.allclose(many[b].estimate, s.decode(Yb[b], ret))
        assert np.allclose(s.decode_many(Yb, ret)[b], s.decode(Yb[b], ret))


def test_screen_outliers_finds_a_spike_and_respects_its_caps():
    t = np.linspace(-1, 1, 20)
    Y = np.stack([np.sin(3 * t), np.cos(2 * t)], axis=1)
    Y[7] += 5.0
    assert screen_outliers(t, Y, min_keep=4, max_remove=3).tolist() == [7]
    assert screen_outliers(t, Y, min_keep=4, max_remove=0).size == 0
    assert screen_outliers(t, Y, min_keep=20, max_remove=3).size == 0


def test_robust_arguments_are_checked():
    with pytest.raises(TypeError, match="robust must be True or False"):
        gencc.GCC(4, 8, robust="yes")
    with pytest.raises(ValueError, match="robust_threshold must be > 0"):
        gencc.GCC(4, 8, robust=True, robust_threshold=0)
    with pytest.raises(ValueError, match="robust_threshold"):
        gencc.LeTCC(4, 8, robust=True, robust_threshold=-1)
    assert gencc.GCC(4, 8).get_params()["robust"] is False
    assert gencc.LeTCC(4, 8, robust=True).with_params(lam_dec=1e-5).robust is True


class _FlagsFixed(gencc.GCC):
    """A GCC whose screen always flags workers 1 and 2 (when they returned)."""

    def _screen(self, idx, Y2):
        return ~np.isin(idx, [1, 2])


def test_evaluate_reports_flag_precision_and_recall_on_a_hand_made_case():
    X = np.random.default_rng(0).uniform(-1, 1, size=(30, 2))
    s = _FlagsFixed(4, 12, kernel="sobolev2")
    ev = gencc.evaluate(np.sin, s, X, st.NoStragglers(), rounds=3, byzantine=bz.SignFlip(workers=[2, 3]))
    assert ev.samples["flag_precision"].tolist() == [0.5] * 3  # flagged {1, 2}: 2 lies, 1 does not
    assert ev.samples["flag_recall"].tolist() == [0.5] * 3     # liars {2, 3}: 2 caught, 3 missed
    assert ev.samples["false_flags"].tolist() == [1.0] * 3 and ev.samples["n_flagged"].tolist() == [2.0] * 3
    # the clean MSE is the same draws decoded from the honest outputs
    plain = gencc.evaluate(np.sin, s, X, st.NoStragglers(), rounds=3)
    assert np.allclose(ev.samples["clean_mse"], plain.samples["mse"])
    assert not np.allclose(ev.samples["mse"], plain.samples["mse"])


def test_evaluate_with_an_attack_keeps_the_straggler_draws_and_is_seeded():
    X = np.random.default_rng(0).uniform(-1, 1, size=(30, 2))
    s = gencc.GCC(4, 12, kernel="sobolev2")
    base = gencc.evaluate(np.sin, s, X, st.RandomStragglers(2), rounds=4, seed=5)
    a = gencc.evaluate(np.sin, s, X, st.RandomStragglers(2), rounds=4, seed=5, byzantine=bz.SignFlip(1))
    b = gencc.evaluate(np.sin, s, X, st.RandomStragglers(2), rounds=4, seed=5, byzantine=bz.SignFlip(1))
    assert np.allclose(a.samples["clean_mse"], base.samples["mse"], rtol=1e-9, atol=0)  # same draws
    assert np.array_equal(a.samples["mse"], b.samples["mse"])
    assert "clean_mse" not in base.samples
    assert a.samples["flag_recall"].size == 0  # a plain decoder flags nothing: no flag metrics
    with pytest.raises(TypeError, match="byzantine must be a gencc.byzantine.ByzantineModel"):
        gencc.evaluate(np.sin, s, X, st.NoStragglers(), rounds=1, byzantine="sign-flip")


def test_a_lying_systematic_worker_is_flagged_and_its_input_decoded_from_parities():
    s = gencc.GCC(4, 16, worker_points="systematic", robust=True)
    X = np.random.default_rng(0).uniform(-1, 1, size=(4, 3))
    Y = np.sin(2 * s.encode(X))
    ret = np.arange(16)
    Yr = Y.copy()
    Yr[1] += 30.0
    dec = s.decode_with_info(Yr, ret)
    assert dec.info["flagged"].tolist() == [1]
    assert dec.info["exact"].tolist() == [True, False, True, True]
    assert np.allclose(dec.estimate, s.with_params(robust=False).decode(np.delete(Yr, 1, 0), np.delete(ret, 1)))
    assert np.abs(dec.estimate[1] - np.sin(2 * X[1])).max() < 0.1  # not the lie (off by 30)


def test_evaluate_drop_liars_is_the_oracle_that_decodes_without_them():
    w = np.random.default_rng(0).uniform(-1, 1, size=(40, 3))
    s = gencc.GCC(4, 16)
    attack = bz.ScaledOutput(2)
    plain = gencc.evaluate(np.sin, s, w, st.RandomStragglers(1), rounds=4, byzantine=attack)
    oracle = gencc.evaluate(np.sin, s, w, st.RandomStragglers(1), rounds=4, byzantine=attack, drop_liars=True)
    assert np.array_equal(oracle.samples["clean_mse"], plain.samples["clean_mse"])  # the same draws
    assert np.all(oracle.samples["mse"] < 0.01 * plain.samples["mse"])
    with pytest.raises(ValueError, match="drop_liars needs an attack"):
        gencc.evaluate(np.sin, s, w, st.RandomStragglers(1), rounds=1, drop_liars=True)


def _xsinx_curve(seed):
    """x sin x of four independent smooth curves along 15 Chebyshev nodes (a GCC-like output)."""
    t = np.cos(np.pi * (np.arange(15) + 0.5) / 15)[::-1]
    u = np.random.default_rng(seed).uniform(-3, 3, size=(4, 4))
    X = np.stack([np.polynomial.chebyshev.chebval(t, u[k]) for k in range(4)], 1)
    return t, X * np.sin(X)


def test_screen_vote_and_also_lam_fix_a_false_flag_and_a_miss():
    # honest outputs: the pooled confirmation alone (vote=None, also_lam=None, the earlier screen)
    # removes two honest nodes; the coordinates' vote does not
    t, Y = _xsinx_curve(22)
    assert screen_outliers(t, Y, min_keep=4, max_remove=3, vote=None, also_lam=None).tolist() == [14, 2]
    assert screen_outliers(t, Y, min_keep=4, max_remove=3).size == 0
    # a sign-flipped worker 7: the earlier screen misses it, the defaults flag it first
    t, Y = _xsinx_curve(23)
    Y[7] = -Y[7]
    assert screen_outliers(t, Y, min_keep=4, max_remove=3, vote=None, also_lam=None).size == 0
    assert screen_outliers(t, Y, min_keep=4, max_remove=3).tolist() == [7, 14]


def test_a_stated_bound_on_the_liars_caps_the_screen_and_turns_it_on():
    s = gencc.GCC(8, 32, n_adversaries=1)
    assert s.robust and s.n_adversaries == 1 and "n_adversaries=1" in repr(s)
    X, Y = _smooth_batch(s)
    ret = np.setdiff1d(np.arange(32), [4, 20])
    Yr = Y[ret].copy()
    Yr[ret == 13] += 50.0
    Yr[ret == 25] -= 50.0
    both = gencc.GCC(8, 32, robust=True).decode_with_info(Yr, ret).info["flagged"].tolist()
    assert sorted(both) == [13, 25]  # the default cap, |F| // 5 = 6, lets the screen take both
    one = s.decode_with_info(Yr, ret).info["flagged"].tolist()
    assert len(one) == 1 and one[0] in (13, 25)  # told A = 1: at most one
    assert not gencc.GCC(8, 32, n_adversaries=0).robust  # 0: no screening
    with pytest.raises(ValueError, match="n_adversaries must be an integer >= 0"):
        gencc.GCC(8, 32, n_adversaries=-1)


def _rough_outputs(n_inputs, n_workers, seed):
    """x sin x through GCC's encoder at N/K = 10 (rows sorted by beta) and 12 sign-flipped rows."""
    rng = np.random.default_rng(seed)
    g = gencc.GCC(n_inputs, n_workers)
    Xt = g.encode(rng.uniform(-3, 3, size=(n_inputs, 1)))
    order = np.argsort(g.beta)
    t, Y = g.beta[order], (Xt * np.sin(Xt))[order]
    liars = np.sort(rng.choice(n_workers, 12, replace=False))
    Yl = Y.copy()
    Yl[liars] *= -1
    return t, Y, Yl, liars


def test_screen_ridges_follow_the_node_spacing():
    from gencc.robust import screen_outliers

    t, _, Yl, _ = _rough_outputs(40, 400, 3)
    kw = dict(min_keep=40, max_remove=80)
    s = (64 / 399) ** 4
    scaled = screen_outliers(t, Yl, spacing_ref=64, **kw)
    by_hand = screen_outliers(t, Yl, lam=1e-8 * s, gross_lam=1e-4 * s, also_lam=1e-6 * s, **kw)
    assert scaled.tolist() == by_hand.tolist()
    # at or below spacing_ref + 1 rows the ridges are the ones given
    t2, _, Yl2, _ = _rough_outputs(6, 60, 1)
    kw2 = dict(min_keep=6, max_remove=12)
    assert screen_outliers(t2, Yl2, spacing_ref=64, **kw2).tolist() == screen_outliers(t2, Yl2, **kw2).tolist()
    with pytest.raises(ValueError, match="spacing_ref"):
        screen_outliers(t, Yl, spacing_ref=0, **kw)


def test_scaled_ridges_find_liars_the_fixed_ones_miss_at_n_400():
    """Seed 3 of the rough x sin x curve: a fixed ridge of 1e-8 smooths across nodes at N = 400."""
    from gencc.robust import screen_outliers

    t, Y, Yl, liars = _rough_outputs(40, 400, 3)
    real = set(liars[np.abs(Y[liars, 0]) > 0.1].tolist())  # a flip of a near-zero output is no lie
    kw = dict(min_keep=40, max_remove=80)
    found = set(screen_outliers(t, Yl, spacing_ref=64, **kw).tolist())
    fixed = set(screen_outliers(t, Yl, **kw).tolist())
    assert found <= set(liars.tolist()) and len(found & real) > len(fixed & real)
    assert screen_outliers(t, Y, spacing_ref=64, **kw).size == 0  # and no honest row flagged here


def test_gcc_passes_its_spacing_ref_to_the_screen():
    rng = np.random.default_rng(3)
    g = gencc.GCC(40, 400, robust=True, robust_spacing_ref=64)
    Y = g.encode(rng.uniform(-3, 3, size=(40, 1)))
    Y = Y * np.sin(Y)
    liars = rng.choice(400, 12, replace=False)
    Y[liars] *= -1
    order = np.argsort(g.beta)
    expect = screen_outliers(g.beta[order], Y[order], min_keep=g.trusted_returns, max_remove=80, spacing_ref=64)
    flagged = g.decode_with_info(Y, np.arange(400)).info["flagged"]
    assert sorted(np.asarray(flagged).tolist()) == sorted(order[expect].tolist())
    assert g.get_params()["robust_spacing_ref"] == 64
    with pytest.raises(ValueError, match="robust_spacing_ref"):
        gencc.GCC(40, 400, robust=True, robust_spacing_ref=0)
