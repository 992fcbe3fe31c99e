"""KernelRidge checks its input like a scikit-learn estimator: clear errors naming the argument,
nothing fitted on NaN, no use before fit."""

import numpy as np
import pytest

from gencc.errors import NotFittedError
from gencc.kernels import Matern, Sobolev2
from gencc.ridge import KernelRidge

T = np.linspace(-1, 1, 6)


@pytest.mark.parametrize("use", [lambda f: f.predict(T), lambda f: f.coef_, lambda f: f.null_coef_,
                                 lambda f: f.loo_residuals_, lambda f: f.loo_mse_])
def test_nothing_is_read_before_fit(use):
    est = KernelRidge(Sobolev2(), 1e-6)
    with pytest.raises(NotFittedError, match="fit"):
        use(est)
    assert not hasattr(est, "coef_")  # NotFittedError is an AttributeError too


@pytest.mark.parametrize("t, Y, match", [
    ([0.0, np.nan, 0.5, 1.0], np.ones(4), "t must be finite"),
    (T, np.r_[np.ones(5), np.inf], "Y must be finite"),
    (T, np.ones(5), r"one row per node, shape \(6,\)"),
    (np.zeros((3, 2)), np.ones(3), r"t must have shape \(n,\)"),
    ([], [], "at least 1 point,"),
])
def test_bad_data_is_named(t, Y, match):
    with pytest.raises(ValueError, match=match):
        KernelRidge(Sobolev2(), 1e-6).fit(t, Y)


def test_bad_hyper_parameters_are_named_at_fit():
    with pytest.raises(ValueError, match="lam must be a finite number >= 0"):
        KernelRidge(Sobolev2(), -1.0).fit(T, T)
    with pytest.raises(ValueError, match="lam"):
        KernelRidge(Sobolev2(), np.nan).fit(T, T)
    with pytest.raises(TypeError, match="kernel must be a gencc.kernels.Kernel"):
        KernelRidge("sobolev2").fit(T, T)
    with pytest.raises(ValueError, match="solver must be one of"):
        KernelRidge(Sobolev2(), solver="sparse")


def test_predict_checks_its_points_and_keeps_the_fit_shapes():
    fit = KernelRidge(Matern(0.5, 2.5), 1e-8).fit(T, np.sin(T))
    with pytest.raises(ValueError, match="s must be finite"):
        fit.predict([0.1, np.nan])
    assert fit.predict(0.2).shape == (1,) and fit.predict(T).shape == (6,)
    two = KernelRidge(Matern(0.5, 2.5), 1e-8).fit(T, np.c_[np.sin(T), np.cos(T)])
    assert two.predict(T[:3]).shape == (3, 2)
    np.testing.assert_allclose(two.predict(T)[:, 0], fit.predict(T), atol=1e-12)
