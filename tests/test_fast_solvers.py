"""The linear-time state-space solver against the dense reference."""

import numpy as np
import pytest
from scipy.interpolate import make_smoothing_spline

import gencc
from gencc import ridge
from gencc.ridge import common as ridge_common
from gencc.ridge.dense import _DenseSolver
from gencc.ridge.fast import _sobolev_scale
from gencc.kernels import Gaussian, Matern, Sobolev2
from gencc.ridge import KernelRidge, hole_blocks, ridge_path, select_ridge

FAST_KERNELS = [Sobolev2(), Sobolev2(0.7), Matern(0.3, 0.5), Matern(0.5, 1.5), Matern(0.2, 2.5), Matern(2.0, 2.5)]
RTOL = 1e-8


def _close(a, b, rtol=RTOL):
    """Equal to ``rtol`` relative to the larger magnitude of the reference."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    scale = max(np.max(np.abs(b)), np.finfo(float).tiny)
    err = np.max(np.abs(a - b)) / scale
    assert err <= rtol, f"relative error {err:.3g} > {rtol:g}"


@pytest.fixture
def data():
    rng = np.random.default_rng(11)
    t = rng.uniform(-1, 1, 40)  # unsorted on purpose
    Y = np.column_stack([np.sin(3 * t), np.exp(t), t**2]) + 0.01 * rng.normal(size=(40, 3))
    return t, Y


def _fits(kernel, lam, t, Y):
    return (KernelRidge(kernel, lam, solver="fast").fit(t, Y), KernelRidge(kernel, lam, solver="dense").fit(t, Y))


@pytest.mark.parametrize("kernel", FAST_KERNELS, ids=str)
@pytest.mark.parametrize("lam", [1e-8, 1e-5, 1e-2])
def test_fit_matches_dense(data, kernel, lam):
    t, Y = data
    fast, dense = _fits(kernel, lam, t, Y)
    assert (fast.solver_, dense.solver_) == ("fast", "dense")
    s = np.r_[np.linspace(-1.3, 1.3, 37), t[:5]]  # off the nodes, beyond them and on them
    _close(fast.predict(s), dense.predict(s))
    _close(fast.loo_residuals_, dense.loo_residuals_)
    _close(fast.coef_, dense.coef_, rtol=1e-8 if lam > 1e-8 else 1e-7)  # dense c itself carries cond * eps
    assert fast.lam_effective_ == pytest.approx(dense.lam_effective_, rel=1e-12)
    assert fast.loo_mse_ == pytest.approx(dense.loo_mse_, rel=1e-7)
    assert fast.null_coef_.shape == dense.null_coef_.shape
    if dense.null_coef_.size:
        _close(fast.null_coef_, dense.null_coef_, rtol=1e-7)


@pytest.mark.parametrize("kernel", FAST_KERNELS[1:4], ids=str)
def test_vector_targets_and_zero_ridge(data, kernel):
    t, Y = data
    fast, dense = _fits(kernel, 0.0, t, Y[:, 0])
    s = np.linspace(-1, 1, 11)
    assert fast.predict(s).shape == (11,)
    _close(fast.predict(s), dense.predict(s), rtol=1e-7)
    np.testing.assert_allclose(fast.predict(t), Y[:, 0], atol=1e-7)  # interpolates


def test_sobolev_reproduces_affine_functions_exactly():
    rng = np.random.default_rng(0)
    t = rng.uniform(-1, 1, 200)
    y = 2.0 - 3.0 * t
    for lam in (1e-8, 1e-3, 10.0):
        fit = KernelRidge(Sobolev2(), lam, solver="fast").fit(t, y)
        s = np.linspace(-2, 2, 9)
        np.testing.assert_allclose(fit.predict(s), 2.0 - 3.0 * s, atol=1e-10)
        np.testing.assert_allclose(fit.loo_residuals_, 0.0, atol=1e-10)
        np.testing.assert_allclose(fit.null_coef_[:, 0], [2.0, -3.0], atol=1e-9)


@pytest.mark.parametrize("lam", [1e-6, 1e-4, 1e-2])
def test_sobolev_fast_is_scipy_smoothing_spline(lam):
    rng = np.random.default_rng(5)
    t = np.sort(rng.uniform(-1, 1, 300))
    y = np.sin(4 * t) + 0.1 * rng.normal(size=t.size)
    s = np.linspace(t[0], t[-1], 101)
    fast = KernelRidge(Sobolev2(), lam, solver="fast").fit(t, y).predict(s)
    dense = KernelRidge(Sobolev2(), lam, solver="dense").fit(t, y).predict(s)
    ref = make_smoothing_spline(t, y, lam=t.size * lam)(s)
    _close(fast, dense, rtol=1e-11)
    # scipy's B-spline solve is itself accurate only to ~1e-8..1e-6 here (n = 300; 1.3e-6 relative
    # at lam = 1e-2 with scipy 1.17.1, ~1e-7 with earlier releases); the dense path differs from it
    # by as much, so the fast one must be as close as the dense one
    assert np.max(np.abs(fast - ref)) <= np.max(np.abs(dense - ref)) + 1e-11
    _close(fast, ref, rtol=5e-6)


def test_clustered_nodes_and_many_outputs():
    # GCC's worker points: Chebyshev, spacing ~ 1/n^2 at the ends
    n = 120
    t = np.cos(np.pi * np.arange(n) / (n - 1))
    Y = np.column_stack([np.sin(k * t) for k in range(1, 8)])
    for kernel in FAST_KERNELS:
        fast, dense = _fits(kernel, 1e-6, t, Y)
        s = np.linspace(-1, 1, 50)
        _close(fast.predict(s), dense.predict(s))
        _close(fast.loo_residuals_, dense.loo_residuals_, rtol=1e-7)


@pytest.mark.parametrize("relative", [False, True])
@pytest.mark.parametrize("kernel", FAST_KERNELS[::2] + [Matern(1.0, 1.5)], ids=str)
def test_ridge_path_rows_match_dense(kernel, relative):
    t = np.cos(np.pi * np.arange(30) / 29)[::-1]
    t = t[np.r_[0:9, 14:30]]  # a 5-node hole
    rng = np.random.default_rng(2)
    t = t[rng.permutation(t.size)]
    Y = np.c_[np.sin(3 * t), t**3]
    alpha = gencc.points.make_points("chebyshev1", 6)
    order = np.argsort(t)
    blocks = [(int(order[j]), np.sort(order[B])) for j, B in hole_blocks(t[order], alpha)]
    assert any(B.size >= 3 for _, B in blocks)
    lams = [1e-10, 1e-4, 1e-1] if relative else [1e-7, 1e-3]
    kw = dict(targets=alpha, blocks=blocks, relative=relative)
    fast = ridge_path(t, Y, kernel, lams, solver="fast", **kw)
    dense = ridge_path(t, Y, kernel, lams, solver="dense", **kw)
    for f, d in zip(fast, dense):
        assert f.lam == pytest.approx(d.lam, rel=1e-10)
        _close(f.pred, d.pred)
        _close(f.c / f.a[:, None], d.c / d.a[:, None], rtol=1e-7)
        _close(f.a, d.a, rtol=1e-7)
        _close(f.block, d.block, rtol=1e-7)


def test_sobolev_scale_is_mean_eigenvalue():
    rng = np.random.default_rng(4)
    t = np.sort(rng.uniform(-1, 1, 300))
    for k in (Sobolev2(), Sobolev2(0.3)):
        dense = _DenseSolver(k, t, t[:, None])
        ref = np.trace(dense.M0) / dense.dim
        assert _sobolev_scale(k, t) == pytest.approx(ref, rel=1e-11)


@pytest.mark.parametrize("criterion", ["loo", "gcv", "gap"])
@pytest.mark.parametrize("lam", [None, 1e-8, [1e-8, 1e-4]])
def test_select_ridge_matches_dense(criterion, lam):
    N, K = 64, 12
    beta = gencc.points.make_points("chebyshev2", N)
    alpha = gencc.points.make_points("chebyshev1", K)
    keep = np.setdiff1d(np.arange(N), [3, 17, 18, 19, 20, 33])
    t = beta[keep]
    Y = np.c_[t * np.sin(3 * t), np.tanh(2 * t)]
    kernels = [Sobolev2()] + [Matern(sc, nu) for nu in (0.5, 1.5, 2.5) for sc in (0.2, 1.0)] + [Gaussian(0.5)]
    kw = dict(lam=lam, criterion=criterion, targets=alpha)
    assert t.size >= ridge.FAST_MIN_N_SELECT  # auto: every state-space kernel on the fast path
    fast = select_ridge(t, Y, kernels, **kw)
    dense = select_ridge(t, Y, kernels, solver="dense", **kw)
    assert fast.fit.solver_ == "fast" or str(fast.kernel) == "gaussian(scale=0.5)"
    assert [r[0] for r in fast.scores] == [r[0] for r in dense.scores]
    for (_, lf, sf), (_, ld, sd) in zip(fast.scores, dense.scores):
        assert lf == pytest.approx(ld, rel=1e-9)
        assert sf == pytest.approx(sd, rel=1e-6)
    assert str(fast.kernel) == str(dense.kernel)
    _close(fast.fit.predict(alpha), dense.fit.predict(alpha))
    for name, f in fast.fits.items():
        _close(f.predict(alpha), dense.fits[name].predict(alpha))


def test_gcc_default_decode_matches_dense(monkeypatch):
    K, N = 16, 64
    rng = np.random.default_rng(9)
    X = rng.uniform(-3, 3, size=(K, 5))
    scheme = gencc.GCC(K, N)
    coded = scheme.encode(X)
    Y = coded * np.sin(coded)
    returned = np.setdiff1d(np.arange(N), rng.choice(N, N // 8, replace=False))
    monkeypatch.setattr(ridge_common, "FAST_MIN_N", 1)
    monkeypatch.setattr(ridge_common, "FAST_MIN_N_SELECT", 1)
    fast = scheme.decode_with_info(Y[returned], returned)
    monkeypatch.setattr(ridge_common, "FAST_MIN_N", 10**9)
    monkeypatch.setattr(ridge_common, "FAST_MIN_N_SELECT", 10**9)
    dense = scheme.decode_with_info(Y[returned], returned)
    assert fast.info["mixture"] == dense.info["mixture"]
    _close(fast.estimate, dense.estimate)


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_tiny_n(n):
    t = np.linspace(-0.5, 0.7, n)
    Y = np.c_[np.cos(t), t]
    for kernel in FAST_KERNELS:
        dense = KernelRidge(kernel, 1e-4, solver="dense").fit(t, Y)
        if n < kernel.null_degree + 2:  # Sobolev2 needs 3 nodes on the fast path
            with pytest.raises(ValueError, match="solver='fast'"):
                KernelRidge(kernel, 1e-4, solver="fast").fit(t, Y)
            continue
        fast = KernelRidge(kernel, 1e-4, solver="fast").fit(t, Y)
        s = np.linspace(-1, 1, 7)
        _close(fast.predict(s), dense.predict(s))
        _close(fast.loo_residuals_, dense.loo_residuals_)


def test_auto_solver_and_bad_arguments():
    t = np.linspace(-1, 1, max(ridge.FAST_MIN_N, 3))
    assert KernelRidge(Matern(0.5, 1.5), 1e-6).fit(t, t).solver_ == "fast"
    assert KernelRidge(Gaussian(0.5), 1e-6).fit(t, t).solver_ == "dense"
    assert KernelRidge(Matern(0.5, 1.5), 1e-6).fit(t[:10], t[:10]).solver_ == "dense"
    with pytest.raises(ValueError, match="solver must be one of"):
        KernelRidge(Sobolev2(), 1e-3, solver="banded")
    with pytest.raises(ValueError, match="solver='fast'"):
        KernelRidge(Gaussian(0.5), 1e-3, solver="fast").fit(t, t)
    dup = np.r_[t, t[:3]]
    with pytest.raises(ValueError, match="distinct nodes"):
        KernelRidge(Sobolev2(), 1e-3, solver="fast").fit(dup, dup)
    assert KernelRidge(Sobolev2(), 1e-3).fit(dup, dup).solver_ == "dense"  # auto falls back
    with pytest.raises(ValueError, match="solver must be one of"):
        select_ridge(t, t, [Sobolev2()], solver="nope")


def test_smoother_matrix_fast_is_the_linear_map():
    t = np.cos(np.pi * np.arange(70) / 69)
    s = np.linspace(-1, 1, 9)
    Y = np.c_[np.sin(2 * t), t]
    for kernel in (Sobolev2(), Matern(0.5, 2.5)):
        fit = KernelRidge(kernel, 1e-5, solver="fast").fit(t, Y)
        H = fit.smoother_matrix(t, s)
        _close(H @ Y, fit.predict(s))
        _close(H, KernelRidge(kernel, 1e-5, solver="dense").smoother_matrix(t, s))


def _hole_blocks_reference(t, targets, *, centres=2, min_kept=3, wide=0.0):
    """The former loop implementation of hole_blocks (O(K n)), kept as the reference."""
    n = t.size
    out, seen = [], set()
    for a in np.asarray(targets, dtype=np.float64).reshape(-1):
        r = int(np.searchsorted(t, a))
        dl = a - t[r - 1] if r > 0 else np.inf
        dr = t[r] - a if r < n else np.inf
        if wide and np.isfinite(dl + dr):
            near = [t[r - 1] - t[r - 2] if r >= 2 else 0.0, t[r + 1] - t[r] if r + 1 < n else 0.0]
            if dl + dr <= wide * max(near):
                continue
        for j in range(r - centres, r + centres):
            if not 0 <= j < n:
                continue
            lo, hi = t[j] - dl, t[j] + dr
            if (np.isfinite(dl) and lo < t[0]) or (np.isfinite(dr) and hi > t[-1]):
                continue
            B = np.flatnonzero((t > lo) & (t < hi))
            if j not in B:
                B = np.union1d(B, [j])
            key = (j, B.tobytes())
            if n - B.size < min_kept or key in seen:
                continue
            seen.add(key)
            out.append((j, B))
    return out


def test_vectorised_hole_blocks_match_the_loop():
    rng = np.random.default_rng(1)
    for _ in range(300):
        n = int(rng.integers(1, 40))
        if rng.random() < 0.5:
            t = np.sort(rng.uniform(-1, 1, n))
        else:
            t = np.cos(np.pi * np.arange(n) / max(n - 1, 1))[::-1]
            t = t[np.sort(rng.choice(n, int(rng.integers(1, n + 1)), replace=False))]
        a = np.sort(rng.uniform(-1.1, 1.1, int(rng.integers(1, 12))))
        a = np.r_[a, t[:2]]  # targets on nodes too
        for kw in ({}, {"wide": 1.5}, {"centres": 1, "min_kept": 2}, {"centres": 3}):
            ref = _hole_blocks_reference(t, a, **kw)
            got = hole_blocks(t, a, **kw)
            assert [j for j, _ in got] == [j for j, _ in ref]
            assert all(np.array_equal(B1, B2) for (_, B1), (_, B2) in zip(got, ref))


def test_integer_incomplete_gamma_matches_scipy():
    from scipy.special import gammainc

    from gencc.statespace import _gammainc_int

    x = np.r_[0.0, np.logspace(-12, 2.5, 2000), 1.999999, 2.0, 2.000001]
    ref = gammainc(np.arange(1, 6), x[:, None])
    np.testing.assert_allclose(_gammainc_int(4, x), ref, rtol=1e-13, atol=0)


def test_smoother_matrix_in_column_chunks(monkeypatch):
    t = np.cos(np.pi * np.arange(50) / 49)
    s = np.linspace(-1, 1, 7)
    ref = KernelRidge(Matern(0.5, 1.5), 1e-6, solver="fast").smoother_matrix(t, s)
    monkeypatch.setattr(ridge_common, "FAST_BATCH_BYTES", 100.0 * t.size * 8)  # 8 columns a chunk
    np.testing.assert_allclose(KernelRidge(Matern(0.5, 1.5), 1e-6, solver="fast").smoother_matrix(t, s), ref,
                               rtol=0, atol=1e-14)


@pytest.mark.skipif(not gencc.statespace.compiled_available(), reason="numba is not installed")
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_compiled_filters_match_numpy_reference(monkeypatch, seed):
    """The numba recursions against the NumPy reference: every kernel, m > 1, several ridges,
    predictions off and on the nodes, leave-one-out means and variances (hence the hat
    diagonal), leave-block-out predictions, the flat prior's edges and a selected model."""
    from gencc import statespace as ss

    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(8, 70)), int(rng.integers(2, 6))
    t = np.sort(rng.uniform(-1, 1, n))
    Y = rng.normal(size=(n, m))
    kernels = FAST_KERNELS + [Matern(1.0, 0.5), Matern(0.1, 1.5)]
    models = [ss.gauss_markov(k) for k in kernels for _ in range(2)]
    sigma2 = n * 10.0 ** rng.uniform(-10, -1, len(models))
    i = np.arange(n)
    tau = np.r_[rng.uniform(-1.2, 1.2, 25), t[[0, 1, n // 2, n - 2, n - 1]]]
    iL = np.searchsorted(t, tau, side="right") - 1
    lo = rng.integers(0, n, 30)
    hi = np.minimum(lo + rng.integers(0, 4, 30), n - 1)
    j = np.minimum(lo + rng.integers(0, 4, 30), hi)
    queries = [(t, i - 1, i + 1), (tau, iL, iL + 1), (t[j], lo - 1, hi + 1)]

    def run(compiled):
        monkeypatch.setattr(ss, "USE_COMPILED", compiled)
        tf = ss.TwoFilter(models, sigma2, t, Y)
        out = [tf.query(*q) for q in queries]
        return out + [tf.select(3).query(*queries[1])]

    for (mc, vc), (mr, vr) in zip(run(True), run(False)):
        assert np.array_equal(np.isnan(mc), np.isnan(mr)) and np.array_equal(np.isnan(vc), np.isnan(vr))
        for b in range(mc.shape[0]):
            ok = ~np.isnan(vr[b])
            _close(mc[b][ok], mr[b][ok], rtol=1e-12)
            _close(vc[b][ok], vr[b][ok], rtol=1e-12)


@pytest.mark.skipif(not gencc.statespace.compiled_available(), reason="numba is not installed")
@pytest.mark.parametrize("lam", [0.0, 1e-8])
def test_compiled_selection_matches_numpy_reference(monkeypatch, lam):
    from gencc import statespace as ss

    s = gencc.GCC(60, 240, lam_dec=lam)
    rng = np.random.default_rng(5)
    returned = np.sort(rng.choice(240, 200, replace=False))
    Y = np.column_stack([np.sin(3 * s.beta[returned]), np.cos(5 * s.beta[returned])])
    out = {}
    for compiled in (True, False):
        monkeypatch.setattr(ss, "USE_COMPILED", compiled)
        out[compiled] = s.decode_with_info(Y, returned)
    assert out[True].info["kernel"] == out[False].info["kernel"]
    assert out[True].info.get("mixture") == out[False].info.get("mixture")
    _close(out[True].estimate, out[False].estimate, rtol=1e-12)
    assert out[True].info["loo_mse"] == pytest.approx(out[False].info["loo_mse"], rel=1e-11)


def test_generated_recursions_are_up_to_date():
    """src/gencc/_statespace_gen.py is what tools/gen_statespace_jit.py writes."""
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("gen_statespace_jit", root / "tools" / "gen_statespace_jit.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert (root / "src" / "gencc" / "_statespace_gen.py").read_text() == gen.source()
