"""Print the README's result tables (markdown) from the committed result files.

    python scripts/readme_tables.py                 # reads results/reproduce and results/bench_latency

So the numbers in README.md are copied from files anyone can regenerate with
``gencc reproduce --out results/reproduce`` and ``python benchmarks/bench_latency.py``.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def fmt(x, spec=".3g"):
    return "-" if x is None else format(x, spec)


def slopes(reproduce):
    summary = json.loads((reproduce / "reproduce.json").read_text())
    rows = []
    for sweep, label in (("rate", "stragglers"), ("bernoulli", "p")):
        by = defaultdict(dict)
        for s in summary["slopes"].get(sweep, []):
            by[f"{sweep}: {label} = {s[label]}"][s["scheme"]] = s["slope"]
        rows += [[k] + [fmt(v.get(sc), ".2f") for sc in ("gcc", "letcc", "bacc", "lcc")] for k, v in by.items()]
    return table(["sweep", "GCC", "LeTCC", "BACC", "LCC"], rows)


def dnn(reproduce):
    data = json.loads((reproduce / "dnn" / "dnn.json").read_text())
    by = defaultdict(dict)
    for r in data["rows"]:
        by[(r["workload"], r["N"], r["K"], r["S"])][r["scheme"]] = r
    schemes = ("gcc", "letcc", "bacc", "lcc", "replication")
    rows = []
    for (w, N, K, S), v in by.items():
        metric = "cosine" if v["gcc"].get("cosine") is not None else "accuracy"
        err = [fmt(v[s]["rmse"], ".3f") if s in v else "-" for s in schemes[:4]]
        best = min((s for s in schemes[:4] if s in v), key=lambda s: v[s]["rmse"])
        err = [f"**{e}**" if s == best else e for s, e in zip(schemes[:4], err)]
        acc = [fmt(v[s].get(metric), ".3f") if s in v else "-" for s in schemes]
        rows.append([w, N, K, S, *err, metric, *acc, fmt(v["replication"]["missing_rate"], ".3f"),
                     v.get("letcc", {}).get("params") or "-"])
    head = ["model", "N", "K", "S", "RMSE GCC", "LeTCC", "BACC", "LCC", "metric", "GCC", "LeTCC", "BACC", "LCC",
            "replication", "replication missing", "LeTCC ridges"]
    if all(r[-1] == "-" for r in rows):  # results from before LeTCC was tuned per cell
        head, rows = head[:-1], [r[:-1] for r in rows]
    return table(head, rows) + oracle(by)


def oracle(by):
    """GCC's default and calibrated decoders against the best fixed decoder in hindsight."""
    rows = []
    for (w, N, K, S), v in by.items():
        if "gcc-oracle" not in v:
            continue
        o = v["gcc-oracle"]["mse"]
        ratio = [fmt(v[s]["mse"] / o, ".2f") if s in v and o else "-" for s in ("gcc", "gcc-cal")]
        peers = [fmt(v["gcc"]["mse"] / v[s]["mse"], ".2f") if s in v and v[s]["mse"] else "-"
                 for s in ("letcc", "bacc")]
        rows.append([w, N, K, S, fmt(o, ".3g"), v["gcc-oracle"]["params"], *ratio, *peers])
    if not rows:
        return ""
    head = ["model", "N", "K", "S", "oracle MSE", "oracle config", "GCC default / oracle", "GCC calibrated / oracle",
            "GCC / LeTCC best", "GCC / BACC"]
    return "\n\n## dnn: GCC against the best fixed GCC decoder in hindsight (MSE ratios)\n\n" + table(head, rows)


def latency(bench):
    data = json.loads((bench / "bench_latency.json").read_text())
    rows = [[r["run"], r["workers"], r["wait_for"], fmt(r["p50_s"] * 1e3, ".1f"), fmt(r["p99_s"] * 1e3, ".1f"),
             fmt(r["p999_s"] * 1e3, ".1f"), fmt(r["p50_ratio"], ".2f"), fmt(r["p99_ratio"], ".2f"),
             fmt(r["p999_ratio"], ".2f"), fmt(r["agreement"], ".3f"), fmt(r["rel_mse"], ".2g"),
             fmt(r["encode_ms"], ".2f"), fmt(r["decode_ms"], ".2f")] for r in data["rows"]]
    head = ["run", "workers", "wait for", "p50 ms", "p99 ms", "p99.9 ms", "p50 ratio", "p99 ratio", "p99.9 ratio",
            "argmax agreement", "rel. MSE", "encode ms", "decode ms"]
    o = data["overhead"]
    return table(head, rows) + (f"\n\nOverhead, no stragglers: f called directly {o['direct_f_ms_per_batch']:.2f} ms "
                                f"per batch, GCC `map` on the workers {o['gcc_map_ms_per_batch']:.2f} ms "
                                f"(ratio {o['ratio']:.1f}).")


def main(argv):
    reproduce = Path(argv[0]) if argv else ROOT / "results" / "reproduce"
    bench = Path(argv[1]) if len(argv) > 1 else ROOT / "results" / "bench_latency"
    print("## slopes\n\n" + slopes(reproduce) + "\n\n## dnn\n\n" + dnn(reproduce))
    if (bench / "bench_latency.json").exists():
        print("\n## latency\n\n" + latency(bench))


if __name__ == "__main__":
    main(sys.argv[1:])
