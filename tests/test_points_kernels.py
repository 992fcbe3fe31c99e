import numpy as np
import pytest

from gencc import kernels, points


def test_chebyshev1_formula_and_sorted():
    K = 7
    expected = np.sort(np.cos((2 * np.arange(K) + 1) * np.pi / (2 * K)))
    np.testing.assert_allclose(points.chebyshev1(K), expected)
    assert np.all(np.diff(points.chebyshev1(K)) > 0)
    assert np.all(np.abs(points.chebyshev1(K)) < 1)


def test_chebyshev2_includes_endpoints():
    b = points.chebyshev2(9)
    assert b[0] == -1.0 and b[-1] == 1.0 and b[4] == 0.0
    np.testing.assert_allclose(b, np.sort(np.cos(np.arange(9) * np.pi / 8)), atol=1e-15)
    assert points.chebyshev2(1).tolist() == [0.0]


def test_equispaced():
    np.testing.assert_allclose(points.equispaced(5), [-1, -0.5, 0, 0.5, 1])


def test_make_points_rejects_bad_specs():
    with pytest.raises(ValueError, match="worker_points must be one of"):
        points.make_points("chebyshev3", 4, "worker_points")
    with pytest.raises(ValueError, match=r"shape \(3,\)"):
        points.make_points([0.1, 0.2], 3)
    with pytest.raises(ValueError, match="inside"):
        points.make_points([0.1, 2.0], 2)
    with pytest.raises(ValueError, match="distinct"):
        points.make_points([0.1, 0.1], 2)
    np.testing.assert_allclose(points.make_points([0.5, -0.5], 2), [-0.5, 0.5])
    with pytest.raises(ValueError, match="n must be an integer >= 1"):
        points.chebyshev1(0)



@pytest.mark.parametrize("K, N", [(4, 4), (4, 5), (4, 8), (8, 12), (8, 16), (32, 64)])
def test_systematic_points_hold_alpha_then_distinct_sorted_parities(K, N):
    alpha = points.chebyshev1(K)
    beta = points.systematic_points(alpha, N)
    assert beta.shape == (N,) and beta.dtype == np.float64
    np.testing.assert_array_equal(beta[:K], alpha)  # worker k holds input k
    par = beta[K:]
    assert np.all(np.diff(par) > 0) and np.all(np.abs(beta) <= 1)
    assert np.unique(beta).size == N  # no parity on a data point
    if par.size:  # every parity keeps sep x its gap away from alpha
        edges = np.concatenate([[-1.0], alpha, [1.0]])
        i = np.clip(np.searchsorted(edges, par) - 1, 0, K)
        assert np.all(np.min(np.abs(par[:, None] - alpha), axis=1) >= 0.1 * (edges[i + 1] - edges[i]) - 1e-12)


def test_parity_points_greedy_rule():
    alpha = points.chebyshev1(4)
    # one parity: the mean d_l*d_r is lowest next to an end point (extrapolation
    # costs most), mirror ties go left; a second parity takes the mirror image
    np.testing.assert_allclose(points.parity_points(alpha, 1), [-0.932], atol=1e-3)
    np.testing.assert_allclose(points.parity_points(alpha, 2), [-0.932, 0.932], atol=1e-3)
    assert points.parity_points(alpha, 0).shape == (0,)
    # with no separation the parity sits on the grid point next to alpha_0
    assert abs(points.parity_points(alpha, 1, sep=0.0)[0] - alpha[0]) < 2e-3


def test_systematic_points_errors():
    with pytest.raises(ValueError, match="n_workers must be >= n_inputs = 4"):
        points.systematic_points(points.chebyshev1(4), 3)
    with pytest.raises(ValueError, match="worker_points='systematic' needs the data points"):
        points.make_points("systematic", 6, "worker_points")
    with pytest.raises(ValueError, match="no room"):
        points.parity_points(points.chebyshev1(4), 20, grid_size=11)

@pytest.mark.parametrize("name", ["matern12", "matern32", "matern52", "gaussian"])
def test_positive_definite_kernels_have_psd_gram(name):
    k = kernels.make_kernel(name, 0.7)
    t = np.linspace(-1, 1, 30)
    G = k(t, t)
    np.testing.assert_allclose(G, G.T)
    assert np.linalg.eigvalsh(G).min() > -1e-10
    assert np.allclose(np.diag(G), 1.0)


def test_matern_closed_forms():
    r = np.array([0.0, 0.3, 1.7])
    np.testing.assert_allclose(kernels.Matern(1.0, 0.5).profile(r), np.exp(-r))
    a = np.sqrt(5) * r
    np.testing.assert_allclose(kernels.Matern(1.0, 2.5).profile(r), (1 + a + a**2 / 3) * np.exp(-a))


def test_sobolev_is_conditionally_positive_definite():
    t = np.linspace(-1, 1, 25)
    G = kernels.Sobolev2()(t, t)
    T = np.vander(t, 2, increasing=True)
    Z = np.linalg.qr(T, mode="complete")[0][:, 2:]
    assert np.linalg.eigvalsh(Z.T @ G @ Z).min() > 0


def test_kernel_argument_errors():
    with pytest.raises(ValueError, match="scale must be a finite number > 0"):
        kernels.Gaussian(-1.0)
    with pytest.raises(ValueError, match="nu must be"):
        kernels.Matern(1.0, 1.0)
    with pytest.raises(ValueError, match="kernel must be a Kernel or one of"):
        kernels.make_kernel("rbf")
