"""Decoder cache, vectorised decode/encode of many batches, matrix-free encode.

References are independent: the uncached decode (cache disabled), the
per-batch loop, the dense encoder matrix and a leave-one-out loop.
"""

import copy
import pickle
import threading

import numpy as np
import pytest

import gencc
from gencc.interpolation import barycentric_matrix, berrut_weights

K, N, M = 6, 20, 3

# (factory, relative tolerance of cached vs uncached). BACC and LCC build the
# same matrix either way; the kernel fits solve an ill-conditioned system (a
# near-interpolating ridge), and a fit to the identity followed by a product
# differs from a fit to Y by round-off times that conditioning.
CACHEABLE = {
    "gcc-sobolev2": (lambda **kw: gencc.GCC(K, N, kernel="sobolev2", **kw), 1e-9),
    "gcc-matern32": (lambda **kw: gencc.GCC(K, N, kernel="matern32", scale=0.5, **kw), 1e-9),
    "gcc-lam-1e-4": (lambda **kw: gencc.GCC(K, N, kernel="matern52", lam_dec=1e-4, **kw), 1e-12),
    "letcc": (lambda **kw: gencc.LeTCC(K, N, **kw), 1e-10),
    "bacc": (lambda **kw: gencc.BACC(K, N, **kw), 1e-12),
    "lcc": (lambda **kw: gencc.LCC(K, N, **kw), 1e-12),
    "gcc-systematic": (lambda **kw: gencc.GCC(K, N, kernel="sobolev2", worker_points="systematic", **kw), 1e-9),
    "bacc-systematic": (lambda **kw: gencc.BACC(K, N, worker_points="systematic", **kw), 1e-12),
}
ALL = {
    **{k: v[0] for k, v in CACHEABLE.items()},
    "gcc-auto": lambda: gencc.GCC(K, N),
    "gcc-auto-systematic": lambda: gencc.GCC(K, N, worker_points="systematic"),
    "replication": lambda: gencc.Replication(K, N),
    "parm": lambda: gencc.ParM(K),
}


def _returned(seed, n_workers=N, stragglers=5):
    rng = np.random.default_rng(seed)
    return rng.permutation(np.setdiff1d(np.arange(n_workers), rng.choice(n_workers, stragglers, replace=False)))


def _outputs(scheme, returned, seed, batches=None):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(K, M) if batches is None else (batches, K, M))
    coded = scheme.encode(X) if batches is None else np.stack([scheme.encode(x) for x in X])
    Y = coded * np.sin(coded)
    return Y[..., returned, :]


def _rel(a, b):
    return np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300)


def _assert_info_close(a, b, tol):
    assert list(a) == list(b)
    for key in a:
        if key == "loo_mse":
            assert (np.isnan(a[key]) and np.isnan(b[key])) or abs(a[key] - b[key]) <= tol * abs(b[key]) + 1e-300
        elif key in ("rmse", "rmse_p90"):  # hole residuals by one map of the outputs, or by a fit to them
            np.testing.assert_allclose(a[key], b[key], rtol=max(tol, 1e-12), atol=1e-300)
        else:
            np.testing.assert_array_equal(a[key], b[key])


@pytest.mark.parametrize("name", sorted(CACHEABLE))
def test_cached_decode_equals_uncached(name):
    make, tol = CACHEABLE[name]
    cached, plain = make(), make().set_decoder_cache(0)
    assert cached.caches_decoders
    for seed in range(3):
        ret = _returned(seed)
        Y = _outputs(plain, ret, seed)
        ref = plain.decode_with_info(Y, ret)
        for _ in range(3):  # first sighting (direct), second (built), third (hit)
            got = cached.decode_with_info(Y, ret)
            assert _rel(got.estimate, ref.estimate) <= tol
            _assert_info_close(got.info, ref.info, tol)
            assert _rel(cached.decode(Y, ret), ref.estimate) <= tol
    info = cached.decoder_cache_info()
    assert info.currsize == 3 and info.hits > 0 and plain.decoder_cache_info().currsize == 0


def test_admission_lru_and_bounds():
    s = gencc.GCC(K, N, kernel="sobolev2").set_decoder_cache(2)
    sets = [_returned(seed) for seed in range(3)]
    Y = [_outputs(s, r, 0) for r in sets]
    s.decode(Y[0], sets[0])
    assert s.decoder_cache_info().currsize == 0  # first sighting: decoded directly
    s.decode(Y[0], sets[0])
    assert s.decoder_cache_info().currsize == 1
    s.decode(Y[0][::-1], sets[0][::-1])  # the same set in another order is the same entry
    assert s.decoder_cache_info().hits == 1
    for r, y in zip(sets[1:], Y[1:]):
        s.decode(y, r)
        s.decode(y, r)
    info = s.decoder_cache_info()
    assert info.currsize == 2 and info.nbytes > 0  # sets[0] evicted, least recently used
    hits = info.hits
    s.decode(Y[0], sets[0])
    assert s.decoder_cache_info().hits == hits
    small = gencc.GCC(K, N, kernel="sobolev2").set_decoder_cache(4, max_bytes=100)
    for _ in range(3):
        small.decode(Y[0], sets[0])
    assert small.decoder_cache_info().currsize == 0
    s.clear_decoder_cache()
    assert s.decoder_cache_info()[:5] == (0, 0, 2, 0, 0)


def test_adaptive_and_copying_schemes_do_not_cache():
    for make in (ALL["gcc-auto"], ALL["replication"], ALL["parm"]):
        s = make()
        assert not s.caches_decoders
    s = gencc.GCC(K, N)
    ret = _returned(0)
    for _ in range(3):
        s.decode(_outputs(s, ret, 0), ret)
    assert s.decoder_cache_info().currsize == 0


def test_settings_are_not_parameters_and_travel():
    s = gencc.LeTCC(K, N).set_decoder_cache(5, max_bytes=10**6)
    assert "decoder_cache" not in repr(s) and set(s.get_params()) == set(gencc.LeTCC(K, N).get_params())
    t = s.with_params(lam_dec=1e-4)
    assert t.decoder_cache_info().maxsize == 5 and t.decoder_cache_info().max_bytes == 10**6
    ret = _returned(1)
    Y = _outputs(s, ret, 1)
    s.decode(Y, ret), s.decode(Y, ret)
    for u in (pickle.loads(pickle.dumps(s)), copy.deepcopy(s)):
        assert u.decoder_cache_info()[2:] == (5, 0, 0, 10**6)
        assert _rel(u.decode(Y, ret), s.decode(Y, ret)) <= 1e-10  # u decodes directly, s from its cache
    with pytest.raises(ValueError, match="maxsize"):
        s.set_decoder_cache(-1)


def test_decoder_matrix_is_cached_and_unchanged():
    for name in ("gcc-sobolev2", "bacc", "gcc-systematic"):
        make, tol = CACHEABLE[name]
        s, plain = make(), make().set_decoder_cache(0)
        ret = _returned(2)
        D = s.decoder_matrix(ret)
        assert s.decoder_cache_info().currsize == 1
        assert _rel(D, plain.decoder_matrix(ret)) <= 1e-12
        Y = _outputs(s, ret, 2)
        assert _rel(s.decode(Y, ret), D @ Y) <= 1e-12  # served from the entry decoder_matrix stored


def test_threads_share_the_cache():
    s = gencc.GCC(K, N, kernel="sobolev2").set_decoder_cache(3)
    plain = gencc.GCC(K, N, kernel="sobolev2").set_decoder_cache(0)
    sets = [_returned(seed) for seed in range(5)]
    Ys = [_outputs(s, r, seed) for seed, r in enumerate(sets)]
    refs = [plain.decode_with_info(y, r) for y, r in zip(Ys, sets)]
    errors = []

    def work(tid):
        order = np.random.default_rng(tid).integers(0, len(sets), 60)
        for i in order:
            got = s.decode_with_info(Ys[i], sets[i])
            if _rel(got.estimate, refs[i].estimate) > 1e-9 or abs(got.info["loo_mse"] / refs[i].info["loo_mse"] - 1) > 1e-9:
                errors.append((tid, i))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert s.decoder_cache_info().currsize <= 3


@pytest.mark.parametrize("name", sorted(ALL))
def test_decode_many_equals_per_batch_loop(name):
    s = ALL[name]()
    n_workers = s.n_workers
    ret = _returned(3, n_workers, stragglers=1 if name == "parm" else 5)
    B = 4
    Y = _outputs(s, ret, 3, batches=B).reshape(B, ret.size, M // 3, 3)  # out_shape (1, 3)
    loop = [s.decode_with_info(Y[b], ret) for b in range(B)]
    for _ in range(3):  # cold, built, cached
        many = s.decode_many(Y, ret)
        assert many.shape == (B, K, M // 3, 3)
        infos = s.decode_many_with_info(Y, ret)
        assert len(infos) == B
        for b in range(B):
            tol = 1e-9 if s.caches_decoders else 0.0  # adaptive / copying: the very same per-batch decode
            assert _rel(many[b], loop[b].estimate) <= tol
            assert _rel(infos[b].estimate, loop[b].estimate) <= tol
            _assert_info_close(infos[b].info, loop[b].info, max(tol, 1e-12))


def test_decode_many_shape_errors():
    s = gencc.BACC(K, N)
    ret = _returned(4)
    Y = _outputs(s, ret, 4)
    with pytest.raises(ValueError, match=r"shape \(B, 15, \.\.\.\).*one batch"):
        s.decode_many(Y, ret)
    with pytest.raises(ValueError, match=r"shape \(B, 15"):
        s.decode_many(np.zeros((2, 14, 3)), ret)
    with pytest.raises(ValueError, match="NaN"):
        s.decode_many(np.full((2, 15, 3), np.nan), ret)
    with pytest.raises(ValueError, match=r"X must have shape \(B, 6"):
        s.encode_many(np.zeros((6, 3)))


def test_bacc_leave_one_out_matches_loop():
    s = gencc.BACC(K, N)
    for seed in range(3):
        ret = _returned(seed)
        Y = _outputs(s, ret, seed)
        order = np.argsort(s.beta[ret])
        t, Ys = s.beta[ret][order], Y[order]
        n, sq = t.size, 0.0
        for i in range(n):  # the former per-node loop
            keep = np.arange(n) != i
            B = barycentric_matrix(t[keep], berrut_weights(n - 1), t[i : i + 1])
            sq += float(np.sum((B @ Ys[keep] - Ys[i]) ** 2))
        assert abs(s.decode_with_info(Y, ret).info["loo_mse"] / (sq / Ys.size) - 1) < 1e-12


ENCODERS = {
    "gcc": (lambda: gencc.GCC(K, N), 1e-10),
    "gcc-matern": (lambda: gencc.GCC(K, N, enc_kernel="matern32", enc_scale=0.5, lam_enc=1e-6), 1e-10),
    "letcc": (lambda: gencc.LeTCC(K, N), 1e-10),
    "gcc-systematic": (lambda: gencc.GCC(K, N, worker_points="systematic"), 1e-10),
    "bacc": (lambda: gencc.BACC(K, N), 1e-12),
    "lcc": (lambda: gencc.LCC(K, N), 1e-12),
    "replication": (lambda: gencc.Replication(K, N), 0.0),
    "uncoded": (lambda: gencc.Uncoded(K), 0.0),
}


@pytest.mark.parametrize("name", sorted(ENCODERS))
def test_matrix_free_encode_equals_matrix(name):
    make, tol = ENCODERS[name]
    dense, free = make(), make()
    free.encoder_matrix_bytes = 0
    X = np.random.default_rng(5).normal(size=(K, 2, 3))
    ref = dense.encoder_matrix() @ X.reshape(K, -1)
    got = free.encode(X)
    assert free._E is None  # no (N, K) matrix was formed
    n = dense.n_workers
    assert got.shape == (n, 2, 3) and _rel(got.reshape(n, -1), ref) <= tol
    if dense.systematic:
        np.testing.assert_array_equal(got[:K], X)
    Xb = np.random.default_rng(6).normal(size=(3, K, 2, 3))
    for s in (dense, free):
        many = s.encode_many(Xb)
        assert many.shape == (3, n, 2, 3)
        for b in range(3):
            assert _rel(many[b], dense.encode(Xb[b])) <= max(tol, 1e-14)


def test_blocked_paths_equal_whole_matrices(monkeypatch):
    """The matrix-free encode and BACC's direct decode form their maps in row blocks: tiny blocks agree."""
    import gencc.schemes.base as base

    makers = {"gcc": lambda: gencc.GCC(K, N, kernel="sobolev2"), "bacc": ENCODERS["bacc"][0],
              "lcc": ENCODERS["lcc"][0]}
    ret = _returned(7)
    X = np.random.default_rng(8).normal(size=(K, 4))
    refs = {}
    for name, make in makers.items():
        s = make().set_decoder_cache(0)
        Y = _outputs(s, ret, 7)
        refs[name] = (s.encoder_matrix() @ X, Y, s.decode_with_info(Y, ret))
    monkeypatch.setattr(base, "_BLOCK_ELEMENTS", 7)
    for name, (enc, Y, dec) in refs.items():
        s = makers[name]().set_decoder_cache(0)
        s.encoder_matrix_bytes = 0
        assert _rel(s.encode(X), enc) <= 1e-10
        got = s.decode_with_info(Y, ret)
        assert _rel(got.estimate, dec.estimate) <= 1e-12
        _assert_info_close(got.info, dec.info, 1e-12)
