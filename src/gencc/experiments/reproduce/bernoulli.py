"""``bernoulli``: each worker straggles independently with probability p; MSE
against N for several p, with the O(log_{1/p}^3(N) N^-3) reference."""

from __future__ import annotations

import math

from . import plots
from .cells import make_cell
from .rate import slope_tables

COLUMNS = ["p", "N", "K", "scheme", "params", "mse", "mse_ci95", "returned", "missing_rate", "failures"]


def cells(cfg):
    return [make_cell(cfg, "bernoulli", cfg.bernoulli_workload, N, cfg.bernoulli_K, name, "bernoulli", p=p,
                      rounds=cfg.rounds)
            for p in cfg.bernoulli_ps for N in cfg.bernoulli_Ns for name in cfg.schemes]


def analyse(rows, cfg, folder):
    fitted, tables = slope_tables("bernoulli", rows, "p", "log^3(N) N^-3 -> slope a little above -3", folder)
    plot(rows, fitted, cfg, folder / "bernoulli.png")
    return {"slopes": fitted}, tables


def plot(rows, fitted, cfg, path):
    p_ = plots.plt()
    ps = cfg.bernoulli_ps
    fig, axes = p_.subplots(1, len(ps), figsize=(5.2 * len(ps), 4.2), squeeze=False)
    for ax, p in zip(axes[0], ps):
        plots.loglog_panel(ax, [r for r in rows if r["p"] == p], fitted, ("p", p),
                           lambda n, p=p: (math.log(n) / math.log(1 / p)) ** 3 / n**3,
                           "log_{1/p}^3(N) N^-3 reference",
                           f"{cfg.bernoulli_workload}, K={cfg.bernoulli_K}, Bernoulli p={p}")
    plots.save(fig, path)
