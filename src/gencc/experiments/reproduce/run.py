"""Orchestration: plan every sweep's cells, run the missing ones, analyse, write."""

from __future__ import annotations

import json
from pathlib import Path

from ...report import format_table, write_csv, write_json
from . import bernoulli, byzantine, degraded, dnn, rate, stragglers
from .cells import run_cell
from .config import SWEEPS, ReproduceConfig
from .store import Store

MODULES = {"rate": rate, "stragglers": stragglers, "bernoulli": bernoulli, "dnn": dnn, "degraded": degraded,
           "byzantine": byzantine}
assert tuple(MODULES) == SWEEPS


def plan_cells(cfg: ReproduceConfig, sweep: str):
    """Every cell of one sweep, in run order."""
    if sweep not in MODULES:
        raise ValueError(f"sweep must be one of {SWEEPS}, got {sweep!r}")
    return MODULES[sweep].cells(cfg)


def analyse(sweep, rows, cfg, folder: Path) -> dict:
    """Tables, CSV, JSON and plot of one sweep's rows."""
    module = MODULES[sweep]
    extra, more = module.analyse(rows, cfg, folder)
    cols = [c for c in module.COLUMNS if any(r.get(c) is not None for r in rows)]
    result = {"sweep": sweep, "rows": rows, **extra}
    tables = [format_table(rows, cols, title=f"== {sweep} ==")] + more
    write_csv(rows, folder / f"{sweep}.csv", cols)
    write_json({"settings": cfg.to_dict(), **result}, folder / f"{sweep}.json")
    result["table"] = "\n\n".join(tables)
    return result


def run_reproduce(out="gencc-reproduce", sweeps=SWEEPS, config: ReproduceConfig | None = None, *, quick=False,
                  resume=True, progress=True, echo=print) -> dict:
    """Run the sweeps; write ``<out>/<sweep>/{<sweep>.csv,<sweep>.json,<sweep>.png}``.

    Parameters
    ----------
    out : str or Path
        Output folder.
    sweeps : sequence of str
        A subset of ``SWEEPS``, run in that order.
    config : ReproduceConfig, optional
        Defaults to the full run, or :meth:`ReproduceConfig.quick` with ``quick``.
    resume : bool
        Reuse cells already in ``<out>/<sweep>/cells.jsonl`` (same settings only).
    progress : bool
        Show a progress bar over cells.
    echo : callable
        Where console tables go.

    Returns
    -------
    dict
        Sweep name -> ``{"rows", "slopes" (rate, bernoulli, byzantine), "table"}`` (byzantine
        adds ``"summary"`` and ``"targets"``, dnn ``"ratios"``).
    """
    bad = [s for s in sweeps if s not in SWEEPS]
    if bad or not sweeps:
        raise ValueError(f"sweeps must be a non-empty subset of {SWEEPS}, got {list(sweeps)}")
    cfg = config or (ReproduceConfig.quick() if quick else ReproduceConfig())
    out = Path(out)
    plan = {s: plan_cells(cfg, s) for s in sweeps}
    stores = {s: Store(out / s / "cells.jsonl", resume) for s in sweeps}
    todo = sum(c.key not in stores[s].done for s in sweeps for c in plan[s])
    total = sum(len(v) for v in plan.values())
    if total > todo:
        echo(f"resuming: {total - todo} of {total} cells already in {out}")
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=todo, desc="gencc reproduce", unit="cell")
    results = {}
    try:
        for sweep in sweeps:
            store = stores[sweep]
            for cell in plan[sweep]:
                if cell.key in store.done:
                    continue
                if bar is not None:
                    bar.set_postfix_str(f"{sweep} {cell.workload} N={cell.N} {cell.scheme}", refresh=False)
                store.add(cell.key, run_cell(cell))
                if bar is not None:
                    bar.update(1)
            rows = [store.done[c.key] for c in plan[sweep] if store.done.get(c.key) is not None]
            results[sweep] = analyse(sweep, rows, cfg, out / sweep)
    finally:
        if bar is not None:
            bar.close()
    for sweep, res in results.items():
        echo(res["table"])
        echo("")
    _summary(out, cfg, results)
    echo(f"wrote {out}/<sweep>/ (csv, json, png) and {out / 'reproduce.json'}")
    return results


def _summary(out: Path, cfg, results):
    summary = {"settings": json.loads(json.dumps(cfg.to_dict())), "sweeps": [], "slopes": {}}
    try:  # a run of some sweeps into a folder of the same settings adds to its summary
        previous = json.loads((out / "reproduce.json").read_text())
        if previous.get("settings") == summary["settings"]:
            summary.update(sweeps=list(previous["sweeps"]), slopes=dict(previous["slopes"]))
    except (OSError, ValueError, KeyError, TypeError):
        pass
    summary["sweeps"] += [s for s in results if s not in summary["sweeps"]]
    summary["slopes"].update({s: r["slopes"] for s, r in results.items() if "slopes" in r})
    write_json(summary, out / "reproduce.json")
