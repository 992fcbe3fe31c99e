import numpy as np
import pytest

import gencc
from gencc.interpolation import berrut_weights

RNG = np.random.default_rng(0)
ALL = [
    lambda: gencc.GCC(5, 14),
    lambda: gencc.GCC(5, 14, kernel="matern32", scale=0.5, lam_dec=1e-4),
    lambda: gencc.LeTCC(5, 14),
    lambda: gencc.BACC(5, 14),
    lambda: gencc.LCC(5, 14, degree=2),
    lambda: gencc.Replication(5, 14),
    lambda: gencc.Uncoded(5),
    lambda: gencc.GCC(5, 14, worker_points="systematic"),
    lambda: gencc.LeTCC(5, 14, worker_points="systematic"),
    lambda: gencc.BACC(5, 14, worker_points="systematic"),
]


@pytest.mark.parametrize("make", ALL)
def test_encode_is_encoder_matrix_times_inputs(make):
    s = make()
    X = RNG.normal(size=(s.n_inputs, 3, 2))
    coded = s.encode(X)
    assert coded.shape == (s.n_workers, 3, 2)
    np.testing.assert_allclose(coded.reshape(s.n_workers, -1), s.encoder_matrix() @ X.reshape(s.n_inputs, -1))


@pytest.mark.parametrize("make", ALL)
def test_decode_is_decoder_matrix_times_outputs_in_any_order(make):
    s = make()
    X = RNG.normal(size=(s.n_inputs, 2))
    Y = np.tanh(s.encode(X))
    returned = RNG.permutation(s.n_workers)[: max(s.min_returns, s.n_workers - 1)]
    if isinstance(s, gencc.Replication):
        returned = np.arange(s.n_workers)[::-1]
    est = s.decode(Y[returned], returned)
    D = s.decoder_matrix(returned, Y=Y[returned])
    assert D.shape == (s.n_inputs, returned.size)
    np.testing.assert_allclose(est, D @ Y[returned], atol=1e-9)
    # the same set in sorted order decodes to the same estimate
    order = np.argsort(returned)
    np.testing.assert_allclose(s.decode(Y[returned][order], returned[order]), est, atol=1e-9)


def _with_alpha_in_beta(cls, K, extra, **kw):
    alpha = gencc.points.chebyshev1(K)
    beta = np.sort(np.concatenate([alpha, np.linspace(-1, 1, extra)]))
    return cls(K, beta.size, worker_points=beta, **kw), alpha, beta


@pytest.mark.parametrize("cls, kw", [(gencc.BACC, {}), (gencc.GCC, {"kernel": "sobolev2", "lam_dec": 0.0}),
                                     (gencc.GCC, {"kernel": "matern52", "lam_dec": 0.0})])
def test_interpolating_schemes_are_exact_at_the_nodes(cls, kw):
    s, alpha, beta = _with_alpha_in_beta(cls, 6, 9, **kw)
    X = RNG.normal(size=(6, 4))
    coded = s.encode(X)
    pos = np.searchsorted(beta, alpha)
    np.testing.assert_allclose(coded[pos], X, atol=1e-7)  # encoder passes through (alpha_k, x_k)
    assert np.all(np.isfinite(coded))
    Y = RNG.normal(size=(beta.size, 3))
    np.testing.assert_allclose(s.decode(Y, np.arange(beta.size)), Y[pos], atol=1e-6)  # decoder through (beta_n, y_n)


def test_berrut_decoder_signs_follow_rank_in_returned_set():
    s = gencc.BACC(4, 11)
    returned = np.array([9, 0, 4, 5, 2, 7, 10])
    D = s.decoder_matrix(returned)
    srt = np.sort(returned)
    t = s.beta[srt]
    w = (-1.0) ** np.arange(srt.size)
    for k, a in enumerate(s.alpha):
        c = w / (a - t)
        ref = np.zeros(returned.size)
        for j, n in enumerate(srt):
            ref[np.flatnonzero(returned == n)[0]] = c[j] / c.sum()
        np.testing.assert_allclose(D[k], ref, rtol=1e-12)
    assert berrut_weights(3).tolist() == [1.0, -1.0, 1.0]


@pytest.mark.parametrize("deg", [1, 2, 3])
def test_lcc_recovers_polynomials_exactly(deg):
    K = 4
    need = (K - 1) * deg + 1
    s = gencc.LCC(K, need + 3, degree=deg)
    X = RNG.normal(size=(K, 3))
    coeffs = RNG.normal(size=deg + 1)
    f = lambda x: np.polynomial.polynomial.polyval(x, coeffs)
    Y = f(s.encode(X))
    for _ in range(5):
        returned = RNG.choice(s.n_workers, size=need + RNG.integers(0, 4), replace=False)
        np.testing.assert_allclose(s.decode(Y[returned], returned), f(X), atol=1e-8)


def test_lcc_below_threshold_is_an_error_not_a_wrong_answer():
    s = gencc.LCC(4, 10, degree=2)
    assert s.min_returns == 7
    Y = np.ones((6, 1))
    with pytest.raises(gencc.InsufficientReturnsError, match="at least 7 returned workers"):
        s.decode(Y, range(6))
    with pytest.raises(ValueError, match=r"n_workers must be >= \(n_inputs - 1\) \* degree \+ 1 = 7"):
        gencc.LCC(4, 6, degree=2)


def test_letcc_matches_scipy_smoothing_spline_end_to_end():
    from scipy.interpolate import make_smoothing_spline

    lam_enc, lam_dec = 1e-3, 1e-4
    s = gencc.LeTCC(6, 20, lam_enc=lam_enc, lam_dec=lam_dec)
    X = RNG.normal(size=(6, 1))
    coded = s.encode(X)[:, 0]
    enc = make_smoothing_spline(s.alpha, X[:, 0], lam=6 * lam_enc)
    inside = (s.beta >= s.alpha[0]) & (s.beta <= s.alpha[-1])
    np.testing.assert_allclose(coded[inside], enc(s.beta[inside]), atol=1e-8)
    returned = np.arange(20)
    Y = np.sin(2 * coded)
    dec = make_smoothing_spline(s.beta, Y, lam=20 * lam_dec)
    np.testing.assert_allclose(s.decode(Y[:, None], returned)[:, 0], dec(s.alpha), atol=1e-8)


def test_replication_first_copy_wins_and_missing_is_reported():
    s = gencc.Replication(3, 7)
    assert s.assignment.tolist() == [0, 1, 2, 0, 1, 2, 0]
    X = np.arange(3.0)[:, None]
    Y = s.encode(X) * 10
    np.testing.assert_allclose(s.decode(Y[[3, 4, 2]], [3, 4, 2]), X * 10)
    with pytest.raises(gencc.MissingOutputsError, match=r"inputs \[1\]") as err:
        s.decode(Y[[0, 2, 5]], [0, 2, 5])
    assert err.value.missing.tolist() == [1]
    assert np.isnan(err.value.partial[1]).all() and err.value.partial[0, 0] == 0


def test_uncoded_needs_every_worker():
    s = gencc.Uncoded(4)
    assert s.n_workers == 4
    Y = np.arange(4.0)[:, None]
    with pytest.raises(gencc.MissingOutputsError):
        s.decode(Y[:3], range(3))
    with pytest.raises(ValueError, match="n_workers must equal n_inputs"):
        gencc.Uncoded(4, 6)


def test_worker_point_on_a_data_point_gives_no_nan():
    for cls in (gencc.BACC, gencc.LCC, gencc.GCC, gencc.LeTCC):
        s = cls(3, 5, worker_points=np.concatenate([gencc.points.chebyshev1(3), [-1, 1]]))
        X = RNG.normal(size=(3, 2))
        Y = np.sin(s.encode(X))
        assert np.all(np.isfinite(s.encoder_matrix()))
        assert np.all(np.isfinite(s.decode(Y, range(5))))
        assert np.all(np.isfinite(s.decoder_matrix(range(5), Y=Y)))


def test_gcc_reports_its_choice_and_error_estimate():
    s = gencc.GCC(4, 20)
    X = RNG.uniform(-2, 2, size=(4, 3))
    Y = X.mean() + np.sin(s.encode(X))
    d = s.decode_with_info(Y[3:], np.arange(3, 20))
    assert d.info["kernel"] in {str(gencc.kernels.make_kernel(n, sc)) for n, sc in gencc.schemes.gcc.DEFAULT_CANDIDATES}
    assert d.error_estimate is not None and d.error_estimate >= 0
    with pytest.raises(ValueError, match="depends on the returned outputs"):
        s.decoder_matrix(range(20))


def test_with_params_and_repr():
    s = gencc.LeTCC(4, 10, lam_dec=1e-3)
    t = s.with_params(lam_dec=1e-2)
    assert isinstance(t, gencc.LeTCC) and t.lam_dec == 1e-2 and t.n_workers == 10
    assert "lam_dec=0.001" in repr(s)
    with pytest.raises(TypeError, match="no parameters"):
        s.with_params(degree=3)


def test_make_scheme_by_name():
    assert isinstance(gencc.make_scheme("bacc", 3, 8), gencc.BACC)
    with pytest.raises(ValueError, match="scheme must be one of"):
        gencc.make_scheme("mds", 3, 8)


SYSTEMATIC = [gencc.GCC, gencc.LeTCC, gencc.BACC, gencc.LCC]


def _mlp(seed=3):
    rng = np.random.default_rng(seed)
    W1, W2 = rng.normal(size=(6, 16)) / 6**0.5, rng.normal(size=(16, 3)) / 4
    return lambda x: np.tanh(x @ W1) @ W2


@pytest.mark.parametrize("cls", SYSTEMATIC)
def test_systematic_with_no_straggler_is_exact(cls):
    s = cls(4, 7, worker_points="systematic")
    assert s.systematic and s.beta.shape == (7,)
    np.testing.assert_array_equal(s.beta[:4], s.alpha)
    np.testing.assert_array_equal(s.encoder_matrix()[:4], np.eye(4))  # x_k itself, whatever lam_enc
    f = _mlp()
    X = RNG.uniform(-3, 3, size=(4, 6))
    Y = f(s.encode(X))
    order = RNG.permutation(7)
    d = s.decode_with_info(Y[order], order)
    np.testing.assert_allclose(d.estimate, f(X), rtol=1e-9, atol=0)
    assert d.info["exact"].tolist() == [True] * 4


@pytest.mark.parametrize("cls", SYSTEMATIC)
def test_systematic_copies_returned_outputs_and_decodes_the_missing(cls):
    s = cls(5, 10, worker_points="systematic")
    f = _mlp(4)
    X = RNG.uniform(-3, 3, size=(5, 6))
    Y = f(s.encode(X))
    ret = np.array([9, 0, 6, 3, 7, 4, 8])  # systematic workers 1 and 2 straggle
    d = s.decode_with_info(Y[ret], ret)
    assert d.info["exact"].tolist() == [True, False, False, True, True]
    np.testing.assert_array_equal(d.estimate[[0, 3, 4]], Y[[0, 3, 4]])  # the outputs themselves, bit for bit
    assert np.all(np.isfinite(d.estimate)) and not np.allclose(d.estimate[[1, 2]], 0)
    D = s.decoder_matrix(ret, Y=Y[ret])
    np.testing.assert_array_equal(D[0], (ret == 0).astype(float))
    np.testing.assert_allclose(D @ Y[ret], d.estimate, atol=1e-9)
    # a non-systematic scheme of the same points smooths instead
    plain = cls(5, 10, worker_points=s.beta)
    assert "exact" not in plain.decode_with_info(Y, range(10)).info


@pytest.mark.parametrize("make", [lambda: gencc.GCC(4, 7, kernel="sobolev2", worker_points="systematic"),
                                  lambda: gencc.LeTCC(4, 7, worker_points="systematic"),
                                  lambda: gencc.LCC(4, 9, degree=2, worker_points="systematic")])
def test_systematic_recovers_missing_inputs_of_simple_f(make):
    s = make()
    K = s.n_inputs
    if isinstance(s, gencc.LCC):  # polynomial f of the degree: any data
        X = RNG.normal(size=(K, 3))
        f = lambda x: 1 + x - 0.5 * x**2
    else:  # splines reproduce linear functions: data linear in alpha, f affine
        X = 1.5 + np.outer(s.alpha, [1.0, -2.0, 0.5])
        f = lambda x: 3 * x - 1
    Y = f(s.encode(X))
    ret = np.setdiff1d(np.arange(s.n_workers), [1, 2])
    d = s.decode_with_info(Y[ret], ret)
    assert not d.info["exact"][1:3].any()
    np.testing.assert_allclose(d.estimate, f(X), atol=1e-6)


def test_systematic_fast_path_needs_no_outputs_and_keeps_defaults():
    s = gencc.GCC(4, 6, worker_points="systematic")  # adaptive decoder, yet nothing to decode
    ret = [5, 3, 1, 0, 2]
    D = s.decoder_matrix(ret)
    assert D.shape == (4, 5) and np.all(D.sum(axis=1) == 1) and D[0, 3] == 1 and D[3, 1] == 1
    assert s.with_params(n_workers=8).systematic and s.with_params(n_workers=8).beta.shape == (8,)
    lcc = gencc.LCC(4, 9, degree=2, worker_points="systematic")  # needs 7 returns to decode...
    Y = RNG.normal(size=(9, 2))
    np.testing.assert_array_equal(lcc.decode(Y[:4], range(4)), Y[:4])  # ...but not to copy
    with pytest.raises(gencc.InsufficientReturnsError, match="at least 7"):
        lcc.decode(Y[1:5], range(1, 5))
    assert not gencc.GCC(4, 6).systematic  # defaults unchanged
    np.testing.assert_array_equal(gencc.GCC(4, 6).beta, gencc.points.chebyshev2(6))


def test_systematic_bad_arguments():
    with pytest.raises(ValueError, match=r"n_workers must be >= n_inputs = 5 \(at least one worker per input\), got 4"):
        gencc.GCC(5, 4, worker_points="systematic")
    with pytest.raises(ValueError, match="n_workers must be >= n_inputs"):
        gencc.LeTCC(5, 3, worker_points="systematic")
    with pytest.raises(ValueError, match="not available for Replication"):
        gencc.Replication(3, 6, worker_points="systematic")
    with pytest.raises(ValueError, match="worker_points must be one of"):
        gencc.GCC(3, 6, worker_points="sytematic")
