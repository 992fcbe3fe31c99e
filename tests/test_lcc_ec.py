"""LCC with error correction: Berlekamp-Welch over the reals for polynomial f."""

import numpy as np
import pytest

import gencc


def _setup(K, deg, A, S, seed, m=3):
    N = (K - 1) * deg + 2 * A + 1 + S
    s = gencc.LCC(K, N, degree=deg, n_adversaries=A)
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(K, m))
    c = rng.normal(size=deg + 1)

    def f(x):  # a polynomial of degree deg, elementwise, plus a linear mix of the coordinates
        return np.polynomial.polynomial.polyval(x, c) + x @ np.ones((m, m)) / m

    return s, X, f, rng


ATTACKS = {
    "arbitrary": lambda y, rng: rng.normal(scale=10.0, size=y.shape),
    "sign": lambda y, rng: -y,
    "scaled": lambda y, rng: 1e6 * y,
    "tiny": lambda y, rng: y + 1e-3 * rng.normal(size=y.shape),
    "one-coordinate": lambda y, rng: y + np.eye(y.shape[0], y.shape[1]),
}


@pytest.mark.parametrize("attack", list(ATTACKS))
@pytest.mark.parametrize("K,deg,A,S", [(3, 1, 1, 0), (4, 2, 2, 2), (5, 3, 3, 1), (8, 2, 3, 4)])
def test_corrects_a_wrong_outputs_at_the_threshold_and_flags_exactly_the_liars(attack, K, deg, A, S):
    s, X, f, rng = _setup(K, deg, A, S, seed=K * 100 + deg * 10 + A)
    assert s.min_returns == s.trusted_returns == (K - 1) * deg + 2 * A + 1
    Y = f(s.encode(X))
    for _ in range(3):
        ret = rng.choice(s.n_workers, size=s.min_returns, replace=False)  # S stragglers, any order
        liars = np.sort(rng.choice(ret, size=A, replace=False))
        Yr = Y[ret].copy()
        bad = np.isin(ret, liars)
        Yr[bad] = ATTACKS[attack](Yr[bad], rng)
        dec = s.decode_with_info(Yr, ret)
        assert dec.info["flagged"].dtype == np.int64
        assert dec.info["flagged"].tolist() == liars.tolist()
        np.testing.assert_allclose(dec.estimate, f(X), rtol=0, atol=1e-8 * max(1.0, np.abs(f(X)).max()))


def test_fewer_liars_than_a_flags_only_the_liars():
    s, X, f, rng = _setup(4, 2, 3, 2, seed=5)
    Y = f(s.encode(X))
    ret = np.arange(2, s.n_workers)
    for n_liars in (0, 1, 2):
        liars = np.sort(rng.choice(ret, size=n_liars, replace=False))
        Yr = Y[ret].copy()
        Yr[np.isin(ret, liars)] *= -3.0
        dec = s.decode_with_info(Yr, ret)
        assert dec.info["flagged"].tolist() == liars.tolist()
        np.testing.assert_allclose(dec.estimate, f(X), rtol=0, atol=1e-8 * np.abs(f(X)).max())


def test_more_liars_than_a_are_not_all_corrected():
    # beyond its radius no decoder can tell; it flags at most A and does not pretend the decode is exact
    s, X, f, rng = _setup(4, 1, 1, 0, seed=6)
    Y = f(s.encode(X))
    ret = np.arange(s.n_workers)
    Yr = Y.copy()
    Yr[[1, 4]] += 5.0
    dec = s.decode_with_info(Yr, ret)
    assert dec.info["flagged"].size <= 1
    assert np.abs(dec.estimate - f(X)).max() > 1e-3


def test_below_the_threshold_is_an_error_naming_the_argument():
    s = gencc.LCC(4, 12, degree=2, n_adversaries=2)  # needs 6 + 4 + 1 = 11
    with pytest.raises(gencc.InsufficientReturnsError, match="at least 11 returned workers"):
        s.decode(np.ones((10, 2)), range(10))
    with pytest.raises(ValueError, match=r"n_workers must be >= \(n_inputs - 1\) \* degree \+ 2 \* n_adversaries "
                                         r"\+ 1 = 11 for LCC with n_adversaries=2, got 10"):
        gencc.LCC(4, 10, degree=2, n_adversaries=2)
    with pytest.raises(ValueError, match="n_adversaries must be an integer >= 0"):
        gencc.LCC(4, 12, n_adversaries=-1)
    with pytest.raises(TypeError, match="n_adversaries must be an integer"):
        gencc.LCC(4, 12, n_adversaries=True)
    with pytest.raises(ValueError, match="adversary_rtol must be a finite number >= 0"):
        gencc.LCC(4, 12, n_adversaries=1, adversary_rtol=float("nan"))


def test_without_adversaries_lcc_is_unchanged():
    s = gencc.LCC(4, 10, degree=2)
    assert s.n_adversaries == 0 and s.min_returns == 7
    X = np.random.default_rng(0).normal(size=(4, 2))
    Y = s.encode(X) ** 2
    dec = s.decode_with_info(Y[:7], range(7))
    assert "flagged" not in dec.info
    np.testing.assert_allclose(dec.estimate, X**2, atol=1e-10)
    assert s.with_params(n_adversaries=1).min_returns == 9


def test_decode_many_corrects_each_batch_and_the_kept_set_uses_the_cache():
    s, X, f, rng = _setup(3, 2, 1, 1, seed=8)
    Xs = np.stack([X, X + 1.0])
    Y = np.stack([f(s.encode(x)) for x in Xs])
    ret = np.arange(1, s.n_workers)
    Y = Y[:, ret].copy()
    Y[0, 0] = 100.0
    Y[1, 4] = -100.0
    many = s.decode_many_with_info(Y, ret)
    assert [d.info["flagged"].tolist() for d in many] == [[ret[0]], [ret[4]]]
    est = s.decode_many(Y, ret)
    for b in range(2):
        np.testing.assert_allclose(est[b], f(Xs[b]), rtol=0, atol=1e-8 * np.abs(f(Xs[b])).max())
    for _ in range(3):  # the kept set's decoder is cached after its second sight: same answer
        np.testing.assert_allclose(s.decode(Y[0], ret), f(Xs[0]), rtol=0, atol=1e-8 * np.abs(f(Xs[0])).max())
    assert s.decoder_cache_info().hits >= 1


def test_a_lying_systematic_worker_is_corrected():
    s = gencc.LCC(3, 9, degree=2, n_adversaries=1, worker_points="systematic")  # needs 7
    X = np.random.default_rng(2).normal(size=(3, 2))
    Y = s.encode(X) ** 2
    ret = np.arange(1, 8)
    Yr = Y[ret].copy()
    Yr[0] += 3.0  # worker 1, which holds x_1 itself
    dec = s.decode_with_info(Yr, ret)
    assert dec.info["flagged"].tolist() == [1]
    np.testing.assert_allclose(dec.estimate, X**2, atol=1e-8)
    assert dec.info["exact"].tolist() == [False, False, True]
