"""ApproxIFER: Berrut coding that locates Byzantine workers by rational fits and a vote."""

import numpy as np
import pytest

import gencc
from gencc import byzantine as bz
from gencc import stragglers as st
from gencc.robust import berlekamp_welch


def berrut(t, y, s):
    """Berrut's first interpolant through (t, y), t sorted, at the points s: the explicit formula."""
    w = (-1.0) ** np.arange(t.size)
    C = w[None, :] / (s[:, None] - t[None, :])
    return (C @ y) / C.sum(axis=1, keepdims=True)


def _rest_decode(s, Y, ret, drop):
    keep = ~np.isin(ret, drop)
    o = np.argsort(s.beta[ret[keep]])
    return berrut(s.beta[ret[keep]][o], Y[keep][o], s.alpha)


def test_without_adversaries_it_is_bacc():
    s, b = gencc.ApproxIFER(5, 14, n_adversaries=0), gencc.BACC(5, 14)
    assert s.min_returns == 1 and s.trusted_returns == 5
    X = np.random.default_rng(0).normal(size=(5, 3))
    Y = np.tanh(s.encode(X))
    np.testing.assert_array_equal(s.encoder_matrix(), b.encoder_matrix())
    for ret in (np.arange(14), np.array([13, 0, 4, 2, 9, 7, 11, 5])):
        dec = s.decode_with_info(Y[ret], ret)
        assert "flagged" not in dec.info
        np.testing.assert_allclose(dec.estimate, b.decode(Y[ret], ret), rtol=0, atol=1e-12)
        o = np.argsort(s.beta[ret])
        np.testing.assert_allclose(dec.estimate, berrut(s.beta[ret][o], Y[ret][o], s.alpha), rtol=0, atol=1e-12)


@pytest.mark.parametrize("A", [1, 2, 3])
def test_locates_arbitrary_liars_exactly_when_f_is_linear_at_the_threshold(A):
    # Berrut's interpolant through K points is rational of type (K-1, K-1), so W x is too, in beta
    K, S = 4, 2
    N = 2 * K + 2 * A - 1 + S
    s = gencc.ApproxIFER(K, N, n_adversaries=A)
    rng = np.random.default_rng(A)
    X = rng.normal(size=(K, 3))
    W = rng.normal(size=(3, 2))
    Y = s.encode(X) @ W
    ret = np.sort(rng.choice(N, size=N - S, replace=False))
    liars = np.sort(rng.choice(ret, size=A, replace=False))
    Yr = Y[ret].copy()
    bad = np.isin(ret, liars)
    Yr[bad] = rng.normal(scale=5.0, size=(A, 2))
    dec = s.decode_with_info(Yr, ret)
    assert dec.info["flagged"].dtype == np.int64
    assert dec.info["flagged"].tolist() == liars.tolist()
    np.testing.assert_allclose(dec.estimate, _rest_decode(s, Yr, ret, liars), rtol=0, atol=1e-12)


@pytest.mark.parametrize("attack", ["sign", "scale10"])
def test_flags_a_sign_flipped_or_scaled_liar_on_a_smooth_f(attack):
    K, N = 4, 16
    s = gencc.ApproxIFER(K, N, n_adversaries=1)
    X = np.random.default_rng(0).uniform(-1, 1, size=(K, 5))
    Y = np.sin(s.encode(X))
    ret = np.setdiff1d(np.arange(N), [6])  # one straggler
    clean = gencc.BACC(K, N).decode(Y[ret], ret)  # the liar-free Berrut decode
    mse, mse_attacked = [], []
    for liar in ret:  # each returned worker lies in turn
        Yr = Y[ret].copy()
        i = np.flatnonzero(ret == liar)[0]
        Yr[i] = -Yr[i] if attack == "sign" else 10.0 * Yr[i]
        dec = s.decode_with_info(Yr, ret)
        assert dec.info["flagged"].tolist() == [liar]
        np.testing.assert_allclose(dec.estimate, _rest_decode(s, Yr, ret, [liar]), rtol=0, atol=1e-12)
        assert np.abs(dec.estimate - clean).max() < 0.4  # Berrut without one node: close to the clean decode
        mse.append(np.mean((dec.estimate - np.sin(X)) ** 2))
        mse_attacked.append(np.mean((gencc.BACC(K, N).decode(Yr, ret) - np.sin(X)) ** 2))
    # dropping a node costs some accuracy, far less than decoding the liar in
    assert np.mean(mse) < 0.2 * np.mean(mse_attacked)


def test_needs_2k_plus_2a_minus_1_returns():
    s = gencc.ApproxIFER(4, 16, n_adversaries=2)
    assert s.min_returns == s.trusted_returns == 11
    Y = np.ones((10, 2))
    with pytest.raises(gencc.InsufficientReturnsError, match="at least 11 returned workers"):
        s.decode(Y, range(10))
    assert s.decode_with_info(np.ones((11, 2)), range(11)).estimate.shape == (4, 2)
    assert not s.can_decode(range(10)) and s.can_decode(range(11))


def test_bad_arguments_name_the_argument():
    with pytest.raises(ValueError, match="n_adversaries must be an integer >= 0"):
        gencc.ApproxIFER(4, 16, n_adversaries=-1)
    with pytest.raises(TypeError, match="n_adversaries must be an integer"):
        gencc.ApproxIFER(4, 16, n_adversaries=1.5)
    with pytest.raises(ValueError, match=r"n_workers must be >= 2 \* n_inputs \+ 2 \* n_adversaries - 1 = 13 "
                                         r"for ApproxIFER with n_adversaries=3, got 12"):
        gencc.ApproxIFER(4, 12, n_adversaries=3)
    with pytest.raises(ValueError, match="n_inputs must be an integer >= 1"):
        gencc.ApproxIFER(0, 5)
    with pytest.raises(TypeError, match="ApproxIFER has no parameters"):
        gencc.ApproxIFER(4, 16).with_params(robust=True)


def test_registered_by_name_and_parameters_round_trip():
    s = gencc.make_scheme("approxifer", 4, 16, n_adversaries=2)
    assert isinstance(s, gencc.ApproxIFER) and isinstance(s, gencc.BACC)
    assert gencc.SCHEMES["approxifer"] is gencc.ApproxIFER
    assert s.get_params()["n_adversaries"] == 2
    assert s.with_params(n_adversaries=0).n_adversaries == 0
    assert "n_adversaries=2" in repr(s)


def test_decode_many_screens_each_batch_on_its_own():
    K, N = 3, 12
    s = gencc.ApproxIFER(K, N, n_adversaries=1)
    rng = np.random.default_rng(4)
    X = rng.normal(size=(2, K, 4))
    Y = np.stack([s.encode(x) @ np.eye(4)[:, :3] for x in X])  # linear f: exact location
    ret = np.arange(1, N)
    Y = Y[:, ret].copy()
    Y[0, 2] += 30.0
    Y[1, 7] *= -20.0
    many = s.decode_many_with_info(Y, ret)
    assert [d.info["flagged"].tolist() for d in many] == [[ret[2]], [ret[7]]]
    est = s.decode_many(Y, ret)
    for b in range(2):
        np.testing.assert_allclose(est[b], s.decode(Y[b], ret), rtol=0, atol=1e-12)


def test_evaluate_reports_its_flags():
    X = np.random.default_rng(0).uniform(-1, 1, size=(40, 3))
    ev = gencc.evaluate(lambda x: 2.0 * x - 1.0, gencc.ApproxIFER(4, 16, n_adversaries=1), X,
                        st.RandomStragglers(1), rounds=4, seed=0, byzantine=bz.ScaledOutput(1, factor=10.0))
    assert ev.samples["flag_recall"].tolist() == [1.0] * 4
    assert ev.samples["flag_precision"].tolist() == [1.0] * 4


def test_berlekamp_welch_zeroes_the_locator_at_the_wrong_nodes():
    t = np.cos(np.linspace(np.pi, 0, 15))
    p = np.polynomial.Polynomial([0.5, -1.0, 0.3])
    q = np.polynomial.Polynomial([2.0, 0.4, 0.1])  # no real roots near [-1, 1]
    y = (p(t) / q(t))[:, None] * np.array([[1.0, -3.0]]) + np.array([[0.0, 1.0]])
    y[[3, 11]] += np.array([[4.0, 1.0], [-2.0, 5.0]])
    loc, valid = berlekamp_welch(t, y, 2 + 2, 2 + 2)  # type (2, 2) with 2 errors: needs 9 nodes of 15
    assert valid.all()
    assert np.all(loc[[3, 11]] < 1e-9)
    assert np.all(np.delete(loc, [3, 11], axis=0) > 1e-3)
    loc, valid = berlekamp_welch(t, np.ones((15, 1)), 2, 2)  # nothing to fit: skipped, not NaN
    assert not valid.any() and np.all(loc == 1.0)
    with pytest.raises(ValueError, match="t and Y must be finite"):
        berlekamp_welch(t, np.where(np.arange(15) == 3, np.inf, 0.0)[:, None], 2, 2)
