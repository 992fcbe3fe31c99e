"""Tables and figures of the studies, generated from their result JSON at build time.

``conf.py`` calls :func:`write` (tables as Markdown under ``docs/_generated/``, included by the
pages) and :func:`substitutions` (single figures quoted in the prose, as MyST substitutions
``{{ name }}``), so that no figure in the documentation is typed by hand.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

DOCS = Path(__file__).resolve().parent
RESULTS = DOCS.parent / "results"
OUT = DOCS / "_generated"


def _load(rel: str) -> dict | None:
    path = RESULTS / rel
    return json.loads(path.read_text()) if path.exists() else None


def _x(v, digits=3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if v >= 100:
        return f"{v:,.0f}x"
    return f"{float(f'{v:.{digits}g}'):g}x"


def _pct(v) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"


def _table(header, rows) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _selfcal_tables(res, drift) -> dict:
    names = {"gcc": "default selection (`gcc`)", "self-cal": "self-calibrated", "calibrated": "`calibrate`d (8 rounds)"}
    out = {"selfcal_summary.md": _table(
        ["decoder", "vs", "median", "p90", "max", "within 2x", "worst"],
        [[names.get(r["decoder"], r["decoder"]), r["vs"], _x(r["median"]), _x(r["p90"]), _x(r["max"]),
          _pct(r["within_2x"]), r["worst"]] for r in res["summary"] + res["summary_vs_gcc"]])}
    if drift:
        out["selfcal_drift.md"] = _table(
            ["phase", "function", "best fixed decoder", "default", "self-calibrated", "calibrated on phase 1"],
            [[p["phase"], p["function"], f"`{p['oracle_decoder']}`",
              *(_x(p["settled"][k] / p["settled"]["oracle"]) for k in ("gcc", "self-cal", "calibrated"))]
             for p in drift["phase_mse"]])
    return out


def _selector_tables(res) -> dict:
    cols = ["decoder", "vs", "median", "p90", "max", "within 1.25x", "within 2x", "worst"]

    def rows(summary, first=()):
        return [[*(r[k] for k in first), r["decoder"], r["vs"], _x(r["median"]), _x(r["p90"]), _x(r["max"]),
                 _pct(r["within_1.25x"]), _pct(r["within_2x"]), r["worst"]] for r in summary]

    return {
        "selector_summary.md": _table(cols, rows(res["summary"])),
        "selector_peers.md": _table(cols, rows(res["summary_vs_letcc"] + res["summary_vs_bacc"])),
        "selector_patterns.md": _table(["pattern"] + cols, rows(res["by_pattern"], ("pattern",))),
        "selector_coverage.md": _table(
            ["family", "decoded inputs", "true RMSE under rmse_p90", "true / estimate: median", "p90"],
            [[c["family"], f"{c['inputs']:,}", _pct(c["covered"]), f"{c['ratio_p50']:.2f}", f"{c['ratio_p90']:.2f}"]
             for c in res["coverage"]]),
    }


def _num(v, digits=2) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, int) or abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{digits}f}"


def _columns(rows, spec) -> str:
    """A table of ``rows`` (dicts) by ``spec``: (header, key or callable, digits)."""
    return _table([h for h, _, _ in spec],
                  [[(key(r) if callable(key) else _num(r.get(key), d) if isinstance(r.get(key), (int, float))
                     else (r.get(key) if r.get(key) is not None else "-")) for _, key, d in spec] for r in rows])


OVERHEAD_COLUMNS = [
    ("backend", "backend", 0), ("scheme", "scheme", 0), ("B", lambda r: str(r["B"]), 0),
    ("inputs/s", "inputs_per_s", 0), ("f (one call of N*B) ms", "f_ms", 2), ("wall per batch ms", "wall_ms", 1),
    ("own/f", "own/f", 2), ("encode ms", "encode_ms", 2), ("transport+dispatch ms", "transport_ms", 1),
    ("decode ms", "decode_ms", 2), ("f in N calls of B ms", "f_split_ms", 2),
    ("own beyond the split / f", "own_excl_split/f", 2), ("CPU per batch ms", "cpu_ms", 1),
    ("master CPU ms", "master_cpu_ms", 1), ("CPU / f", "cpu/f", 2),
]


def _overhead_tables(res) -> dict:
    out = {"overhead.md": _columns(res["rows"], OVERHEAD_COLUMNS)}
    if res.get("map_paths"):
        out["overhead_map_paths.md"] = _columns(res["map_paths"], [(k, k, 2) for k in res["map_paths"][0]])
    if res.get("transport"):
        out["overhead_transport.md"] = _columns(res["transport"], [
            ("task KB", "task_kb", 0), ("shared-memory path", "shared_path", 0),
            ("shared memory wall ms", "shared_wall_ms", 2), ("pipe wall ms", "pipe_wall_ms", 2),
            ("pipe / shared (wall)", "pipe/shared wall", 2), ("pipe / shared (CPU)", "pipe/shared cpu", 2)])
    return out


def _overhead_substitutions(res) -> dict:
    rows = res["rows"]
    gencc = [r for r in rows if not r["backend"].startswith("bare")]
    bare = [r for r in rows if r["backend"].startswith("bare per-worker")]
    b64 = [r for r in gencc if r["B"] == max(g["B"] for g in gencc)]
    best = min(b64, key=lambda r: r["own/f"])
    threads = [r for r in b64 if r["backend"] == "threads"]
    by = {(r["backend"], r["scheme"], r["B"]): r for r in gencc}
    subs = {
        "overhead_date": res.get("provenance", {}).get("date", "unknown")[:10],
        "overhead_commit": (res.get("provenance", {}).get("commit") or "unknown")[:7],
        "overhead_B": str(best["B"]), "overhead_best": f"{best['own/f']:.2f}",
        "overhead_best_where": f"{best['backend']}, {best['scheme']}",
        "overhead_best_wall": f"{best['wall_ms']:.1f} ms", "overhead_f": f"{best['f_ms']:.2f} ms",
        "overhead_best_rate": f"{best['inputs_per_s']:,.0f}",
        "overhead_threads_best": f"{min(r['own/f'] for r in threads):.2f}" if threads else "-",
        "overhead_floor": (f"{min(r['own/f'] for r in bare):.2f}-{max(r['own/f'] for r in bare):.2f}"
                           if bare else "-"),
        "overhead_master_cpu": f"{best['master_cpu_ms']:.1f} ms",
        "overhead_bare_master_cpu": (f"{min(r['master_cpu_ms'] for r in bare):.1f} ms" if bare else "-"),
    }
    gains = []
    for backend, scheme in {(r["backend"], r["scheme"]) for r in gencc if r["scheme"] == "gcc-fixed"}:
        lo, hi = by.get((backend, scheme, 1)), by.get((backend, scheme, best["B"]))
        if lo and hi:
            gains.append((backend, hi["inputs_per_s"] / lo["inputs_per_s"]))
    subs["overhead_batching_gain"] = ", ".join(f"{g:.0f}x on {b}" for b, g in sorted(gains)) or "-"
    adaptive = [r for r in b64 if r["scheme"] == "gcc" and r.get("decode_ms") is not None]
    if adaptive:
        subs["overhead_adaptive_decode"] = (f"{min(r['decode_ms'] for r in adaptive):.1f}-"
                                            f"{max(r['decode_ms'] for r in adaptive):.1f} ms")
        subs["overhead_fixed_decode"] = (f"{min(r['decode_ms'] for r in b64 if r['scheme'] == 'gcc-fixed'):.2f}-"
                                         f"{max(r['decode_ms'] for r in b64 if r['scheme'] == 'gcc-fixed'):.2f} ms")
    return subs


def _ms(key):
    return lambda r: "-" if r.get(key) is None else f"{1e3 * r[key]:.1f}"


def _demo_tables(res) -> dict:
    spec = [("E", "extra", 0), ("N", "N", 0),
            ("scheme", lambda r: r["scheme"] + (f" ({r['params']})" if r.get("params") else ""), 0),
            ("waits for", "wait_for", 0), ("agreement with f", lambda r: f"{r['agreement_with_f']:.3f}", 0),
            ("exact share", "exact_share", 2), ("p50 ms", _ms("p50_s"), 0), ("p95 ms", _ms("p95_s"), 0),
            ("p99 ms", _ms("p99_s"), 0), ("p95 / uncoded", "p95_vs_uncoded", 2),
            ("failed batches", "failed_batches", 0)]
    return {"demo.md": _columns(res["rows"], spec)}


CODES = ("gcc-systematic", "gcc", "bacc", "letcc", "parm")


def _span(values, fmt="{:.3f}") -> str:
    lo, hi = min(values), max(values)
    return fmt.format(lo) if lo == hi else f"{fmt.format(lo)}-{fmt.format(hi)}"


def _demo_substitutions(res) -> dict:
    rows = res["rows"]
    prov = res.get("provenance", {})
    coded = [r for r in rows if r["scheme"] in CODES]
    extras = sorted({r["extra"] for r in coded})
    # replication wins at E when it answers every input exactly with a p95 and p99 within 5% of
    # the best code's at that E
    shorter = []  # (E, code, quantile, code's / replication's, code's agreement)
    for e in extras:
        rep = next((r for r in rows if r["extra"] == e and r["scheme"] == "replication"), None)
        for r in (r for r in coded if r["extra"] == e and rep is not None):
            for q in ("p95_s", "p99_s"):
                if r[q] < rep[q] / 1.05:
                    shorter.append((e, r["scheme"], q[:3], r[q] / rep[q], r["agreement_with_f"]))
    reps = [r for r in rows if r["scheme"] == "replication"]
    if not reps or any(r["agreement_with_f"] < 1.0 for r in reps) or any(v[4] >= 1.0 for v in shorter):
        verdict = ("the schemes trade answers against tails differently at different E (no single winner "
                   "by the rule of this page: exact answers and a tail within 5% of the best): read the table")
    elif not shorter:
        verdict = ("**in this setting replication wins**: at every E it answers every input exactly, with a "
                   "p95 and p99 no more than 5% above the best code's")
    else:
        verdict = ("replication answers every input exactly, and no code has both its answers and a shorter "
                   "tail: " + "; ".join(f"at E = {e}, {c}'s {q} is {v:.2f}x replication's, but it agrees with f "
                                          f"on {a:.3f} of inputs" for e, c, q, v, a in shorter))
    first = extras[0]
    plain = [r["agreement_with_f"] for r in coded if r["extra"] == first and r["scheme"] in ("gcc", "bacc", "letcc")]
    later = [r["agreement_with_f"] for r in coded if r["extra"] > first and r["scheme"] in ("gcc", "bacc", "letcc")]
    sys_rows = [r for r in coded if r["scheme"] == "gcc-systematic"]
    parm = [r for r in coded if r["scheme"] == "parm"]
    cut = [r for r in rows if r["scheme"] != "uncoded" and r["p95_vs_uncoded"] < 0.5]
    return {
        "demo_date": prov.get("date", "unknown")[:10], "demo_commit": (prov.get("commit") or "unknown")[:7],
        "demo_seed": str(res["settings"]["seed"]), "demo_verdict": verdict,
        "demo_first_E": str(first), "demo_plain_first": _span(plain), "demo_plain_later": _span(later) if later else "-",
        "demo_systematic": _span([r["agreement_with_f"] for r in sys_rows]) if sys_rows else "-",
        "demo_systematic_exact": _span([100 * r["exact_share"] for r in sys_rows], "{:.0f}%") if sys_rows else "-",
        "demo_parm": ", ".join(f"{r['agreement_with_f']:.3f} at E = {r['extra']}" for r in parm) or "-",
        "demo_cut_from": str(min(r["extra"] for r in cut)) if cut else "none of the E run",
    }


def write() -> list[Path]:
    OUT.mkdir(exist_ok=True)
    tables = {}
    sel = _load("selector_bench/selector.json")
    if sel:
        tables.update(_selector_tables(sel))
    res, drift = _load("self_calibration/selfcal.json"), _load("self_calibration/drift.json")
    if res:
        tables.update(_selfcal_tables(res, drift))
    overhead = _load("bench_overhead/overhead.json")
    if overhead:
        tables.update(_overhead_tables(overhead))
    demo = _load("demo/demo.json")
    if demo:
        tables.update(_demo_tables(demo))
    written = []
    for name, text in tables.items():
        path = OUT / name
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        written.append(path)
    return written


def substitutions() -> dict:
    """Figures quoted in the prose: name -> text."""
    subs = {}
    res, drift = _load("self_calibration/selfcal.json"), _load("self_calibration/drift.json")
    if res:
        by = {(r["decoder"], r["vs"]): r for r in res["summary"] + res["summary_vs_gcc"]}
        rows = res["rows"]
        ratio = [r["ratio"]["self-cal"] / r["ratio"]["gcc"] for r in rows]
        busy = sorted(r["self_cal"]["busy_seconds"] / res["batches"] for r in rows)
        subs.update({
            "selfcal_seed": str(res["seed"]), "selfcal_streams": str(res["n_settings"]),
            "selfcal_batches": str(res["batches"]),
            "selfcal_p90": _x(by["self-cal", "oracle"]["p90"], 2), "gcc_p90": _x(by["gcc", "oracle"]["p90"], 2),
            "selfcal_median": _x(by["self-cal", "oracle"]["median"]), "gcc_median": _x(by["gcc", "oracle"]["median"]),
            "selfcal_vs_gcc_median": _x(by["self-cal", "gcc"]["median"]),
            "selfcal_vs_gcc_p90": _x(by["self-cal", "gcc"]["p90"]),
            "selfcal_vs_gcc_max": _x(by["self-cal", "gcc"]["max"]),
            "selfcal_vs_gcc_worst": by["self-cal", "gcc"]["worst"],
            "selfcal_better": _pct(sum(v < 1 / 1.1 for v in ratio) / len(ratio)),
            "selfcal_worse": _pct(sum(v > 1.1 for v in ratio) / len(ratio)),
            "selfcal_switched": _pct(sum(r["self_cal"]["switches"] > 0 for r in rows) / len(rows)),
            "selfcal_ms_median": f"{1e3 * busy[len(busy) // 2]:.1f} ms",
            "selfcal_ms_max": f"{1e3 * busy[-1]:.0f} ms",
            "calibrated_max": _x(by["calibrated", "oracle"]["max"]),
            "calibrated_worst": by["calibrated", "oracle"]["worst"],
            "selfcal_worst": by["self-cal", "oracle"]["worst"],
            "selfcal_max": _x(by["self-cal", "oracle"]["max"], 2),
        })
    sel = _load("selector_bench/selector.json")
    if sel:
        by = {(r["decoder"], r["vs"]): r for r in sel["summary"] + sel["summary_vs_letcc"] + sel["summary_vs_bacc"]}
        gcc = by["gcc", "oracle"]
        worst = max((r for r in sel["by_pattern"] if r["decoder"] == "gcc" and r["vs"] == "oracle"),
                    key=lambda r: r["p90"])
        subs.update({"selector_median": _x(gcc["median"]), "selector_p90": _x(gcc["p90"], 2),
                     "selector_max": _x(gcc["max"], 2), "selector_within_125": _pct(gcc["within_1.25x"]),
                     "selector_within_2": _pct(gcc["within_2x"]), "selector_worst": gcc["worst"],
                     "selector_vs_letcc_median": _x(by["gcc", "letcc"]["median"], 2),
                     "selector_vs_letcc_p90": _x(by["gcc", "letcc"]["p90"]),
                     "selector_vs_bacc_median": _x(by["gcc", "bacc"]["median"], 2),
                     "selector_vs_bacc_p90": _x(by["gcc", "bacc"]["p90"]),
                     "selector_worst_pattern": worst["pattern"], "selector_worst_pattern_p90": _x(worst["p90"], 2)})
        subs.update({"selector_seed": str(sel["seed"]), "selector_settings": str(sel["n_settings"]),
                     "selector_rounds": str(sel["rounds"]), "selector_max_workers": str(sel["max_workers"]),
                     "selector_date": sel.get("provenance", {}).get("date", "unknown")[:10]})
    if drift:
        subs.update({"drift_seed": str(drift["seed"]), "drift_K": str(drift["K"]), "drift_N": str(drift["N"]),
                     "drift_stragglers": drift["stragglers"], "drift_f1": drift["functions"][0],
                     "drift_f2": drift["functions"][1],
                     "drift_switches": "; ".join(f"after {s['batches']} batches to `{s['to']}` "
                                                 f"(measured {s['mse_ratio']:.2f}x the decoder it replaced)"
                                                 for s in drift["switches"]) or "none"})
    overhead = _load("bench_overhead/overhead.json")
    if overhead:
        subs.update(_overhead_substitutions(overhead))
    demo = _load("demo/demo.json")
    if demo:
        subs.update(_demo_substitutions(demo))
    return subs
