"""One table from several ``bench_load.py`` runs of the same grid on different seeds.

    python benchmarks/load_seeds.py results/bench_load_serving/seed1 results/bench_load_serving/seed2 ... \\
        --out results/bench_load_serving/seeds

p99.9 over 2000 requests is the second-slowest answer, so one run's figure
moves with a single unlucky batch (the same setting gave 141 and 193 ms on two
seeds). This prints, for each scheme and setting, p50 and p99.9 per seed with
their medians, the median ratio to the clean p50 and to hedged requests' best
setting of the same seed, and the answer quality (means over seeds), that of the
decoded answers on their own too; and writes it as CSV and JSON.
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np

from gencc.report import format_table, write_csv, write_json


def setting(row) -> str:
    params = row.get("params")
    if isinstance(params, dict):
        return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in sorted(params.items()))
    return "" if params is None else str(params)


def decoded_agreement(row) -> float:
    """Agreement with f's argmax among a run's answers that are not exact, from its shares (runs
    written before ``decoded_agreement`` was a column): an exact answer is f's own output, so it
    agrees, and the rest of the agreement is the decoded answers'."""
    exact, agree = row.get("exact", np.nan), row.get("agreement", np.nan)
    if not np.isfinite(exact) or not np.isfinite(agree) or exact >= 1.0:
        return float("nan")
    return (agree - exact) / (1.0 - exact)


def _nanmean(values) -> float:
    values = np.asarray(values, dtype=np.float64)
    return float(np.nanmean(values)) if np.isfinite(values).any() else float("nan")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="folders holding a load.json of bench_load.py")
    ap.add_argument("--out", default=None, help="write <out>.csv and <out>.json")
    args = ap.parse_args(argv)
    cells: dict = {}
    seeds = []
    for folder in args.runs:
        with open(os.path.join(folder, "load.json")) as fh:
            doc = json.load(fh)
        seed = doc["settings"]["seed"]
        seeds.append(seed)
        rows = doc["rows"]
        clean = {r["load"]: r["p50_ms"] for r in rows if r["scheme"] == "uncoded-clean"}
        best_hedged = {}
        for r in rows:
            key = (r["factor"], r["stragglers"], r["load"])
            if r["scheme"] == "hedged":
                best_hedged[key] = min(best_hedged.get(key, np.inf), r["p999_ms"])
        for r in rows:
            if r["scheme"] == "uncoded-clean":
                continue
            key = (r["factor"], r["stragglers"], r["load"], r["scheme"], setting(r))
            cell = cells.setdefault(key, {"seeds": [], "p50": [], "p999": [], "clean": [], "hedged_best": [],
                                          "agreement": [], "exact": [], "decoded_agreement": [], "untrusted": [],
                                          "errors": 0, "lost": 0})
            cell["seeds"].append(seed)
            cell["p50"].append(r["p50_ms"])
            cell["p999"].append(r["p999_ms"])
            cell["clean"].append(clean.get(r["load"], np.nan))
            cell["hedged_best"].append(best_hedged.get(key[:3], np.nan))
            for q in ("agreement", "exact", "untrusted"):
                cell[q].append(r.get(q, np.nan))
            cell["decoded_agreement"].append(r.get("decoded_agreement", decoded_agreement(r)))
            cell["errors"] += r["errors"]
            cell["lost"] += r["lost"] + r.get("unaccounted", 0)
    out = []
    for (factor, kind, load, scheme, params), c in sorted(cells.items(), key=lambda kv: kv[0]):
        p999 = np.array(c["p999"])
        out.append({
            "factor": factor, "stragglers": kind, "load": load, "scheme": scheme, "setting": params,
            "seeds": len(c["seeds"]), "p50_ms_median": float(np.median(c["p50"])),
            "p999_ms_per_seed": " ".join(f"{v:.0f}" for v in p999),
            "p999_ms_median": float(np.median(p999)),
            "p999/clean_p50_median": float(np.median(p999 / np.array(c["clean"]))),
            "p999/best_hedged_median": float(np.median(p999 / np.array(c["hedged_best"]))),
            "agreement": float(np.mean(c["agreement"])), "exact": float(np.mean(c["exact"])),
            "decoded_agreement": _nanmean(c["decoded_agreement"]),
            "untrusted": float(np.nanmean(c["untrusted"])), "errors": c["errors"], "lost": c["lost"],
        })
    cols = list(out[0]) if out else []
    print(format_table(out, cols, title=f"bench_load runs on seeds {sorted(seeds)}: medians over seeds"))
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        write_csv(out, args.out + ".csv", cols)
        write_json({"runs": args.runs, "seeds": seeds, "rows": out}, args.out + ".json")
        print(f"wrote {args.out}.(csv|json)")


if __name__ == "__main__":
    main()
