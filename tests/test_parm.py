import numpy as np
import pytest

import gencc
from gencc import stragglers as st
from gencc.evaluate import apply_workers

rng = np.random.default_rng(0)
W = rng.normal(size=(6, 4))


def linear(x):
    return np.asarray(x).reshape(len(x), -1) @ W


def test_encoder_is_systematic_plus_one_sum():
    s = gencc.ParM(n_inputs=4)
    assert s.n_workers == 5 and s.parity_worker == 4 and s.systematic
    X = rng.normal(size=(4, 2, 3))
    C = s.encode(X)
    np.testing.assert_array_equal(C[:4], X)
    np.testing.assert_allclose(C[4], X.sum(0))


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_exact_for_linear_f_with_any_one_straggler(k):
    s = gencc.ParM(k)
    X = rng.normal(size=(k, 6))
    Y = linear(s.encode(X))
    for gone in range(k + 1):
        ret = [n for n in range(k + 1) if n != gone][::-1]  # any order
        dec = s.decode_with_info(Y[ret], ret)
        np.testing.assert_allclose(dec.estimate, linear(X), atol=1e-12)
        expect = np.arange(k) != gone
        np.testing.assert_array_equal(dec.info["exact"], expect)
        assert dec.info["reconstructed"] == (gone if gone < k else None)
        np.testing.assert_allclose(dec.estimate, s.decoder_matrix(ret) @ Y[ret], atol=1e-12)


def test_systematic_outputs_are_copied_bit_for_bit():
    s = gencc.ParM(3, parity_model=lambda x: np.zeros((len(x), 4)))
    X = rng.normal(size=(3, 6))
    Y = np.concatenate([np.tanh(X), np.zeros((1, 6))])
    dec = s.decode_with_info(Y, range(4))
    assert np.array_equal(dec.estimate, np.tanh(X)) and dec.info["exact"].all()
    dec = s.decode_with_info(Y[:3], range(3))
    assert np.array_equal(dec.estimate, np.tanh(X)) and dec.info["error_estimate"] == 0.0


def test_one_missing_is_rebuilt_by_subtraction():
    fp = lambda x: 2.0 * x  # noqa: E731  a parity model that is not f
    s = gencc.ParM(3, parity_model=fp)
    X = rng.normal(size=(3, 5))
    Y = np.concatenate([np.sin(X), fp(X.sum(0, keepdims=True))])
    est = s.decode(Y[[0, 2, 3]], [0, 2, 3])
    np.testing.assert_array_equal(est[[0, 2]], np.sin(X[[0, 2]]))
    np.testing.assert_allclose(est[1], 2 * X.sum(0) - np.sin(X[0]) - np.sin(X[2]))


@pytest.mark.parametrize("ret, missing", [([0, 3], [1, 2]), ([3], [0, 1, 2]), ([0, 1], [2]), ([1], [0, 2])])
def test_unanswerable_inputs_raise_with_partial_outputs(ret, missing):
    s = gencc.ParM(3)
    X = rng.normal(size=(3, 6))
    Y = linear(s.encode(X))
    assert s.can_decode(ret)
    with pytest.raises(gencc.MissingOutputsError) as exc:
        s.decode(Y[ret], ret)
    np.testing.assert_array_equal(exc.value.missing, missing)
    P = exc.value.partial
    assert np.isnan(P[missing]).all()
    ok = np.setdiff1d(np.arange(3), missing)
    np.testing.assert_allclose(P[ok], linear(X)[ok])
    np.testing.assert_array_equal(s.available(ret), ~np.isin(np.arange(3), missing))


def test_capacity_semantics():
    s = gencc.ParM(3)
    assert s.trusted_returns == 1 and s.min_returns == 1
    assert s.can_decode([3]) and not s.can_decode([])
    assert s.is_complete([0, 1, 2]) and s.is_complete([0, 2, 3]) and s.is_complete([3, 2, 1, 0])
    assert not s.is_complete([0, 3]) and not s.is_complete([1])


def test_bad_arguments():
    with pytest.raises(ValueError, match="n_inputs"):
        gencc.ParM(0)
    with pytest.raises(TypeError, match="n_inputs"):
        gencc.ParM(2.5)
    with pytest.raises(TypeError, match="parity_model must be a callable"):
        gencc.ParM(2, parity_model="lenet5")
    s = gencc.ParM(2)
    with pytest.raises(ValueError, match="n must index a worker"):
        s.worker_function(3, np.sin)
    with pytest.raises(ValueError, match="returned"):
        s.decode(np.zeros((1, 2)), [5])
    with pytest.raises(ValueError, match="Y must have 2 rows"):
        s.decode(np.zeros((3, 2)), [0, 1])


def test_params_and_repr():
    s = gencc.ParM(2)
    assert s.get_params() == {"n_inputs": 2, "parity_model": None}
    assert s.with_params(n_inputs=4).n_workers == 5
    assert repr(s) == "ParM(n_inputs=2, parity_model=None)"


def test_worker_function_hook():
    fp = lambda x: x  # noqa: E731
    s = gencc.ParM(2, parity_model=fp)
    assert s.worker_function(0, np.sin) is np.sin and s.worker_function(2, np.sin) is fp
    assert gencc.ParM(2).worker_function(2, np.sin) is np.sin
    assert gencc.GCC(2, 4).worker_function(3, np.sin) is np.sin
    X = rng.normal(size=(2, 3))
    Y = apply_workers(np.sin, s, s.encode(X))
    np.testing.assert_array_equal(Y, np.concatenate([np.sin(X), X.sum(0, keepdims=True)]))


def test_evaluate_runs_the_parity_model_on_the_parity_worker():
    X = rng.normal(size=(50, 6))
    calls = []

    def fp(x):
        calls.append(len(x))
        return linear(x) + 1.0  # off by one everywhere

    strag = st.RandomStragglers(1)
    exact = gencc.evaluate(linear, gencc.ParM(3), X, strag, rounds=8, seed=0)
    off = gencc.evaluate(linear, gencc.ParM(3, parity_model=fp), X, strag, rounds=8, seed=0)
    assert calls == [1] * 8  # once per batch, on the parity row only
    assert exact.mean("mse") < 1e-20 and exact.failures == 0 and exact.missing_rate == 0
    # the draws that lost a systematic worker rebuild it with an error of exactly 1 per output
    deg = off.samples["degraded_mse"]
    assert deg.size > 0 and np.allclose(deg, 1.0)
    np.testing.assert_allclose(off.samples["exact_share"], exact.samples["exact_share"])


def test_evaluate_counts_inputs_lost_to_two_stragglers():
    X = rng.normal(size=(50, 6))
    ev = gencc.evaluate(linear, gencc.ParM(3), X, st.RandomStragglers(2), rounds=10, seed=0)
    assert ev.failures == 0 and 1 / 3 <= ev.missing_rate <= 2 / 3  # one or two of 3 lost per draw


# -- committed parity models ---------------------------------------------------
PARITY = [(name, k) for name in ("lenet5", "convnet") for k in (2, 3, 4)]


@pytest.mark.parametrize("name, k", PARITY)
def test_parity_checkpoints_reproduce_their_degraded_accuracy(name, k):
    pytest.importorskip("torch")
    import json

    from gencc import workloads
    from gencc.workloads import parity

    path = parity.checkpoint_path(name, k)
    assert path.stat().st_size < 1_000_000
    record = json.loads(parity.checkpoint_path(name, k, ".json").read_text())
    w = workloads.get(name)
    fp = parity.parity_model(name, k)
    assert repr(fp) == f"parity_model({name!r}, k={k})"
    Y = fp(w.X[:3])
    assert Y.shape == (3, 10) and Y.dtype == np.float64
    got = parity.degraded_agreement(w.f, fp, w.X, k, n_tuples=parity.CHECK_TUPLES)
    assert got["agreement"] == pytest.approx(record["check_agreement"], abs=0.01)  # same tuples
    assert got["agreement"] == pytest.approx(record["degraded_agreement"], abs=0.08)  # a sample of them
    # training is what makes the parity useful: f on the sum is far worse
    assert record["degraded_agreement"] > record["baseline_agreement"] + 0.2


def test_parm_for_workload_in_the_harness():
    pytest.importorskip("torch")
    from gencc import workloads

    w = workloads.get("lenet5")
    from gencc.workloads.parity import parm_for_workload

    s = parm_for_workload("lenet5", 2)
    assert s.n_workers == 3 and repr(s) == "ParM(n_inputs=2, parity_model=parity_model('lenet5', k=2))"
    trained = gencc.evaluate(w.f, s, w.X, st.RandomStragglers(1), rounds=60, seed=0, task="classification")
    plain = gencc.evaluate(w.f, gencc.ParM(2), w.X, st.RandomStragglers(1), rounds=60, seed=0,
                           task="classification")
    assert trained.failures == 0 and trained.missing_rate == 0
    assert trained.mean("degraded_accuracy") > plain.mean("degraded_accuracy") + 0.1


def test_parity_model_bad_arguments():
    pytest.importorskip("torch")
    from gencc.workloads.parity import parity_model

    with pytest.raises(ValueError, match="name must be a base model with parity models"):
        parity_model("vit", 2)
    with pytest.raises(ValueError, match="k must be one of"):
        parity_model("lenet5", 7)
