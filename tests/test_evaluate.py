import numpy as np
import pytest

import gencc
from gencc import stragglers as st

X = np.random.default_rng(0).uniform(-2, 2, size=(200, 3))


def f(x):
    return x * np.sin(x)


def test_evaluate_reports_every_metric_with_intervals():
    ev = gencc.evaluate(f, gencc.BACC(4, 12), X, st.RandomStragglers(2), rounds=6, draws=2, seed=1)
    assert ev.draws == 12 and ev.failures == 0 and ev.returned_mean == 10
    for name in ("mse", "nmse", "rmse", "max_error"):
        m = ev.metrics[name]
        assert m.n == 12 and m.ci_low <= m.mean <= m.ci_high and m.std >= 0
    assert ev.metrics["max_error"].mean >= ev.metrics["rmse"].mean
    d = ev.to_dict()
    assert d["metrics"]["mse"]["n"] == 12 and "samples" not in d


def test_evaluate_is_reproducible_and_matches_a_manual_decode():
    s = gencc.GCC(4, 12)
    a = gencc.evaluate(f, s, X, st.RandomStragglers(3), rounds=3, seed=7)
    b = gencc.evaluate(f, s, X, st.RandomStragglers(3), rounds=3, seed=7)
    np.testing.assert_array_equal(a.samples["mse"], b.samples["mse"])
    rng = np.random.default_rng(7)
    batch = rng.choice(200, size=4, replace=False)
    ret = st.RandomStragglers(3).returned(12, rng)
    est = s.decode(f(s.encode(X[batch]))[ret], ret)
    assert a.samples["mse"][0] == pytest.approx(np.mean((est - f(X[batch])) ** 2))


def test_classification_accuracy():
    W = np.random.default_rng(1).normal(size=(3, 5))
    clf = lambda x: np.tanh(x @ W)
    ev = gencc.evaluate(clf, gencc.GCC(4, 16), X, st.RandomStragglers(2), rounds=5, task="classification")
    assert 0.5 < ev.mean("accuracy") <= 1.0


def test_replication_missing_inputs_are_counted():
    s = gencc.Replication(4, 8)
    ev = gencc.evaluate(f, s, X, st.RandomStragglers(5), rounds=20, task="classification")
    assert ev.missing_rate > 0
    assert ev.mean("mse") == 0.0  # what was answered is exact
    assert ev.mean("accuracy") == pytest.approx(1 - ev.missing_rate)
    emb = gencc.evaluate(f, s, X, st.RandomStragglers(5), rounds=20, task="embedding")
    assert emb.missing_rate > 0 and emb.mean("cosine") == pytest.approx(1 - emb.missing_rate)  # missing: 0


def test_failures_are_counted_not_hidden():
    s = gencc.LCC(4, 10, degree=2)
    ev = gencc.evaluate(f, s, X, st.RandomStragglers(4), rounds=3)
    assert ev.failures == 3 and ev.metrics["mse"] is None and np.isnan(ev.mean("mse"))


def test_adversary_is_at_least_as_bad_as_random():
    s = gencc.GCC(4, 16)
    worst = gencc.evaluate(f, s, X, st.ContiguousStragglers(3), rounds=4, seed=2).mean("mse")
    rand = gencc.evaluate(f, s, X, st.RandomStragglers(3), rounds=4, seed=2).mean("mse")
    assert worst >= rand


def test_evaluate_rejects_bad_f_and_args():
    with pytest.raises(ValueError, match=r"f must map \(4, \.\.\.\) inputs"):
        gencc.evaluate(lambda x: x[:2], gencc.BACC(4, 8), X, st.NoStragglers(), rounds=1)
    with pytest.raises(ValueError, match="f returned NaN or Inf"):
        gencc.evaluate(lambda x: np.log(x), gencc.BACC(4, 8), X, st.NoStragglers(), rounds=1)
    with pytest.raises(ValueError, match="task must be"):
        gencc.evaluate(f, gencc.BACC(4, 8), X, st.NoStragglers(), task="ranking")


def test_tune_picks_the_better_ridge():
    best, table = gencc.tune(f, gencc.LeTCC(4, 16), X, st.RandomStragglers(2), {"lam_dec": [1e-9, 1.0]}, rounds=3)
    assert best.lam_dec == 1e-9 and table[0][1] < table[1][1]


class _ZeroCode(gencc.CodingScheme):
    """Hand-made code: parities and decoded inputs are all zero."""

    def _encoder_matrix(self):
        return np.zeros((self.n_workers, self.n_inputs))

    def _decoder_matrix_sorted(self, idx, Y2):
        return np.zeros((self.n_inputs, idx.size))


class _Fixed(st.StragglerModel):
    def __init__(self, returned):
        self.ret = np.asarray(returned)

    def returned(self, n_workers, rng=None, error=None):
        return self.ret


def test_degraded_metrics_on_a_hand_made_example():
    pool = np.full((6, 1), 3.0)
    f2 = lambda x: np.concatenate([-x, x], axis=1)  # f(3) = (-3, 3): argmax 1; a zero estimate: argmax 0
    sys_code = _ZeroCode(2, 3, worker_points="systematic")
    ev = gencc.evaluate(f2, sys_code, pool, _Fixed([0, 2]), rounds=4, task="classification")
    # input 0 answered by its own worker (exact), input 1 decoded to (0, 0)
    assert ev.mean("exact_share") == 0.5 and ev.metrics["exact_share"].n == 4
    assert ev.mean("degraded_mse") == 9.0 and ev.mean("mse") == 4.5
    assert ev.mean("degraded_accuracy") == 0.0 and ev.mean("accuracy") == 0.5
    # all systematic workers back: nothing decoded, no degraded sample
    ev = gencc.evaluate(f2, sys_code, pool, st.NoStragglers(), rounds=3, task="classification")
    assert ev.mean("exact_share") == 1.0 and ev.metrics["degraded_mse"] is None
    assert ev.metrics["degraded_accuracy"] is None and ev.mean("mse") == 0.0 and ev.mean("accuracy") == 1.0
    # the same code, not systematic: every input counts as decoded
    plain = _ZeroCode(2, 3)
    ev = gencc.evaluate(f2, plain, pool, _Fixed([0, 2]), rounds=4, task="classification")
    assert ev.mean("exact_share") == 0.0 and ev.mean("degraded_mse") == ev.mean("mse") == 9.0
    assert ev.mean("degraded_accuracy") == ev.mean("accuracy") == 0.0


def test_degraded_metrics_of_systematic_gcc():
    s = gencc.GCC(4, 8, worker_points="systematic")
    ev = gencc.evaluate(f, s, X, st.RandomStragglers(3), rounds=30, seed=3)
    share = ev.samples["exact_share"]
    assert 0 < share.min() and share.max() == 1.0  # some draws lose systematic workers, some none
    # exact inputs carry no error: per draw, mse = degraded_mse x degraded share
    degraded = share < 1
    np.testing.assert_allclose(ev.samples["mse"][degraded], ev.samples["degraded_mse"] * (1 - share[degraded]))
    assert np.all(ev.samples["mse"][~degraded] == 0)
