"""`gencc demo`: a trained digit classifier on real worker processes with
injected stragglers, GCC against its peers and uncoded execution."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..report import format_table, write_csv, write_json
from ..runtime import Faults
from ..schemes import BACC, GCC, Replication, Uncoded
from ..stragglers import RandomStragglers, SlowNodes
from ..workloads import WorkloadFactory, get
from .latency import latency_summary, run_batches
from .peers import LETCC_GRID, best_letcc

__all__ = ["run_demo"]


def run_demo(out="gencc-demo", batches=None, seed=0, workload="lenet5", K=4, N=12, progress=True) -> int:
    """Run the demo; writes demo.json, demo.csv and demo.png into ``out``."""
    wl = get(workload)
    batches = batches or 60
    rng = np.random.default_rng(seed)
    idx = rng.choice(len(wl.X), size=batches * K, replace=batches * K > len(wl.X))
    X, labels = wl.X[idx], wl.labels[idx]
    truth = wl.f(X)
    # one task in twenty lands on a slow node, ten times slower: the tail that coding should cut
    latency = SlowNodes(base=0.05, fraction=0.05, slowdown=10.0)
    S = N // 4
    # LeTCC at its best ridges from LETCC_GRID, tuned on calibration batches of another seed
    letcc, letcc_params = best_letcc(wl.f, K, N, wl.X, RandomStragglers(S), LETCC_GRID,
                                     rounds=max(2, batches // 4), seed=seed + 1)
    schemes = [("uncoded", Uncoded(K), {}), ("replication", Replication(K, N), {}),
               ("gcc", GCC(K, N), {"n_wait": N - S}), ("bacc", BACC(K, N), {"n_wait": N - S}),
               ("letcc", letcc, {"n_wait": N - S})]
    rows, lat = [], {}
    for name, scheme, kw in schemes:
        run = run_batches(WorkloadFactory(workload), scheme, X, faults=Faults(latency=latency, seed=seed),
                          timeout=30, desc=name, **kw)
        pred = np.where(run.answered, np.nan_to_num(run.outputs).argmax(1), -1)  # unanswered: wrong
        lat[name] = run.walls
        rows.append({
            "scheme": name, "params": letcc_params if name == "letcc" else None, "workers": scheme.n_workers,
            "wait_for": kw.get("n_wait", "all/first copy"),
            "agreement_with_f": float(np.mean(pred == truth.argmax(1))),
            "accuracy_vs_labels": float(np.mean(pred == labels)),
            **latency_summary(run.walls), "failed_batches": run.failed, "startup_s": run.startup_s,
        })
        if progress:
            print(f"  {name}: done ({batches} batches)", flush=True)
    base = rows[0]["p99_s"]
    for r in rows:
        r["p99_vs_uncoded"] = r["p99_s"] / base
    out = Path(out)
    title = (f"gencc demo: {workload} (test accuracy {wl.info.get('test_accuracy', float('nan')):.3f}), "
             f"K={K}, N={N}, wait for N-{S}, slow nodes 5% x10, {batches} batches")
    cols = ["scheme", "params", "workers", "wait_for", "agreement_with_f", "accuracy_vs_labels", "mean_s", "p50_s",
            "p95_s", "p99_s", "p99_vs_uncoded", "failed_batches"]
    print(format_table(rows, cols, title=title))
    write_json({"settings": {"workload": workload, "K": K, "N": N, "S": S, "batches": batches, "seed": seed,
                             "latency": repr(latency), "letcc_grid": LETCC_GRID}, "rows": rows}, out / "demo.json")
    write_csv(rows, out / "demo.csv", cols)
    _plot(lat, out / "demo.png", title)
    print(f"wrote {out / 'demo.json'}, {out / 'demo.csv'}, {out / 'demo.png'}")
    return 0


def _plot(lat, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.boxplot(list(lat.values()), tick_labels=list(lat), whis=(0, 100))
    ax.set_ylabel("batch latency (s)")
    ax.set_title(title, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
