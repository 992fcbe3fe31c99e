import numpy as np
import pytest
from scipy.interpolate import make_smoothing_spline

from gencc.kernels import Gaussian, Matern, Sobolev2
from gencc.ridge import KernelRidge, select_ridge


@pytest.fixture
def data():
    rng = np.random.default_rng(3)
    t = np.sort(rng.uniform(-1, 1, 25))
    Y = np.column_stack([np.sin(3 * t), np.exp(t)]) + 0.05 * rng.normal(size=(25, 2))
    return t, Y


@pytest.mark.parametrize("lam", [1e-5, 1e-3, 1e-1])
def test_sobolev_ridge_is_scipy_smoothing_spline(data, lam):
    t, Y = data
    s = np.linspace(t[0], t[-1], 41)  # inside the hull: both are the natural cubic spline there
    fit = KernelRidge(Sobolev2(), lam).fit(t, Y)
    for j in range(2):
        ref = make_smoothing_spline(t, Y[:, j], lam=t.size * lam)(s)
        np.testing.assert_allclose(fit.predict(s)[:, j], ref, atol=1e-8)


def test_sobolev_ridge_extrapolates_linearly(data):
    t, Y = data
    fit = KernelRidge(Sobolev2(), 1e-3).fit(t, Y[:, 0])
    s = t[-1] + np.array([0.1, 0.2, 0.3])
    v = fit.predict(s)
    assert abs((v[2] - v[1]) - (v[1] - v[0])) < 1e-10


@pytest.mark.parametrize("kernel", [Sobolev2(), Matern(0.5, 1.5), Gaussian(0.1)])
def test_zero_ridge_interpolates(data, kernel):
    t, Y = data
    fit = KernelRidge(kernel, 0.0).fit(t, Y)
    np.testing.assert_allclose(fit.predict(t), Y, atol=1e-5)


@pytest.mark.parametrize("kernel", [Sobolev2(), Matern(0.5, 2.5)])
def test_closed_form_loo_matches_brute_force(data, kernel):
    t, Y = data
    lam = 1e-3
    n = t.size
    fit = KernelRidge(kernel, lam).fit(t, Y)
    for i in (0, 7, n - 1):
        keep = np.arange(n) != i
        # same penalty weight: (1/n) -> (1/(n-1)) normalisation means lam' = lam * n / (n-1)
        sub = KernelRidge(kernel, lam * n / (n - 1)).fit(t[keep], Y[keep])
        np.testing.assert_allclose(fit.loo_residuals_[i], Y[i] - sub.predict(t[i : i + 1])[0], rtol=1e-6)


def test_smoother_matrix_is_linear_map(data):
    t, Y = data
    s = np.linspace(-1, 1, 9)
    fit = KernelRidge(Matern(0.5, 1.5), 1e-2).fit(t, Y)
    H = fit.smoother_matrix(t, s)
    np.testing.assert_allclose(H @ Y, fit.predict(s), atol=1e-10)


def test_selection_prefers_heavy_smoothing_for_noise_and_light_for_clean():
    rng = np.random.default_rng(0)
    t = np.linspace(-1, 1, 40)
    clean = np.sin(2 * t)[:, None]
    noisy = clean + 0.3 * rng.normal(size=clean.shape)
    lam_clean = select_ridge(t, clean, [Sobolev2()]).lam
    lam_noisy = select_ridge(t, noisy, [Sobolev2()]).lam
    assert lam_noisy > 1e4 * lam_clean


def test_selection_score_is_the_fits_loo(data):
    t, Y = data
    sel = select_ridge(t, Y, [Sobolev2(), Matern(0.5, 1.5)])
    assert sel.score == pytest.approx(sel.fit.loo_mse_, rel=1e-6)
    assert sel.score == min(s for _, _, s in sel.scores)
    gcv = select_ridge(t, Y, [Sobolev2()], criterion="gcv")
    assert np.isfinite(gcv.score)
    with pytest.raises(ValueError, match="criterion"):
        select_ridge(t, Y, [Sobolev2()], criterion="aic")
