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


def write() -> list[Path]:
    OUT.mkdir(exist_ok=True)
    tables = {}
    sel = _load("selector_bench/selector.json")
    if sel:
        tables.update(_selector_tables(sel))
    res, drift = _load("self_calibration/selfcal.json"), _load("self_calibration/drift.json")
    if res:
        tables.update(_selfcal_tables(res, drift))
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
    return subs
