"""``stragglers``: MSE and relative accuracy of a classifier against S at fixed N and K."""

from __future__ import annotations

import numpy as np

from . import plots
from .cells import make_cell
from .config import STRAGGLER_KINDS

COLUMNS = ["stragglers", "N", "K", "S", "scheme", "params", "mse", "rmse", "accuracy", "accuracy_std",
           "missing_rate", "failures"]


def cells(cfg):
    return [make_cell(cfg, "stragglers", cfg.stragglers_workload, cfg.stragglers_N, cfg.stragglers_K, name, kind,
                      S=S, rounds=cfg.worst_rounds if kind == "worst" else cfg.rounds)
            for kind in STRAGGLER_KINDS for S in cfg.stragglers_Ss for name in cfg.schemes]


def analyse(rows, cfg, folder):
    plot(rows, cfg, folder / "stragglers.png")
    return {}, []


def plot(rows, cfg, path):
    p = plots.plt()
    fig, axes = p.subplots(1, 2, figsize=(11, 4.2))
    for scheme, (color, marker) in plots.STYLE.items():
        for kind, ls in zip(STRAGGLER_KINDS, ("-", ":")):
            pts = sorted((r["S"], r.get("mse"), r.get("accuracy")) for r in rows
                         if r["scheme"] == scheme and r["stragglers"] == kind)
            if not pts:
                continue
            S, mse, acc = zip(*pts)
            mse_pts = [(s, m) for s, m in zip(S, mse) if m]
            if mse_pts:
                axes[0].semilogy(*zip(*mse_pts), ls=ls, marker=marker, color=color, label=f"{scheme} {kind}")
            axes[1].plot(S, [np.nan if a is None else a for a in acc], ls=ls, marker=marker, color=color,
                         label=f"{scheme} {kind}")
    where = f"{cfg.stragglers_workload}, N={cfg.stragglers_N}, K={cfg.stragglers_K}"
    axes[0].set(xlabel="S (stragglers)", ylabel="MSE of decoded logits", title=where)
    axes[1].set(xlabel="S (stragglers)", ylabel="relative accuracy (argmax agrees with f)", title=where)
    for ax in axes:
        ax.grid(True, alpha=0.3)
        ax.title.set_fontsize(9)
    axes[1].legend(fontsize=7, ncol=2)
    plots.save(fig, path)
