"""``dnn``: RMSE and relative accuracy (cosine similarity for the embedding
model), mean and std over many batches, per model and (N, K, S)."""

from __future__ import annotations

from . import plots
from .cells import make_cell

COLUMNS = ["workload", "N", "K", "S", "scheme", "params", "rmse", "rmse_std", "accuracy", "accuracy_std", "cosine",
           "cosine_std", "missing_rate", "failures"]


def cells(cfg):
    return [make_cell(cfg, "dnn", model, N, K, name, "random", S=S, rounds=cfg.dnn_rounds)
            for model in cfg.dnn_models for N, K, S in cfg.dnn_settings for name in cfg.schemes]


def analyse(rows, cfg, folder):
    plots.bar_panels(
        rows, cfg.schemes, setting=lambda r: (r["N"], r["K"], r["S"]),
        tick=lambda s: f"N={s[0]}\nK={s[1]} S={s[2]}",
        metric_of=lambda mrows: "accuracy" if any(r.get("accuracy") is not None for r in mrows) else "cosine",
        ylabel=lambda m: "relative accuracy" if m == "accuracy" else "cosine similarity", path=folder / "dnn.png")
    return {}, []
