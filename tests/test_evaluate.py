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
