"""End-to-end batch latency on real workers: uncoded, replication and coded.

    python benchmarks/bench_latency.py                     # 1000 batches per run
    python benchmarks/bench_latency.py --batches 200 --out results/bench_latency

One model, one N, one injected straggler distribution, in one run:

* ``uncoded-clean``: K workers, no stragglers: the baseline of every ratio;
* ``uncoded``: K workers, wait for all;
* ``replication``: N workers, N/K copies, first copy of each input wins;
* ``gcc`` / ``bacc`` / ``letcc``: N workers, wait for the fastest N - S (LeTCC at its best
  ridges from ``gencc.experiments.peers.LETCC_GRID``, tuned on 20 calibration batches).

Batches go one at a time, so a wall time is the latency of a batch on an idle
pool (encode, dispatch, gather, decode). Reported: p50, p99 and p99.9 as ratios
to ``uncoded-clean``, and the agreement of the answers' argmax with f. Then the
runtime's own overhead with no stragglers: throughput of ``map`` (4 batches in
flight) with GCC waiting for all N, against calling f directly on each batch
of K inputs in this process.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from gencc import stragglers as st  # noqa: E402
from gencc.experiments.latency import latency_summary, run_batches  # noqa: E402
from gencc.experiments.peers import LETCC_GRID, best_letcc  # noqa: E402
from gencc.report import format_table, write_csv, write_json  # noqa: E402
from gencc.runtime import CodedExecutor, Faults  # noqa: E402
from gencc.schemes import BACC, GCC, Replication, Uncoded  # noqa: E402
from gencc.workloads import WorkloadFactory, get  # noqa: E402

LATENCIES = {
    "slow-nodes": lambda base: st.SlowNodes(base=base, fraction=0.05, slowdown=10.0),
    "exponential": lambda base: st.ShiftedExponential(shift=base, rate=1.0 / base),
    "pareto": lambda base: st.Pareto(scale=base, shape=2.5),
}


def overhead(model, f, X, K, N, batches):
    """Seconds per batch: direct f(X_batch) against CodedExecutor.map (no stragglers)."""
    Xb = X[: batches * K]
    direct = []
    for b in range(batches):
        t = time.perf_counter()
        f(Xb[b * K:(b + 1) * K])
        direct.append(time.perf_counter() - t)
    with CodedExecutor(model, GCC(K, N), timeout=30) as ex:
        list(ex.map(Xb[:K * 4]))  # warm up the workers
        t = time.perf_counter()
        n = sum(1 for _ in ex.map(Xb))
        mapped = (time.perf_counter() - t) / (n / K)
    return float(np.median(direct)), mapped


def plot(runs, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for name, walls in runs.items():
        w = np.sort(walls)
        ax1.step(w, np.arange(1, w.size + 1) / w.size, where="post", label=name)
        ax2.loglog(w, 1.0 - np.arange(w.size) / w.size, label=name)
    ax1.set(xlabel="batch latency (s)", ylabel="fraction of batches", title="CDF")
    ax2.set(xlabel="batch latency (s)", ylabel="fraction of batches slower (tail)", title="tail, log-log")
    for ax in (ax1, ax2):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", default="lenet5")
    ap.add_argument("-K", type=int, default=4)
    ap.add_argument("-N", type=int, default=12)
    ap.add_argument("-S", type=int, default=3, help="coded schemes wait for the fastest N - S")
    ap.add_argument("--latency", choices=sorted(LATENCIES), default="slow-nodes")
    ap.add_argument("--base", type=float, default=0.02, help="typical task time of the latency model, seconds")
    ap.add_argument("--batches", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="results/bench_latency", help="folder for json, csv and png")
    args = ap.parse_args()
    K, N, S = args.K, args.N, args.S
    wl = get(args.workload)
    model = WorkloadFactory(args.workload)
    rng = np.random.default_rng(args.seed)
    X = wl.X[rng.choice(len(wl.X), size=args.batches * K, replace=args.batches * K > len(wl.X))]
    truth = wl.f(X).reshape(len(X), -1)
    latency = LATENCIES[args.latency](args.base)
    faults = Faults(latency=latency, seed=args.seed)
    clean = Faults(latency=st.SlowNodes(base=args.base, fraction=0.0, jitter=0.05), seed=args.seed)
    # LeTCC at its best ridges from LETCC_GRID, tuned on calibration batches of another seed, S random stragglers
    letcc, letcc_params = best_letcc(wl.f, K, N, wl.X, st.RandomStragglers(S), LETCC_GRID, rounds=20,
                                     seed=args.seed + 1)
    runs_spec = [("uncoded-clean", Uncoded(K), clean, None), ("uncoded", Uncoded(K), faults, None),
                 ("replication", Replication(K, N), faults, None), ("gcc", GCC(K, N), faults, N - S),
                 ("bacc", BACC(K, N), faults, N - S), ("letcc", letcc, faults, N - S)]
    rows, walls = [], {}
    for name, scheme, fl, n_wait in runs_spec:
        run = run_batches(model, scheme, X, faults=fl, n_wait=n_wait, progress=True, desc=name)
        walls[name] = run.walls
        est = run.outputs.reshape(len(X), -1)
        ok = run.answered
        agree = np.where(ok, np.nan_to_num(est).argmax(1) == truth.argmax(1), False)
        rows.append({"run": name, "params": letcc_params if name == "letcc" else None, "workers": scheme.n_workers,
                     "wait_for": n_wait or "all/first copy",
                     **latency_summary(run.walls), "agreement": float(agree.mean()),
                     "rel_mse": float(np.mean((est[ok] - truth[ok]) ** 2) / np.mean(truth**2)) if ok.any() else None,
                     "failed_batches": run.failed, "encode_ms": 1e3 * float(run.encode.mean()),
                     "decode_ms": 1e3 * float(run.decode.mean())})
        print(f"  {name}: p99 {rows[-1]['p99_s']:.3f} s", flush=True)
    base = rows[0]
    for r in rows:
        for q in ("p50", "p99", "p999"):
            r[f"{q}_ratio"] = r[f"{q}_s"] / base[f"{q}_s"]
        r["agreement_ratio"] = r["agreement"] / base["agreement"]
    direct, mapped = overhead(model, wl.f, X, K, N, min(args.batches, 200))
    over = {"direct_f_ms_per_batch": 1e3 * direct, "gcc_map_ms_per_batch": 1e3 * mapped, "ratio": mapped / direct}
    title = (f"{args.workload}, K={K}, N={N}, coded wait for N-{S}, latency {latency!r}, "
             f"{args.batches} batches per run")
    cols = ["run", "params", "workers", "wait_for", "p50_s", "p99_s", "p999_s", "p50_ratio", "p99_ratio", "p999_ratio",
            "agreement", "agreement_ratio", "rel_mse", "encode_ms", "decode_ms", "failed_batches"]
    print(format_table(rows, cols, title=title + "\n(ratios: to uncoded-clean, K workers without stragglers)"))
    print(format_table([over], title="runtime overhead, no stragglers: GCC map (all N) vs f called directly"))
    os.makedirs(args.out, exist_ok=True)
    settings = vars(args) | {"latency_model": repr(latency), "letcc_grid": LETCC_GRID}
    write_json({"settings": settings, "rows": rows, "overhead": over},
               os.path.join(args.out, "bench_latency.json"))
    write_csv(rows, os.path.join(args.out, "bench_latency.csv"), cols)
    plot(walls, os.path.join(args.out, "bench_latency.png"), title)
    print(f"wrote {args.out}/bench_latency.(json|csv|png)")


if __name__ == "__main__":
    main()
