"""``byzantine``: MSE, argmax agreement and flags against the number of liars A.

A of the returned workers (besides S random stragglers) answer with finite,
wrong outputs (the attacks of :mod:`gencc.byzantine`). Per model and (N, K,
S), for A in the config's grid (up to N/4) and each attack, every method of
``cells.BYZANTINE_METHODS`` decodes the same batches and straggler draws:
plain GCC, robust GCC (``GCC(robust=True)``, which flags liars), BACC, LeTCC
at its best ridges, and the oracle (plain GCC without exactly the liars: the
floor of any screen). ``mse/clean`` is a cell's MSE over the adversary-free
MSE of plain GCC on the same draws (its ``clean_mse``).

Rate part: robust GCC (with plain GCC and the oracle) on x sin x against N
with A = round(N^a) liars, and the fitted log-log slopes of MSE against N.
"""

from __future__ import annotations

import math

import numpy as np

from ...report import format_table, write_csv
from . import plots
from .analysis import fit_slope
from .cells import make_cell

COLUMNS = ["workload", "N", "K", "S", "A", "attack", "scheme", "params", "mse", "mse_ci95", "clean_mse", "mse/clean",
           "accuracy", "accuracy_std", "flag_precision", "flag_recall", "false_flags", "failures"]

NON_COLLUDING = ("sign-flip", "scale", "random", "bias", "copy")


def adversaries(cfg, N) -> list:
    """The A of the config's grid at N: at most N/4."""
    return [A for A in cfg.byzantine_As if 0 <= A <= N // 4]


def rate_A(cfg, N) -> int:
    """A = round(N^a) of the rate part."""
    return int(round(N ** cfg.byzantine_rate_a))


def cells(cfg):
    out = []
    for model in cfg.byzantine_models:
        for N, K, S in cfg.byzantine_settings:
            for A in adversaries(cfg, N):
                for attack in ("none",) if A == 0 else cfg.byzantine_attacks:
                    out += [make_cell(cfg, "byzantine", model, N, K, name, "random", S=S,
                                      rounds=cfg.byzantine_rounds, A=A, attack=attack)
                            for name in cfg.byzantine_methods]
    for N in cfg.byzantine_rate_Ns:
        out += [make_cell(cfg, "byzantine", cfg.byzantine_rate_workload, N, cfg.byzantine_rate_K, name, "random",
                          S=cfg.byzantine_rate_S, rounds=cfg.byzantine_rounds, A=rate_A(cfg, N), attack=attack)
                for attack in cfg.byzantine_attacks for name in cfg.byzantine_rate_methods]
    return list({c.key: c for c in out}.values())  # a rate cell may also be a cell of the A grid


def _setting(r):
    return r["workload"], r["N"], r["K"], r["S"]


def _gmean(values):
    v = [x for x in values if x is not None and x > 0 and math.isfinite(x)]
    return float(np.exp(np.mean(np.log(v)))) if v else None


def _mean(values):
    v = [x for x in values if x is not None and math.isfinite(x)]
    return float(np.mean(v)) if v else None


def add_ratios(rows):
    """``mse/clean`` on every row: its MSE over plain GCC's adversary-free MSE on the same draws."""
    clean = {}
    for r in rows:
        if r["scheme"] == "gcc":
            ref = r.get("mse") if r["A"] == 0 else r.get("clean_mse")
            if ref:
                clean.setdefault(_setting(r), ref)
    for r in rows:
        ref = clean.get(_setting(r))
        r["mse/clean"] = r["mse"] / ref if ref and r.get("mse") is not None else None


def summary(rows, methods):
    """Per setting and A: each method's ``mse/clean``, geometric mean over attacks; robust
    GCC's mean flag precision and recall over the non-colluding attacks and on the colluding one."""
    out = []
    groups = {}
    for r in rows:
        groups.setdefault((*_setting(r), r["A"]), []).append(r)
    for (wl, N, K, S, A), grp in groups.items():
        row = {"workload": wl, "N": N, "K": K, "S": S, "A": A}
        for m in methods:
            row[m] = _gmean([r["mse/clean"] for r in grp if r["scheme"] == m])
        if any(r.get("accuracy") is not None for r in grp):
            for m in methods:
                row[f"acc {m}"] = _mean([r.get("accuracy") for r in grp if r["scheme"] == m])
        rob = [r for r in grp if r["scheme"] == "gcc-robust"]
        plain = [r for r in rob if r["attack"] in NON_COLLUDING]
        row["robust precision"] = _mean([r.get("flag_precision") for r in plain])
        row["robust recall"] = _mean([r.get("flag_recall") for r in plain])
        row["robust recall, colluding"] = _mean([r.get("flag_recall") for r in rob if r["attack"] == "colluding"])
        out.append(row)
    return out


def targets(rows):
    """Robust GCC where the issue sets targets (0 < A <= N/10, N >= 4K): per attack, MSE over the
    adversary-free MSE (target <= 2) and flag precision and recall (target >= 0.95, non-colluding)."""
    out = []
    for r in rows:
        if r["scheme"] != "gcc-robust" or not 0 < r["A"] <= r["N"] / 10 or r["N"] < 4 * r["K"]:
            continue
        ratio, p, rc = r.get("mse/clean"), r.get("flag_precision"), r.get("flag_recall")
        flags_ok = None if r["attack"] not in NON_COLLUDING else bool(
            p is not None and rc is not None and p >= 0.95 and rc >= 0.95)
        out.append({"workload": r["workload"], "N": r["N"], "K": r["K"], "S": r["S"], "A": r["A"],
                    "attack": r["attack"], "mse/clean": ratio, "precision": p, "recall": rc,
                    "mse <= 2x": None if ratio is None else bool(ratio <= 2), "flags >= 0.95": flags_ok})
    return out


def rate_rows(rows, cfg):
    return [r for r in rows if r["workload"] == cfg.byzantine_rate_workload and r["K"] == cfg.byzantine_rate_K
            and r["S"] == cfg.byzantine_rate_S and r["N"] in cfg.byzantine_rate_Ns and r["A"] == rate_A(cfg, r["N"])
            and r["scheme"] in cfg.byzantine_rate_methods]


def rate_slopes(rows, cfg):
    """Slope of MSE against N per (attack, method), and of the adversary-free MSE (``"gcc, no liars"``)."""
    out = []
    series = {}
    for r in rate_rows(rows, cfg):
        series.setdefault((r["attack"], r["scheme"]), []).append((r["N"], r.get("mse")))
        if r["scheme"] == "gcc":
            series.setdefault(("none", "gcc, no liars"), []).append((r["N"], r.get("clean_mse")))
    for (attack, scheme), pts in series.items():
        pts = sorted(set(pts), key=lambda p: p[0])
        xs = [p[0] for p in pts]
        ys = [np.nan if p[1] is None else p[1] for p in pts]
        out.append({"attack": attack, "scheme": scheme, "slope": fit_slope(xs, ys),
                    "points": int(np.sum(np.isfinite(ys) & (np.asarray(ys) > 0)))})
    # the adversary-free series is the same for every attack: keep one
    seen, unique = set(), []
    for s in out:
        k = (s["scheme"], s["attack"] if s["scheme"] != "gcc, no liars" else None)
        if k not in seen:
            seen.add(k)
            unique.append(s)
    return unique


def analyse(rows, cfg, folder):
    add_ratios(rows)
    methods = [m for m in cfg.byzantine_methods if any(r["scheme"] == m for r in rows)]
    grid = [r for r in rows if r["workload"] in cfg.byzantine_models
            and (r["N"], r["K"], r["S"]) in set(map(tuple, cfg.byzantine_settings))]
    summ = summary(grid, methods)
    tgt = targets(grid)
    slopes = rate_slopes(rows, cfg)
    write_csv(summ, folder / "summary.csv")
    write_csv(tgt, folder / "targets.csv")
    write_csv(slopes, folder / "slopes.csv")
    more = [format_table(summ, title="== byzantine: MSE over the adversary-free MSE of plain GCC on the same draws, "
                                     "geometric mean over attacks; argmax agreement (acc), mean over attacks; robust "
                                     "GCC's flag precision and recall ==")]
    if tgt:
        met = sum(bool(t["mse <= 2x"]) for t in tgt)
        flags = [t for t in tgt if t["flags >= 0.95"] is not None]
        more.append(format_table(tgt, title=f"== byzantine: robust GCC at A <= N/10, N >= 4K (targets: MSE <= 2x "
                                            f"adversary-free, precision and recall >= 0.95 for non-colluding "
                                            f"attacks): MSE met in {met}/{len(tgt)}, flags in "
                                            f"{sum(t['flags >= 0.95'] for t in flags)}/{len(flags)} ==" ))
    more.append(format_table(slopes, title=f"== byzantine: fitted log-log slopes of MSE against N, "
                                           f"{cfg.byzantine_rate_workload}, K={cfg.byzantine_rate_K}, "
                                           f"S={cfg.byzantine_rate_S}, A = round(N^{cfg.byzantine_rate_a:g}) =="))
    plot(grid, rate_rows(rows, cfg), slopes, methods, cfg, folder / "byzantine.png")
    return {"summary": summ, "targets": tgt, "slopes": slopes}, more


def plot(grid, rate, slopes, methods, cfg, path):
    p = plots.plt()
    settings = list(dict.fromkeys(_setting(r) for r in grid))
    ncols = len(settings) + 1
    fig, axes = p.subplots(3, ncols, figsize=(4.2 * ncols, 10), squeeze=False)
    for j, st in enumerate(settings):
        srows = [r for r in grid if _setting(r) == st]
        As = sorted({r["A"] for r in srows})
        title = f"{st[0]}, N={st[1]} K={st[2]} S={st[3]}"
        for m in methods:
            color, marker = plots.style(m) if m != "gcc-robust" else ("C1", "D")
            color = "k" if m == "oracle" else color
            ratio = [_gmean([r["mse/clean"] for r in srows if r["scheme"] == m and r["A"] == A]) for A in As]
            axes[0][j].semilogy(As, [np.nan if v is None else v for v in ratio], marker=marker, color=color, label=m)
            acc = [_mean([r.get("accuracy") for r in srows if r["scheme"] == m and r["A"] == A]) for A in As]
            if any(a is not None for a in acc):
                axes[1][j].plot(As, [np.nan if a is None else a for a in acc], marker=marker, color=color, label=m)
        axes[0][j].axhline(2.0, color="grey", ls=":", lw=1)
        axes[0][j].set(xlabel="A (liars)", ylabel="MSE / adversary-free MSE\n(geo. mean over attacks; dotted: 2x)",
                      title=title)
        axes[1][j].set(xlabel="A (liars)", ylabel="argmax agreement with f\n(mean over attacks)", title=title)
        if not axes[1][j].lines:
            axes[1][j].text(0.5, 0.5, "regression: no argmax", ha="center", va="center",
                            transform=axes[1][j].transAxes)
        for attack in cfg.byzantine_attacks:
            pts = sorted((r["A"], r.get("flag_recall")) for r in srows
                         if r["scheme"] == "gcc-robust" and r["attack"] == attack and r.get("flag_recall") is not None)
            if pts:
                axes[2][j].plot(*zip(*pts), marker="o", label=attack)
        axes[2][j].set(xlabel="A (liars)", ylabel="robust GCC flag recall", ylim=(-0.02, 1.02), title=title)
    ax = axes[0][-1]
    for m in cfg.byzantine_rate_methods:
        color, marker = plots.style(m) if m != "gcc-robust" else ("C1", "D")
        color = "k" if m == "oracle" else color
        Ns = sorted({r["N"] for r in rate})
        ys = [_gmean([r.get("mse") for r in rate if r["scheme"] == m and r["N"] == N]) for N in Ns]
        slope = _mean([s["slope"] for s in slopes if s["scheme"] == m])
        if any(y is not None for y in ys):
            ax.loglog(Ns, [np.nan if y is None else y for y in ys], marker=marker, color=color,
                      label=f"{m} (mean slope {slope:.2f})" if slope is not None else m)
    Ns = sorted({r["N"] for r in rate})
    clean = [_gmean([r.get("clean_mse") for r in rate if r["scheme"] == "gcc" and r["N"] == N]) for N in Ns]
    if any(c is not None for c in clean):
        cs = next((s["slope"] for s in slopes if s["scheme"] == "gcc, no liars"), float("nan"))
        ax.loglog(Ns, [np.nan if c is None else c for c in clean], "k--", lw=1, label=f"no liars (slope {cs:.2f})")
    ax.set(xlabel="N (workers)", ylabel="MSE (geo. mean over attacks)",
           title=f"{cfg.byzantine_rate_workload}, K={cfg.byzantine_rate_K}, S={cfg.byzantine_rate_S}, "
                 f"A=round(N^{cfg.byzantine_rate_a:g})")
    axes[1][-1].axis("off")
    axes[2][-1].axis("off")
    for row in axes:
        for a in row:
            a.grid(True, alpha=0.3)
            a.title.set_fontsize(8)
            if a.lines:
                a.legend(fontsize=6)
    plots.save(fig, path)
