"""`gencc demo`: a trained digit classifier on real worker processes with
injected stragglers, GCC against its peers and uncoded execution."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ..report import format_table, write_csv, write_json
from ..runtime import CodedExecutor, Faults
from ..schemes import BACC, GCC, LeTCC, Replication, Uncoded
from ..stragglers import SlowNodes
from ..workloads import WorkloadFactory, get

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
    schemes = [("uncoded", Uncoded(K), {}), ("replication", Replication(K, N), {}),
               ("gcc", GCC(K, N), {"n_wait": N - S}), ("bacc", BACC(K, N), {"n_wait": N - S}),
               ("letcc", LeTCC(K, N), {"n_wait": N - S})]
    rows, lat = [], {}
    for name, scheme, kw in schemes:
        t0 = time.monotonic()
        with CodedExecutor(WorkloadFactory(workload), scheme, timeout=30,
                           faults=Faults(latency=latency, seed=seed), **kw) as ex:
            start = time.monotonic() - t0
            results = [ex.submit(X[b * K:(b + 1) * K]).result(timeout=60) for b in range(batches)]
        est = np.concatenate([r.outputs for r in results])
        walls = np.array([r.wall_time for r in results])
        lat[name] = walls
        rows.append({
            "scheme": name, "workers": scheme.n_workers, "wait_for": kw.get("n_wait", "all/first copy"),
            "agreement_with_f": float(np.mean(est.argmax(1) == truth.argmax(1))),
            "accuracy_vs_labels": float(np.mean(est.argmax(1) == labels)),
            "mean_s": float(walls.mean()), "p50_s": float(np.percentile(walls, 50)),
            "p95_s": float(np.percentile(walls, 95)), "p99_s": float(np.percentile(walls, 99)),
            "startup_s": start,
        })
        if progress:
            print(f"  {name}: done ({batches} batches)", flush=True)
    base = rows[0]["p99_s"]
    for r in rows:
        r["p99_vs_uncoded"] = r["p99_s"] / base
    out = Path(out)
    title = (f"gencc demo: {workload} (test accuracy {wl.info.get('test_accuracy', float('nan')):.3f}), "
             f"K={K}, N={N}, wait for N-{S}, slow nodes 5% x10, {batches} batches")
    cols = ["scheme", "workers", "wait_for", "agreement_with_f", "accuracy_vs_labels", "mean_s", "p50_s",
            "p95_s", "p99_s", "p99_vs_uncoded"]
    print(format_table(rows, cols, title=title))
    write_json({"settings": {"workload": workload, "K": K, "N": N, "S": S, "batches": batches, "seed": seed,
                             "latency": repr(latency)}, "rows": rows}, out / "demo.json")
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
