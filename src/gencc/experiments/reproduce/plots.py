"""Plotting helpers shared by the sweeps."""

from __future__ import annotations

import numpy as np

from .analysis import reference

STYLE = {"gcc": ("C3", "o"), "letcc": ("C0", "s"), "bacc": ("C2", "^"), "lcc": ("C4", "v"),
         "replication": ("C7", "x"), "gcc-sys": ("C1", "o"), "letcc-sys": ("C9", "s"), "bacc-sys": ("C8", "^"),
         "parm": ("C5", "D")}


def plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def style(scheme):
    return STYLE.get(scheme, ("C6", "o"))


def save(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt().close(fig)


def loglog_panel(ax, rows, slopes, key, ref_shape, ref_label, title):
    """MSE against N per scheme on log-log axes, with slopes and a reference through GCC's first point."""
    anchor = None
    for scheme in STYLE:
        pts = [(r["N"], r["mse"]) for r in rows if r["scheme"] == scheme and r.get("mse")]
        pts = sorted(p for p in pts if p[1] and p[1] > 0)
        if not pts:
            continue
        slope = next((s["slope"] for s in slopes if s["scheme"] == scheme and s[key[0]] == key[1]), float("nan"))
        color, marker = STYLE[scheme]
        ax.loglog(*zip(*pts), marker=marker, color=color, label=f"{scheme} (slope {slope:.2f})")
        if scheme == "gcc":
            anchor = pts[0]
    if anchor is not None:
        Ns = sorted({r["N"] for r in rows})
        ax.loglog(Ns, reference(Ns, *anchor, ref_shape), "k--", lw=1, label=ref_label)
    ax.set_xlabel("N (workers)")
    ax.set_ylabel("MSE")
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)


def bar_panels(rows, schemes, setting, tick, metric_of, ylabel, path):
    """One panel per workload: a bar per scheme and setting, 95% CI error bars.

    ``setting(row)`` is a row's setting (hashable), ``tick(setting)`` its label,
    ``metric_of(rows_of_a_model)`` the metric column to plot for that model and
    ``ylabel(metric)`` its axis label.
    """
    models = list(dict.fromkeys(r["workload"] for r in rows))
    if not models:
        return
    p = plt()
    fig, axes = p.subplots(1, len(models), figsize=(4.6 * len(models), 4), squeeze=False)
    for ax, model in zip(axes[0], models):
        mrows = [r for r in rows if r["workload"] == model]
        metric = metric_of(mrows)
        settings = list(dict.fromkeys(setting(r) for r in mrows))
        present = [s for s in schemes if any(r["scheme"] == s for r in mrows)]
        width = 0.8 / max(len(present), 1)
        for j, scheme in enumerate(present):
            vals, errs = [], []
            for s in settings:
                r = next((r for r in mrows if r["scheme"] == scheme and setting(r) == s), None)
                vals.append(np.nan if r is None or r.get(metric) is None else r[metric])
                errs.append(0 if r is None or r.get(f"{metric}_ci95") is None else r[f"{metric}_ci95"])
            ax.bar(np.arange(len(settings)) + j * width, vals, width, yerr=errs, capsize=2,
                   color=style(scheme)[0], label=scheme)
        ax.set_xticks(np.arange(len(settings)) + 0.4 - width / 2)
        ax.set_xticklabels([tick(s) for s in settings], fontsize=7)
        ax.set_ylabel(ylabel(metric) + " (bars: 95% CI)")
        if not metric.endswith("mse"):  # a share in [0, 1]: zoom in on the top
            ax.set_ylim(max(0.0, np.nanmin([r.get(metric) or 1 for r in mrows]) - 0.15), 1.01)
        ax.set_title(model, fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0][0].legend(fontsize=7)
    save(fig, path)
