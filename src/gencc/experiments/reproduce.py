"""`gencc reproduce`: the paper's experiments as four sweeps, resumable.

1. ``rate``: error against N (log grid) at fixed K and S, random and worst-case
   stragglers, with fitted log-log slopes and the O(S^3 N^-3) reference.
2. ``stragglers``: error and relative accuracy of a classifier against S at
   fixed N and K.
3. ``bernoulli``: each worker straggles independently with probability p;
   error against N for several p, with the O(log_{1/p}^3(N) N^-3) reference.
4. ``dnn``: RMSE and relative accuracy (cosine similarity for the embedding
   model), mean and std over many batches, per model and (N, K, S).

Every cell (one scheme at one setting) is evaluated by :func:`gencc.evaluate`
and appended to ``<out>/<sweep>/cells.jsonl`` as soon as it is done, so an
interrupted run picks up where it stopped. All schemes of a setting see the
same batches and straggler draws.
"""

from __future__ import annotations

import json
import math
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from .. import stragglers as st
from ..evaluate import evaluate
from ..report import format_table, write_csv, write_json
from ..workloads import get
from .compare import build_schemes

__all__ = ["ReproduceConfig", "run_reproduce", "SWEEPS", "fit_slope"]

SWEEPS = ("rate", "stragglers", "bernoulli", "dnn")
STRAGGLER_KINDS = ("random", "worst")


@dataclass(frozen=True)
class ReproduceConfig:
    """Every setting of a reproduce run (the defaults are the full run).

    Grids are tuples of N (workers), K (inputs per batch), S (stragglers) and
    p (straggling probability). ``rounds`` is batches per cell for random
    stragglers; adversarial cells use ``worst_rounds`` (each costs O(S N)
    decodes). LCC assumes f has degree ``lcc_degree`` and runs only where
    enough workers can return for it.
    """

    schemes: tuple = ("gcc", "letcc", "bacc", "lcc", "replication")
    lcc_degree: int = 1
    seed: int = 0
    rate_workload: str = "xsinx"
    rate_K: int = 4
    rate_S: int = 2
    rate_Ns: tuple = (16, 24, 32, 48, 64, 96, 128)
    stragglers_workload: str = "lenet5"
    stragglers_N: int = 32
    stragglers_K: int = 8
    stragglers_Ss: tuple = (0, 2, 4, 6, 8, 12, 16)
    bernoulli_workload: str = "xsinx"
    bernoulli_K: int = 4
    bernoulli_ps: tuple = (0.05, 0.1, 0.2)
    bernoulli_Ns: tuple = (16, 24, 32, 48, 64, 96, 128)
    dnn_models: tuple = ("lenet5", "convnet", "vit", "lenet5-mnist", "minilm")
    dnn_settings: tuple = ((12, 4, 3), (16, 4, 8), (32, 8, 4), (32, 8, 16))  # (N, K, S)
    rounds: int = 40
    worst_rounds: int = 8
    dnn_rounds: int = 100

    @classmethod
    def quick(cls) -> "ReproduceConfig":
        """A small version: a few minutes on 2 cores."""
        return cls(rate_Ns=(16, 24, 32, 48, 64), stragglers_N=16, stragglers_K=4, stragglers_Ss=(0, 2, 4, 8),
                   bernoulli_ps=(0.1, 0.2), bernoulli_Ns=(16, 24, 32, 48, 64), dnn_models=("lenet5", "minilm"),
                   dnn_settings=((12, 4, 3), (16, 4, 8)), rounds=12, worst_rounds=3, dnn_rounds=20)

    def to_dict(self) -> dict:
        return asdict(self)


# -- cells --------------------------------------------------------------------
@dataclass
class _Cell:
    sweep: str
    workload: str
    N: int
    K: int
    scheme: str
    stragglers: str  # "random", "worst" or "bernoulli"
    S: int | None = None
    p: float | None = None
    rounds: int = 1
    seed: int = 0
    degree: int | None = None  # LCC's assumed degree of f; None for the other schemes

    @property
    def key(self) -> str:
        return json.dumps([CELL_VERSION, self.sweep, self.workload, self.N, self.K, self.scheme, self.stragglers,
                           self.S, self.p, self.rounds, self.seed, self.degree])

    @property
    def setting_seed(self) -> int:
        # same seed for every scheme of a setting: same batches, same draws
        return zlib.crc32(json.dumps([self.seed, self.sweep, self.workload, self.N, self.K, self.stragglers,
                                      self.S, self.p]).encode())

    def straggler_model(self):
        if self.stragglers == "random":
            return st.RandomStragglers(self.S)
        if self.stragglers == "worst":
            return st.WorstCaseStragglers(self.S)
        return st.BernoulliStragglers(self.p)


# Part of every cell's key: bump it when a cell's result changes meaning (a
# metric's definition, a scheme's default), so a resumed run recomputes.
CELL_VERSION = 2


def _applicable(scheme, cell) -> bool:
    if cell.S is None:
        return scheme.n_workers >= scheme.min_returns
    return cell.N - cell.S >= scheme.min_returns


def _cells(cfg: ReproduceConfig, sweep: str):
    seed = cfg.seed
    out = []

    def add(workload, N, K, kind, S=None, p=None, rounds=cfg.rounds):
        for name in cfg.schemes:
            rounds_ = cfg.worst_rounds if kind == "worst" else rounds
            out.append(_Cell(sweep, workload, N, K, name, kind, S, p, rounds_, seed,
                             cfg.lcc_degree if name == "lcc" else None))

    if sweep == "rate":
        for kind in STRAGGLER_KINDS:
            for N in cfg.rate_Ns:
                add(cfg.rate_workload, N, cfg.rate_K, kind, S=cfg.rate_S)
    elif sweep == "stragglers":
        for kind in STRAGGLER_KINDS:
            for S in cfg.stragglers_Ss:
                add(cfg.stragglers_workload, cfg.stragglers_N, cfg.stragglers_K, kind, S=S)
    elif sweep == "bernoulli":
        for p in cfg.bernoulli_ps:
            for N in cfg.bernoulli_Ns:
                add(cfg.bernoulli_workload, N, cfg.bernoulli_K, "bernoulli", p=p)
    elif sweep == "dnn":
        for model in cfg.dnn_models:
            for N, K, S in cfg.dnn_settings:
                add(model, N, K, "random", S=S, rounds=cfg.dnn_rounds)
    else:
        raise ValueError(f"sweep must be one of {SWEEPS}, got {sweep!r}")
    return out


def _run_cell(cell: _Cell) -> dict | None:
    """One scheme at one setting: a result row, or None where it does not apply."""
    if cell.scheme == "lcc" and cell.N < (cell.K - 1) * cell.degree + 1:
        return None
    scheme = build_schemes([cell.scheme], cell.K, cell.N, cell.degree or 1)[0]
    if not _applicable(scheme, cell):
        return None
    wl = get(cell.workload)
    ev = evaluate(wl.f, scheme, wl.X, cell.straggler_model(), rounds=cell.rounds, seed=cell.setting_seed,
                  task=wl.harness_task)
    row = {"workload": cell.workload, "scheme": cell.scheme, "N": cell.N, "K": cell.K,
           "stragglers": cell.stragglers, "S": cell.S, "p": cell.p, "rounds": cell.rounds}
    for name, summ in ev.metrics.items():
        row[name] = None if summ is None else summ.mean
        row[f"{name}_std"] = None if summ is None else summ.std
        row[f"{name}_ci95"] = None if summ is None else (summ.ci_high - summ.ci_low) / 2
    row.update(failures=ev.failures, missing_rate=ev.missing_rate, returned=ev.returned_mean)
    return row


class _Store:
    """Append-only cell results of one sweep: ``cells.jsonl``, one JSON per line."""

    def __init__(self, path: Path, resume: bool):
        self.path = path
        self.done: dict[str, dict | None] = {}
        path.parent.mkdir(parents=True, exist_ok=True)
        if resume and path.exists():
            for line in path.read_text().splitlines():
                try:
                    rec = json.loads(line)
                    self.done[rec["key"]] = rec["row"]
                except (json.JSONDecodeError, KeyError):  # a line cut short by an interrupt
                    continue
        elif path.exists():
            path.unlink()

    def add(self, key: str, row):
        self.done[key] = row
        with self.path.open("a") as fh:
            fh.write(json.dumps({"key": key, "row": _jsonable(row)}) + "\n")


def _jsonable(row):
    if row is None:
        return None
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}


# -- analysis -------------------------------------------------------------------
def fit_slope(x, y) -> float:
    """Least-squares slope of log(y) against log(x) over the finite positive
    points; NaN when fewer than three."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    if ok.sum() < 3:
        return float("nan")
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0])


def _series(rows, group, x="N", y="mse"):
    out = {}
    for r in rows:
        out.setdefault(tuple(r[g] for g in group), []).append((r[x], r.get(y)))
    return {k: sorted(v) for k, v in out.items()}


def _slopes(rows, by):
    table = []
    for (variant, scheme), pts in _series(rows, (by, "scheme")).items():
        xs = [p[0] for p in pts]
        ys = [np.nan if p[1] is None else p[1] for p in pts]
        table.append({by: variant, "scheme": scheme, "slope": fit_slope(xs, ys),
                      "points": int(np.sum(np.isfinite(ys) & (np.asarray(ys) > 0)))})
    return table


def _reference(Ns, anchor_N, anchor_y, shape):
    """A reference curve ``c * shape(N)`` through (anchor_N, anchor_y)."""
    Ns = np.asarray(Ns, dtype=np.float64)
    return anchor_y / shape(anchor_N) * np.array([shape(n) for n in Ns])


# -- plots ----------------------------------------------------------------------
def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


_STYLE = {"gcc": ("C3", "o"), "letcc": ("C0", "s"), "bacc": ("C2", "^"), "lcc": ("C4", "v"),
          "replication": ("C7", "x")}


def _loglog_panel(ax, rows, slopes, key, ref_shape, ref_label, title):
    anchor = None
    for scheme in _STYLE:
        pts = [(r["N"], r["mse"]) for r in rows if r["scheme"] == scheme and r.get("mse")]
        pts = sorted(p for p in pts if p[1] and p[1] > 0)
        if not pts:
            continue
        slope = next((s["slope"] for s in slopes if s["scheme"] == scheme and s[key[0]] == key[1]), float("nan"))
        color, marker = _STYLE[scheme]
        ax.loglog(*zip(*pts), marker=marker, color=color, label=f"{scheme} (slope {slope:.2f})")
        if scheme == "gcc":
            anchor = pts[0]
    if anchor is not None:
        Ns = sorted({r["N"] for r in rows})
        ax.loglog(Ns, _reference(Ns, *anchor, ref_shape), "k--", lw=1, label=ref_label)
    ax.set_xlabel("N (workers)")
    ax.set_ylabel("MSE")
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)


def _plot_rate(rows, slopes, cfg, path):
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    S = cfg.rate_S
    for ax, kind in zip(axes, STRAGGLER_KINDS):
        _loglog_panel(ax, [r for r in rows if r["stragglers"] == kind], slopes, ("stragglers", kind),
                      lambda n: S**3 / n**3, "S^3 N^-3 reference",
                      f"{cfg.rate_workload}, K={cfg.rate_K}, S={S}, {kind} stragglers")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _plot_bernoulli(rows, slopes, cfg, path):
    plt = _plt()
    ps = cfg.bernoulli_ps
    fig, axes = plt.subplots(1, len(ps), figsize=(5.2 * len(ps), 4.2), squeeze=False)
    for ax, p in zip(axes[0], ps):
        _loglog_panel(ax, [r for r in rows if r["p"] == p], slopes, ("p", p),
                      lambda n, p=p: (math.log(n) / math.log(1 / p)) ** 3 / n**3, "log_{1/p}^3(N) N^-3 reference",
                      f"{cfg.bernoulli_workload}, K={cfg.bernoulli_K}, Bernoulli p={p}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _plot_stragglers(rows, cfg, path):
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for scheme, (color, marker) in _STYLE.items():
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
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _plot_dnn(rows, cfg, path):
    plt = _plt()
    models = list(dict.fromkeys(r["workload"] for r in rows))
    if not models:
        return
    fig, axes = plt.subplots(1, len(models), figsize=(4.6 * len(models), 4), squeeze=False)
    for ax, model in zip(axes[0], models):
        mrows = [r for r in rows if r["workload"] == model]
        metric = "accuracy" if any(r.get("accuracy") is not None for r in mrows) else "cosine"
        settings = list(dict.fromkeys((r["N"], r["K"], r["S"]) for r in mrows))
        schemes = [s for s in cfg.schemes if any(r["scheme"] == s for r in mrows)]
        width = 0.8 / max(len(schemes), 1)
        for j, scheme in enumerate(schemes):
            vals, errs = [], []
            for s in settings:
                r = next((r for r in mrows if r["scheme"] == scheme and (r["N"], r["K"], r["S"]) == s), None)
                vals.append(np.nan if r is None or r.get(metric) is None else r[metric])
                errs.append(0 if r is None or r.get(f"{metric}_ci95") is None else r[f"{metric}_ci95"])
            ax.bar(np.arange(len(settings)) + j * width, vals, width, yerr=errs, capsize=2,
                   color=_STYLE.get(scheme, ("C9", "o"))[0], label=scheme)
        ax.set_xticks(np.arange(len(settings)) + 0.4 - width / 2)
        ax.set_xticklabels([f"N={n}\nK={k} S={s}" for n, k, s in settings], fontsize=7)
        ax.set_ylabel(("relative accuracy" if metric == "accuracy" else "cosine similarity") + " (bars: 95% CI)")
        ax.set_ylim(max(0.0, np.nanmin([r.get(metric) or 1 for r in mrows]) - 0.15), 1.01)
        ax.set_title(model, fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# -- the run --------------------------------------------------------------------
_COLUMNS = {
    "rate": ["stragglers", "N", "K", "S", "scheme", "mse", "mse_ci95", "max_error", "missing_rate", "failures"],
    "stragglers": ["stragglers", "N", "K", "S", "scheme", "mse", "rmse", "accuracy", "accuracy_std",
                   "missing_rate", "failures"],
    "bernoulli": ["p", "N", "K", "scheme", "mse", "mse_ci95", "returned", "missing_rate", "failures"],
    "dnn": ["workload", "N", "K", "S", "scheme", "rmse", "rmse_std", "accuracy", "accuracy_std", "cosine",
            "cosine_std", "missing_rate", "failures"],
}


def _analyse(sweep, rows, cfg, folder: Path) -> dict:
    cols = [c for c in _COLUMNS[sweep] if any(r.get(c) is not None for r in rows)]
    result = {"sweep": sweep, "rows": rows}
    tables = [format_table(rows, cols, title=f"== {sweep} ==")]
    if sweep in ("rate", "bernoulli"):
        by = "stragglers" if sweep == "rate" else "p"
        slopes = _slopes([r for r in rows if r["scheme"] != "replication"], by)
        result["slopes"] = slopes
        ref = "S^3 N^-3 -> slope -3" if sweep == "rate" else "log^3(N) N^-3 -> slope a little above -3"
        tables.append(format_table(slopes, title=f"fitted log-log slopes of MSE against N (reference {ref})"))
        write_csv(slopes, folder / "slopes.csv")
        (_plot_rate if sweep == "rate" else _plot_bernoulli)(rows, slopes, cfg, folder / f"{sweep}.png")
    elif sweep == "stragglers":
        _plot_stragglers(rows, cfg, folder / "stragglers.png")
    else:
        _plot_dnn(rows, cfg, folder / "dnn.png")
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
        Sweep name -> ``{"rows", "slopes" (rate, bernoulli), "table"}``.
    """
    bad = [s for s in sweeps if s not in SWEEPS]
    if bad or not sweeps:
        raise ValueError(f"sweeps must be a non-empty subset of {SWEEPS}, got {list(sweeps)}")
    cfg = config or (ReproduceConfig.quick() if quick else ReproduceConfig())
    out = Path(out)
    plan = {s: _cells(cfg, s) for s in sweeps}
    stores = {s: _Store(out / s / "cells.jsonl", resume) for s in sweeps}
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
                store.add(cell.key, _run_cell(cell))
                if bar is not None:
                    bar.update(1)
            rows = [store.done[c.key] for c in plan[sweep] if store.done.get(c.key) is not None]
            results[sweep] = _analyse(sweep, rows, cfg, out / sweep)
    finally:
        if bar is not None:
            bar.close()
    for sweep, res in results.items():
        echo(res["table"])
        echo("")
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
    echo(f"wrote {out}/<sweep>/ (csv, json, png) and {out / 'reproduce.json'}")
    return results
