"""The selector bench: settings drawn from a seed, every decoder on the same draws."""

import json

import numpy as np

from gencc.cli import main
from gencc.experiments.selector_bench import DECODERS, Setting, draw_setting, score_setting, summarize
from gencc.stragglers import BlockStragglers, RandomStragglers


def test_a_seed_draws_the_same_settings_and_another_seed_others():
    a = [draw_setting(np.random.default_rng(7), i).describe() for i in range(1)]
    b = [draw_setting(np.random.default_rng(7), i).describe() for i in range(1)]
    c = [draw_setting(np.random.default_rng(8), i).describe() for i in range(1)]
    assert a == b and a != c
    rng = np.random.default_rng(11)
    for i in range(30):
        s = draw_setting(rng, i, max_workers=64)
        assert 2 <= s.K < s.N <= 64 and s.pattern in s.describe()["pattern"]
        if s.pattern in ("random", "block", "blocks", "worst-block", "latency"):
            assert getattr(s.stragglers, "n_stragglers", getattr(s.stragglers, "wait_for", None)) is not None


def test_every_drawn_pattern_leaves_k_workers_even_with_little_room():
    # several blocks that cannot fit apart once fell back to one block of S > N - K, and the
    # bench redrew forever
    from gencc.experiments.selector_bench import PATTERNS, _pattern

    rng = np.random.default_rng(2)
    for K, N in ((4, 5), (4, 6), (6, 8), (20, 23), (3, 12)):
        for pattern in PATTERNS:
            for _ in range(20):
                model = _pattern(rng, pattern, K, N)
                if pattern not in ("bernoulli", "worst-block"):
                    assert model.returned(N, rng).size >= K, (K, N, model)


def _setting(stragglers):
    X = np.random.default_rng(0).uniform(-2, 2, size=(64, 3))
    return Setting("x sin x", "closed-form", lambda X: X * np.sin(X), X, 4, 12, "random", stragglers)


def test_scores_are_on_common_draws_and_the_oracle_bounds_every_grid_decoder():
    r1 = score_setting(_setting(RandomStragglers(3)), rounds=3, seed=5)
    r2 = score_setting(_setting(RandomStragglers(3)), rounds=3, seed=5)
    assert r1["mse"] == r2["mse"]
    assert set(r1["ratio"]) == set(DECODERS)
    assert r1["ratio"]["gcc-spline"] >= 1.0 - 1e-12  # a member of the grid cannot beat the grid's best
    assert r1["oracle_mse"] > 0 and np.isfinite(list(r1["mse"].values())).all()
    # each decoder's MSE over the oracle's, exactly
    for d in DECODERS:
        np.testing.assert_allclose(r1["ratio"][d], r1["mse"][d] / r1["oracle_mse"])
    blocks = score_setting(_setting(BlockStragglers(4, 2)), rounds=2, seed=5)
    assert blocks["ratio"]["gcc-spline"] >= 1.0 - 1e-12


def test_summary_names_the_worst_setting_and_counts_the_shares():
    rows = [{"setting": {"name": f"s{i}", "pattern": "random"}, "mse": {d: 1.0 + i for d in DECODERS},
             "ratio": {d: 1.0 + i for d in DECODERS}} for i in range(4)]
    s = {r["decoder"]: r for r in summarize(rows)}
    assert s["gcc"]["max"] == 4.0 and s["gcc"]["worst"] == "s3 [random]" and s["gcc"]["within_2x"] == 0.5
    vs = {r["decoder"]: r for r in summarize(rows, against="letcc")}
    assert "letcc" not in vs and vs["gcc"]["median"] == 1.0


def test_the_cli_prints_its_seed_and_writes_stamped_results(tmp_path, capsys):
    assert main(["bench", "selector", "--settings", "2", "--rounds", "1", "--max-workers", "24", "--seed", "3",
                 "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "seed 3" in err
    res = json.loads((tmp_path / "selector.json").read_text())
    assert res["seed"] == 3 and len(res["rows"]) == 2 and res["provenance"]["gencc"]
    assert (tmp_path / "selector.png").stat().st_size > 0 and (tmp_path / "selector.csv").exists()
