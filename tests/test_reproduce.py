"""`gencc reproduce` end to end in a test-sized configuration, and resuming."""

import csv
import json

import numpy as np
import pytest

from gencc.cli import main
from gencc.experiments.reproduce import SWEEPS, ReproduceConfig, fit_slope, run_reproduce

TINY_GRID = (("lam_dec", (1e-8, 1e-2)), ("lam_enc", (0.0, 1e-4)))
TINY = ReproduceConfig(
    schemes=("gcc", "letcc", "bacc", "lcc", "replication"), lcc_degree=3, letcc_grid=TINY_GRID,
    rate_Ns=(16, 24, 32), rate_S=1, stragglers_N=8,
    stragglers_K=2, stragglers_Ss=(0, 4), bernoulli_ps=(0.2,), bernoulli_Ns=(16, 24, 32),
    dnn_models=("lenet5", "minilm"), dnn_settings=((8, 2, 2), (8, 2, 6)), rounds=3, worst_rounds=1, dnn_rounds=3,
    degraded_models=("lenet5", "minilm"), degraded_Ks=(2,), degraded_Rs=(1, 2), degraded_Ss=(0, 1, "N-K"),
    degraded_rounds=4,
    byzantine_models=("xsinx", "lenet5"), byzantine_settings=((16, 4, 1),), byzantine_As=(0, 2),
    byzantine_attacks=("scale", "colluding"), byzantine_rounds=3, byzantine_rate_Ns=(16, 24, 32),
)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("reproduce")
    lines = []
    results = run_reproduce(out, config=TINY, progress=False, echo=lines.append)
    return out, results, lines


def test_every_sweep_writes_csv_json_and_png_that_parse(run):
    out, results, lines = run
    assert list(results) == list(SWEEPS)
    for sweep in SWEEPS:
        data = json.loads((out / sweep / f"{sweep}.json").read_text())
        with open(out / sweep / f"{sweep}.csv", newline="") as fh:
            table = list(csv.DictReader(fh))
        assert data["rows"] and len(table) == len(data["rows"])
        assert data["settings"]["rounds"] == TINY.rounds
        assert (out / sweep / f"{sweep}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"== {sweep} ==" in "\n".join(lines)
    summary = json.loads((out / "reproduce.json").read_text())
    assert set(summary["slopes"]) == {"rate", "bernoulli", "byzantine"}
    with open(out / "dnn" / "dnn.csv", newline="") as fh:
        assert "params" in next(csv.reader(fh))


def test_letcc_rows_carry_their_ridges_chosen_from_the_grid(run):
    _, results, lines = run
    grid = dict(TINY_GRID)
    n = 0
    for sweep, res in results.items():
        for r in res["rows"]:
            if r["scheme"] in ("gcc-cal", "gcc-oracle"):
                assert r["params"].startswith("kernel=") and "lam_dec=" in r["params"]
                continue
            if r["scheme"] not in ("letcc", "letcc-sys"):
                assert r["params"] is None
                continue
            chosen = dict(kv.split("=") for kv in r["params"].split(", "))
            assert list(chosen) == list(grid)
            assert all(float(v) in grid[k] for k, v in chosen.items()), r["params"]
            n += 1
    assert n >= 20
    assert "lam_dec=" in "\n".join(lines)  # the console tables show them


def test_dnn_oracle_is_the_best_fixed_decoder_on_the_same_batches(run):
    out, results, lines = run
    rows = results["dnn"]["rows"]
    ratios = results["dnn"]["ratios"]
    assert len(ratios) == 4  # 2 models x 2 settings
    for setting in ratios:
        same = [r for r in rows if all(r[k] == setting[k] for k in ("workload", "N", "K", "S"))]
        mse = {r["scheme"]: r["mse"] for r in same}
        # gcc-cal runs one configuration of the grid the oracle minimised over, on the same batches
        assert mse["gcc-oracle"] <= mse["gcc-cal"] * (1 + 1e-9)
        assert setting["gcc/gcc-oracle"] == pytest.approx(mse["gcc"] / mse["gcc-oracle"])
        assert setting["gcc/bacc"] == pytest.approx(mse["gcc"] / mse["bacc"])
    assert "MSE ratios" in "\n".join(lines)
    assert (out / "dnn" / "ratios.csv").exists()


def test_degraded_sweep_reports_exact_share_and_degraded_metrics(run):
    import gencc

    _, results, _ = run
    rows = results["degraded"]["rows"]
    schemes = {"gcc-sys", "letcc-sys", "bacc-sys", "bacc", "replication"}
    schemes |= {"parm"} if hasattr(gencc, "ParM") else set()
    assert {r["scheme"] for r in rows} == schemes
    assert {(r["K"], r["N-K"], r["S"]) for r in rows} == {(2, 1, 0), (2, 1, 1), (2, 2, 0), (2, 2, 1), (2, 2, 2)}
    assert all(0 <= r["exact_share"] <= 1 for r in rows)
    for r in rows:
        if r["scheme"].endswith("-sys") and r["S"] == 0:
            assert r["exact_share"] == 1 and r["degraded_mse"] is None  # nothing to decode
        if r["scheme"] == "bacc":
            assert r["exact_share"] == 0 and r["degraded_mse"] == pytest.approx(r["mse"])
    lenet = [r for r in rows if r["workload"] == "lenet5" and r["scheme"] == "gcc-sys" and r["S"] == r["N-K"] > 0]
    assert lenet and all(r["degraded_accuracy"] is not None and 0 <= r["degraded_accuracy"] <= 1 for r in lenet)
    assert all(r["exact_share"] < 1 for r in lenet)
    assert all(r["cosine"] is not None for r in rows if r["workload"] == "minilm")


def test_byzantine_sweep_compares_every_method_on_the_same_draws(run):
    out, results, lines = run
    res = results["byzantine"]
    rows = res["rows"]
    methods = {"gcc", "gcc-robust", "bacc", "letcc", "approxifer", "oracle"}
    grid = [r for r in rows if (r["N"], r["K"], r["S"]) == (16, 4, 1)]
    assert {(r["workload"], r["A"], r["attack"]) for r in grid} == {
        (w, A, a) for w in ("xsinx", "lenet5") for A, a in ((0, "none"), (2, "scale"), (2, "colluding"))}
    for key in {(r["workload"], r["A"], r["attack"]) for r in grid}:
        same = {r["scheme"]: r for r in grid if (r["workload"], r["A"], r["attack"]) == key}
        assert set(same) == methods
        if key[1] == 0:
            assert same["gcc"]["mse/clean"] == pytest.approx(1.0) and same["oracle"]["mse"] == same["gcc"]["mse"]
            assert same["approxifer"]["mse"] == pytest.approx(same["bacc"]["mse"], rel=1e-9)  # A = 0: Berrut
            continue
        # one adversary-free reference per setting: every method's clean decode saw the same draws
        assert same["gcc"]["clean_mse"] == same["oracle"]["clean_mse"]
        assert same["gcc-robust"]["flag_recall"] is not None and same["gcc"].get("flag_recall") is None
        assert same["approxifer"]["flag_recall"] is not None
        if key[2] == "scale":  # outputs x 10: dropping the liars is far better than decoding them
            assert same["oracle"]["mse"] < 0.1 * same["gcc"]["mse"]
            assert same["gcc-robust"]["flag_recall"] >= 0.5
    assert all(r["accuracy"] is not None for r in grid if r["workload"] == "lenet5")
    assert {r["A"] for r in rows if r["N"] in (16, 24, 32) and r["K"] == 4 and r["S"] == 2} == {4, 5, 6}  # round(N^.5)
    slopes = {(s["attack"], s["scheme"]): s["slope"] for s in res["slopes"]}
    assert set(slopes) == {(a, m) for a in ("scale", "colluding") for m in ("gcc", "gcc-robust", "oracle")} | {
        ("none", "gcc, no liars")}
    assert all(np.isfinite(v) for v in slopes.values())
    assert {t["A"] for t in res["targets"]} == {1} or not res["targets"]  # A <= N/10 only
    assert len(res["summary"]) == 4 and all("robust recall" in r for r in res["summary"])
    text = "\n".join(lines)
    assert "robust GCC's flag precision and recall" in text and "fitted log-log slopes of MSE against N, xsinx" in text
    for name in ("summary.csv", "targets.csv", "slopes.csv"):
        assert (out / "byzantine" / name).exists()


def test_byzantine_methods_are_one_line_each():
    from gencc.experiments.reproduce.cells import BYZANTINE_METHODS

    assert ReproduceConfig().byzantine_methods == tuple(BYZANTINE_METHODS)
    for name, build in BYZANTINE_METHODS.items():
        s = build(4, 16, 2)
        assert (s.n_inputs, s.n_workers) == (4, 16), name
    assert BYZANTINE_METHODS["gcc-robust"](4, 16, 2).robust and not BYZANTINE_METHODS["oracle"](4, 16, 2).robust


def test_degraded_scheme_names_build():
    from gencc.experiments.reproduce.cells import build_scheme, scheme_applies

    for name in ("gcc-sys", "letcc-sys", "bacc-sys"):
        s = build_scheme(name, 4, 6, "lenet5")
        assert s.systematic and (s.n_inputs, s.n_workers) == (4, 6)
    assert not build_scheme("bacc", 4, 6, "lenet5").systematic
    import gencc

    assert not scheme_applies("parm", 4, 6)
    assert scheme_applies("parm", 4, 5) == hasattr(gencc, "ParM")


def test_best_letcc_picks_from_the_grid_on_calibration_batches():
    from gencc import stragglers as st
    from gencc.experiments.peers import best_letcc

    X = np.random.default_rng(0).uniform(-1, 1, (60, 2))
    grid = (("lam_dec", (1e-8, 1e-2)), ("lam_enc", (0.0,)))
    scheme, label = best_letcc(np.sin, 4, 12, X, st.RandomStragglers(2), grid, rounds=2, seed=5)
    assert scheme.lam_dec in (1e-8, 1e-2) and scheme.lam_enc == 0.0
    assert label == f"lam_dec={scheme.lam_dec:g}, lam_enc=0"


def test_rows_hold_what_each_sweep_promises(run):
    _, results, _ = run
    rate = results["rate"]["rows"]
    assert {r["stragglers"] for r in rate} == {"random", "worst"}
    assert {r["N"] for r in rate} == set(TINY.rate_Ns)
    gcc_slopes = [s["slope"] for s in results["rate"]["slopes"] if s["scheme"] == "gcc"]
    assert len(gcc_slopes) == 2 and all(np.isfinite(gcc_slopes)) and max(gcc_slopes) < 0
    assert all(r["mse"] == 0 for r in rate if r["scheme"] == "replication")
    strag = results["stragglers"]["rows"]
    assert all(r["accuracy"] is not None and 0 <= r["accuracy"] <= 1 for r in strag)
    assert {r["p"] for r in results["bernoulli"]["rows"]} == set(TINY.bernoulli_ps)
    dnn = results["dnn"]["rows"]
    lenet = [r for r in dnn if r["workload"] == "lenet5"]
    minilm = [r for r in dnn if r["workload"] == "minilm"]
    assert lenet and all(r["accuracy"] is not None and r["rmse_std"] is not None for r in lenet)
    assert minilm and all(0.5 < r["cosine"] <= 1 + 1e-9 for r in minilm)
    assert {(r["N"], r["K"], r["S"]) for r in lenet} == set(TINY.dnn_settings)
    # LCC of degree 3 with K=2 needs 4 returns: with N - S = 2 it is left out, not faked
    assert {r["S"] for r in lenet if r["scheme"] == "lcc"} == {2}


def test_worst_case_adversary_leaves_replication_inputs_unanswered(run):
    _, results, _ = run
    # N=8, K=2: 4 copies of each input; 4 adversarial stragglers erase one input entirely
    rows = results["stragglers"]["rows"]
    worst = [r for r in rows if r["scheme"] == "replication" and r["stragglers"] == "worst"]
    assert {r["S"]: r["missing_rate"] for r in worst} == {0: 0.0, 4: 0.5}
    assert next(r for r in worst if r["S"] == 4)["accuracy"] <= 0.5


def test_greedy_adversary_erases_as_many_replicated_inputs_as_it_can():
    import gencc
    from gencc import stragglers as st

    X = np.random.default_rng(0).normal(size=(50, 3))
    for S, lost in [(3, 0.0), (4, 0.25), (8, 0.5), (12, 0.75)]:  # N=16, K=4: 4 copies each
        ev = gencc.evaluate(np.tanh, gencc.Replication(4, 16), X, st.WorstCaseStragglers(S), rounds=2)
        assert ev.missing_rate == lost, (S, ev.missing_rate)


def test_rerun_resumes_without_recomputing_and_survives_a_cut_line(run, tmp_path):
    out, results, _ = run
    cells = out / "rate" / "cells.jsonl"
    n = len(cells.read_text().splitlines())
    with cells.open("a") as fh:
        fh.write('{"key": "cut sho')  # an interrupted write
    lines = []
    again = run_reproduce(out, sweeps=["rate"], config=TINY, progress=False, echo=lines.append)
    total = len(TINY.rate_Ns) * 2 * len(TINY.schemes)
    assert f"resuming: {total} of {total} cells" in lines[0]
    assert again["rate"]["rows"] == results["rate"]["rows"]
    summary = json.loads((out / "reproduce.json").read_text())  # one sweep re-run keeps the others' summary
    assert summary["sweeps"] == list(SWEEPS) and set(summary["slopes"]) == {"rate", "bernoulli", "byzantine"}
    # a changed setting is new work, and stale cells do not leak into its tables
    lines = []
    other = run_reproduce(out, sweeps=["rate"], config=ReproduceConfig(**{**TINY.to_dict(), "rate_Ns": (16, 20, 24)}),
                          progress=False, echo=lines.append)
    assert {r["N"] for r in other["rate"]["rows"]} == {16, 20, 24}
    assert json.loads((out / "reproduce.json").read_text())["sweeps"] == ["rate"]  # other settings: fresh summary
    assert len(cells.read_text().splitlines()) > n


def test_fit_slope_recovers_a_power_law_and_ignores_bad_points():
    N = np.array([10, 20, 40, 80, 160.0])
    assert fit_slope(N, 3 * N**-3.0) == pytest.approx(-3.0)
    assert fit_slope(N, np.r_[3 * N[:3] ** -2.0, 0.0, np.nan]) == pytest.approx(-2.0)
    assert np.isnan(fit_slope(N[:2], N[:2]))


def test_cli_rejects_unknown_sweep(capsys):
    with pytest.raises(SystemExit):
        main(["reproduce", "--sweeps", "rate,nope"])
    assert "sweeps must be a comma list" in capsys.readouterr().err


def test_quick_config_is_small_but_covers_every_sweep():
    from gencc.experiments.reproduce import _cells

    quick, full = ReproduceConfig.quick(), ReproduceConfig()
    for sweep in SWEEPS:
        assert 0 < len(_cells(quick, sweep)) <= len(_cells(full, sweep))
    assert any(2 * S >= N for N, _, S in full.dnn_settings)  # many stragglers: S up to N/2
