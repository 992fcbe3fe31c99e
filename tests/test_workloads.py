import numpy as np
import pytest

import gencc
from gencc import workloads
from gencc.stragglers import RandomStragglers

pytest.importorskip("torch")


@pytest.mark.parametrize("name", ["lenet5", "convnet", "vit", "lenet5-mnist"])
def test_classifiers_load_offline_with_their_recorded_accuracy(name):
    w = workloads.get(name)
    assert len(w.X) == w.info["n_test"] and w.X.shape[1:] == ((1, 28, 28) if "mnist" in name else (1, 8, 8))
    pred = w.f(w.X).argmax(1)
    assert np.mean(pred == w.labels) == pytest.approx(w.info["test_accuracy"], abs=1e-9)
    assert w.info["test_accuracy"] > 0.9


def test_minilm_loads_offline_and_embeds():
    w = workloads.get("minilm")
    E = w.f(w.X[:3])
    assert E.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(E, axis=1), 1.0, atol=1e-6)


def test_gcc_keeps_most_predictions_of_a_trained_cnn():
    w = workloads.get("lenet5")
    ev = gencc.evaluate(w.f, gencc.GCC(4, 16), w.X, RandomStragglers(2), rounds=10, task="classification")
    assert ev.mean("accuracy") > 0.8


def test_unknown_workload():
    with pytest.raises(ValueError, match="workload must be one of"):
        workloads.get("resnet152")


def test_demo_runs_end_to_end(tmp_path):
    from gencc.cli import main

    assert main(["demo", "--out", str(tmp_path), "--batches", "2", "--extra", "1"]) == 0
    assert (tmp_path / "demo.png").stat().st_size > 0 and (tmp_path / "demo.json").exists()
    import json

    rows = {r["scheme"]: r for r in json.loads((tmp_path / "demo.json").read_text())["rows"]}
    assert set(rows) == {"uncoded", "replication", "gcc-systematic", "gcc", "bacc", "letcc", "parm"}
    assert rows["uncoded"]["exact_share"] == 1 and rows["gcc"]["exact_share"] == 0
    assert rows["letcc"]["params"].startswith("lam_dec=")
    assert all(0 <= r["agreement_with_f"] <= 1 and r["p99_s"] > 0 for r in rows.values())
