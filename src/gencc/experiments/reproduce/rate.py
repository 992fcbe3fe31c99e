"""``rate``: MSE against N (log grid) at fixed K and S, random and worst-case
stragglers, with fitted log-log slopes and the O(S^3 N^-3) reference."""

from __future__ import annotations

from ...report import format_table, write_csv
from . import plots
from .analysis import slopes
from .cells import make_cell
from .config import STRAGGLER_KINDS

COLUMNS = ["stragglers", "N", "K", "S", "scheme", "params", "mse", "mse_ci95", "max_error", "missing_rate",
           "failures"]


def cells(cfg):
    return [make_cell(cfg, "rate", cfg.rate_workload, N, cfg.rate_K, name, kind, S=cfg.rate_S,
                      rounds=cfg.worst_rounds if kind == "worst" else cfg.rounds)
            for kind in STRAGGLER_KINDS for N in cfg.rate_Ns for name in cfg.schemes]


def slope_tables(sweep, rows, by, ref, folder):
    """Fitted slopes of the coded schemes: (slopes, [console table]); writes slopes.csv."""
    fitted = slopes([r for r in rows if r["scheme"] != "replication"], by)
    write_csv(fitted, folder / "slopes.csv")
    return fitted, [format_table(fitted, title=f"fitted log-log slopes of MSE against N (reference {ref})")]


def analyse(rows, cfg, folder):
    fitted, tables = slope_tables("rate", rows, "stragglers", "S^3 N^-3 -> slope -3", folder)
    plot(rows, fitted, cfg, folder / "rate.png")
    return {"slopes": fitted}, tables


def plot(rows, fitted, cfg, path):
    p = plots.plt()
    fig, axes = p.subplots(1, 2, figsize=(11, 4.2))
    S = cfg.rate_S
    for ax, kind in zip(axes, STRAGGLER_KINDS):
        plots.loglog_panel(ax, [r for r in rows if r["stragglers"] == kind], fitted, ("stragglers", kind),
                           lambda n: S**3 / n**3, "S^3 N^-3 reference",
                           f"{cfg.rate_workload}, K={cfg.rate_K}, S={S}, {kind} stragglers")
    plots.save(fig, path)
