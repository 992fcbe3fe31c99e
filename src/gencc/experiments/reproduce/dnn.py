"""``dnn``: RMSE and relative accuracy (cosine similarity for the embedding
model), mean and std over many batches, per model and (N, K, S)."""

from __future__ import annotations

from ...report import format_table, write_csv
from . import plots
from .cells import make_cell

COLUMNS = ["workload", "N", "K", "S", "scheme", "params", "rmse", "rmse_std", "accuracy", "accuracy_std", "cosine",
           "cosine_std", "missing_rate", "failures"]


RATIOS = (("gcc", "gcc-oracle"), ("gcc-cal", "gcc-oracle"), ("gcc", "letcc"), ("gcc", "bacc"))


def schemes(cfg):
    return tuple(cfg.schemes) + tuple(cfg.dnn_extra)


def cells(cfg):
    return [make_cell(cfg, "dnn", model, N, K, name, "random", S=S, rounds=cfg.dnn_rounds)
            for model in cfg.dnn_models for N, K, S in cfg.dnn_settings for name in schemes(cfg)]


def mse_ratios(rows):
    """Per (workload, N, K, S): MSE of one scheme over another's (``RATIOS``),
    e.g. ``gcc/gcc-oracle``: the default decoder against the best fixed one in
    hindsight on the same batches and draws."""
    by = {}
    for r in rows:
        by.setdefault((r["workload"], r["N"], r["K"], r["S"]), {})[r["scheme"]] = r.get("mse")
    out = []
    for (wl, N, K, S), mse in by.items():
        row = {"workload": wl, "N": N, "K": K, "S": S}
        for a, b in RATIOS:
            ok = mse.get(a) is not None and mse.get(b)
            row[f"{a}/{b}"] = mse[a] / mse[b] if ok else None
        out.append(row)
    return out


def analyse(rows, cfg, folder):
    ratios = mse_ratios(rows)
    more = []
    if any(v is not None for r in ratios for k, v in r.items() if "/" in k):
        more.append(format_table(ratios, title="== dnn: MSE ratios (same batches and draws) =="))
        write_csv(ratios, folder / "ratios.csv")
    plots.bar_panels(
        rows, schemes(cfg), setting=lambda r: (r["N"], r["K"], r["S"]),
        tick=lambda s: f"N={s[0]}\nK={s[1]} S={s[2]}",
        metric_of=lambda mrows: "accuracy" if any(r.get("accuracy") is not None for r in mrows) else "cosine",
        ylabel=lambda m: "relative accuracy" if m == "accuracy" else "cosine similarity", path=folder / "dnn.png")
    return {"ratios": ratios}, more
