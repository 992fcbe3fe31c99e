"""`gencc demo`: at a given number of extra workers, which scheme gives the best answers soonest?

A trained digit classifier (LeNet-5, K = 4 inputs a batch) runs on real worker
processes with injected slow nodes (5% of tasks 10x slower). For each number
of extra workers E (N = K + E), every scheme serves the same batches under the
same injected latencies: replication on the same N workers, systematic GCC,
GCC, BACC and LeTCC at its best ridges, ParM where E = 1 (its only setting),
and uncoded execution on K workers. Reported: agreement of the answers' argmax
with f, the share of answers that are f's own output (a returned copy or
systematic worker), and batch latency (p50, p99, and p99 against uncoded).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..report import format_table, write_csv, write_json
from ..runtime import Faults
from ..schemes import BACC, GCC, Replication, Uncoded
from ..stragglers import RandomStragglers, SlowNodes
from ..workloads import WorkloadFactory, get
from ..workloads.parity import parm_for_workload
from .latency import latency_summary, run_batches
from .peers import LETCC_GRID, best_letcc

__all__ = ["run_demo", "EXTRA_WORKERS"]

EXTRA_WORKERS = (1, 2, 4, 8)
COLUMNS = ["extra", "N", "scheme", "wait_for", "agreement_with_f", "exact_share", "p50_s", "p95_s", "p99_s",
           "p95_vs_uncoded", "p99_vs_uncoded", "failed_batches", "params"]


def _wait_for(E: int) -> int:
    """Stragglers the coded schemes wait out: a quarter of the workers, at most E."""
    return max(1, min(E, (4 + E) // 4))


def _schemes(wl, K, E, batches, seed):
    """(name, scheme, n_wait, params) for E extra workers."""
    N = K + E
    S = _wait_for(E)
    letcc, letcc_params = best_letcc(wl.f, K, N, wl.X, RandomStragglers(S), LETCC_GRID,
                                     rounds=max(2, batches // 8), seed=seed + 1)
    out = [("replication", Replication(K, N), None, ""),
           ("gcc-systematic", GCC(K, N, worker_points="systematic"), N - S, ""),
           ("gcc", GCC(K, N), N - S, ""),
           ("bacc", BACC(K, N), N - S, ""),
           ("letcc", letcc, N - S, letcc_params)]
    if E == 1:
        try:
            out.append(("parm", parm_for_workload(wl.name, K), None, "trained parity model"))
        except (FileNotFoundError, ValueError):  # no parity checkpoint for this workload and K
            pass
    return out


def run_demo(out="gencc-demo", batches=None, seed=0, workload="lenet5", K=4, extra=EXTRA_WORKERS,
             progress=True) -> int:
    """Run the demo; writes demo.json, demo.csv and demo.png into ``out``.

    Parameters
    ----------
    out : str or Path
    batches : int, optional
        Batches per run (default 100).
    seed : int
    workload : str
        A classifier of :mod:`gencc.workloads`.
    K : int
    extra : sequence of int
        Numbers of extra workers E; each run has N = K + E workers.
    progress : bool

    Returns
    -------
    int
        0.
    """
    wl = get(workload)
    batches = batches or 100
    rng = np.random.default_rng(seed)
    idx = rng.choice(len(wl.X), size=batches * K, replace=batches * K > len(wl.X))
    X = wl.X[idx]
    truth = wl.f(X).argmax(1)
    latency = SlowNodes(base=0.02, fraction=0.05, slowdown=10.0)
    faults = Faults(latency=latency, seed=seed)  # the same draws for every scheme of a setting
    model = WorkloadFactory(workload)
    rows, runs = [], {}

    def measure(E, name, scheme, n_wait, params):
        run = run_batches(model, scheme, X, faults=faults, n_wait=n_wait, timeout=30, desc=name)
        pred = np.where(run.answered, np.nan_to_num(run.outputs).argmax(1), -1)  # unanswered: wrong
        runs[(E, name)] = run.walls
        rows.append({"extra": E, "N": scheme.n_workers, "scheme": name,
                     "wait_for": n_wait or {"uncoded": "all", "parm": f"any {K} of {K + 1}"}.get(name, "first copy"),
                     "agreement_with_f": float(np.mean(pred == truth)),
                     "exact_share": float(np.mean(run.exact)), **latency_summary(run.walls),
                     "failed_batches": run.failed, "params": params})
        if progress:
            print(f"  E={E} {name}: agreement {rows[-1]['agreement_with_f']:.3f}, "
                  f"p99 {rows[-1]['p99_s']:.3f} s", flush=True)

    measure(0, "uncoded", Uncoded(K), None, "")
    for E in extra:
        for name, scheme, n_wait, params in _schemes(wl, K, E, batches, seed):
            measure(E, name, scheme, n_wait, params)
    for r in rows:
        r["p95_vs_uncoded"] = r["p95_s"] / rows[0]["p95_s"]
        r["p99_vs_uncoded"] = r["p99_s"] / rows[0]["p99_s"]
        r["wait_for"] = str(r["wait_for"])
    out = Path(out)
    title = (f"gencc demo: {workload} (test accuracy {wl.info.get('test_accuracy', float('nan')):.3f}), K={K}, "
             f"slow nodes 5% x10, {batches} batches a run; coded schemes wait out min(E, N/4) stragglers")
    print(format_table(rows, COLUMNS, title=title))
    write_json({"settings": {"workload": workload, "K": K, "extra": list(extra), "batches": batches,
                             "seed": seed, "latency": repr(latency), "letcc_grid": LETCC_GRID},
                "rows": rows}, out / "demo.json")
    write_csv(rows, out / "demo.csv", COLUMNS)
    _plot(rows, out / "demo.png", title)
    print(f"wrote {out / 'demo.json'}, {out / 'demo.csv'}, {out / 'demo.png'}")
    return 0


_STYLE = {"uncoded": ("k", "*"), "replication": ("C7", "x"), "gcc-systematic": ("C1", "D"), "gcc": ("C3", "o"),
          "bacc": ("C2", "^"), "letcc": ("C0", "s"), "parm": ("C4", "P")}


def _plot(rows, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, (color, marker) in _STYLE.items():
        pts = sorted((r["extra"], r["agreement_with_f"], r["exact_share"], r["p95_s"], r["p99_s"]) for r in rows
                     if r["scheme"] == name)
        if not pts:
            continue
        E, agree, exact, p95, p99 = zip(*pts)
        solid, dotted = ("none", "none") if len(pts) == 1 else ("-", ":")
        axes[0].plot(E, agree, marker=marker, color=color, ls=solid, label=name)
        axes[0].plot(E, exact, marker=marker, color=color, ls=dotted, alpha=0.5)
        axes[1].plot(E, p95, marker=marker, color=color, ls=solid, label=name)
        axes[1].plot(E, p99, marker=marker, color=color, ls=dotted, alpha=0.5)
    axes[0].set(xlabel="extra workers E (N = K + E)", ylabel="agreement with f (solid); exact share (dotted)")
    axes[1].set(xlabel="extra workers E (N = K + E)", ylabel="batch latency, s: p95 (solid), p99 (dotted)")
    for ax in axes:
        ax.grid(True, alpha=0.3)
    axes[1].set_yscale("log")
    axes[0].legend(fontsize=7)
    fig.suptitle(title, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
