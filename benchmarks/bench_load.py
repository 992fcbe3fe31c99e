"""Serving under load: open-loop Poisson arrivals through ``submit_one``, every scheme, one process.

    python benchmarks/bench_load.py --quick                      # a few minutes: 1.25x workers, slow nodes
    python benchmarks/bench_load.py --quick --backend ray        # the same on Ray (loopback)
    python benchmarks/bench_load.py                              # full: 1.25x/1.5x/2x, three straggler processes

Offered loads are fractions (default 30%, 50%, 70%) of the capacity measured
at the start: inputs per second that uncoded on K workers serves with full
micro-batches and no stragglers. Each task's time is an injected ``--base``
seconds (a stand-in for a heavier f; lenet5 itself takes about 1 ms) plus
the straggler process (``gencc.experiments.load``); ``--task-time cpu``
spends ``--base`` as CPU work on the worker instead of a sleep, so that a CPU
hog (``--stragglers cpu-hog``) slows the worker sharing its core and every
redundant task costs core time. Schemes, all at N =
factor x K workers except ``uncoded`` (K workers):

* ``uncoded``: Uncoded(K), waits for all K; ``uncoded-clean`` is the same
  without stragglers, the baseline of the ratios;
* ``replication``: Replication(K, N), first copy of each input wins;
* ``hedged``: HedgedExecutor on N workers, one copy per request, a backup
  after the adaptive p80 and, in another row, p95 of observed latencies
  (Dean and Barroso); ratios use the better of the two in each cell;
* ``gcc-cal``: GCC with one fixed decoder chosen by ``GCC.calibrate`` on
  held-out batches (S = N - K random stragglers, 5 rounds per configuration):
  the same coding, cheaper decodes than the adaptive ``gcc``;
* ``gcc-sys`` / ``gcc`` / ``bacc`` / ``letcc``: coded, decoding at the adaptive
  deadline (1 x the p90 of recent task latencies, clipped to [0.5, 10] x
  base) from whatever arrived (at least K); systematic GCC answers each
  input as soon as its own worker returns; LeTCC at its best ridges from
  ``gencc.experiments.peers.LETCC_GRID`` (S = N - K random stragglers, 5
  calibration rounds);
* ``gcc-sys-direct``: ``gcc-sys`` with ``direct_dispatch=True``: each
  systematic task is sent as soon as its input's B requests are in, not
  when the batch fills or its window expires (parity tasks still wait), or,
  padded, once its first request has waited the column window
  (``--column-windows``, in units of B / rate, the fill time of a hedged
  group of B: the same wait; ``none``: until the batch closes);
* ``gcc-sys-any``: systematic GCC that, at the deadline, decodes from as few
  as K - 1 returns instead of waiting for the K-th (``n_min = K - 1``): the
  late inputs get a less accurate answer, sooner; ``gcc-sys-direct-any``:
  both;
* ``parm``: parm_for_workload(workload, K), only where N = K + 1; it
  decodes once any K of the K + 1 returned (every input answerable), not
  at the deadline from fewer.

Latency quantiles count a failed or lost request as infinitely late (a
tail over the answered requests alone would hide them).

Settings: ``--deadline-factors`` is a grid of the coded schemes' deadline
factor and ``--hedge-qs`` one of hedged requests' backup quantile; each
setting is a row (its ``params``; ``--hedge-copies`` adds hedging's copies
per request to its grid; ``--placements`` gives every scheme but
``uncoded-clean`` both task placements, ``pinned`` and ``pull``), and
``p999/hedged`` divides by hedging's
best p99.9 in the same cell. p99.9 over one run is its second-slowest answer
or so: run several ``--seed`` values and combine them with
``benchmarks/load_seeds.py`` (medians over seeds).
Every scheme sees the same arrival times and the same per-worker straggler
draws (seeded); every request is counted: answered, explicit error, or lost
(must be 0). Each executor first serves ``--warmup`` requests (default 100,
not measured, on straggler draws of their own) so that its adaptive deadline
or hedge delay is measured in steady state, not at its cold-start cap. Writes a console table, ``load.json``, ``load.csv`` and
``load.png`` (latency against load).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from gencc import stragglers as st  # noqa: E402
from gencc.schemes import GCC  # noqa: E402
from gencc.experiments.load import (DEADLINE_FACTOR, SCHEMES, CpuHog, arrival_times, make_executor,  # noqa: E402
                                    measure_capacity, run_open_loop, summarize, worker_stragglers)
from gencc.experiments.peers import LETCC_GRID, best_letcc  # noqa: E402
from gencc.report import fmt, format_table, write_csv, write_json  # noqa: E402
from gencc.workloads import WorkloadFactory, get  # noqa: E402


def best_settings(rows, key) -> dict:
    """``key(row)`` -> the row with the lowest p99.9 among ``rows``: each cell at its best setting of the grid."""
    best = {}
    for r in rows:
        k = key(r)
        if k not in best or r["p999_ms"] < best[k]["p999_ms"]:
            best[k] = r
    return best


def plot(rows, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = sorted({(r["factor"], r["stragglers"]) for r in rows if r["stragglers"] != "none"})
    fig, axes = plt.subplots(1, max(1, len(panels)), figsize=(5.5 * max(1, len(panels)), 4.2), squeeze=False)
    for ax, (fac, strag) in zip(axes[0], panels):
        names = list(dict.fromkeys(r["scheme"] for r in rows if r["factor"] == fac and r["stragglers"] == strag))
        for i, name in enumerate(names):
            best = best_settings([r for r in rows if r["factor"] == fac and r["stragglers"] == strag
                                  and r["scheme"] == name], key=lambda r: r["load"])
            pts = sorted((r["load"], r["p50_ms"], r["p999_ms"]) for r in best.values())
            x = [p[0] for p in pts]
            color = f"C{i}"
            ax.plot(x, [p[2] for p in pts], "o-", color=color, label=f"{name} p99.9")
            ax.plot(x, [p[1] for p in pts], "x--", color=color, alpha=0.6)
        clean = sorted((r["load"], r["p50_ms"]) for r in rows if r["scheme"] == "uncoded-clean")
        if clean:
            ax.plot([c[0] for c in clean], [1.5 * c[1] for c in clean], "k:", label="1.5 x clean p50")
        ax.set(xlabel="offered load (fraction of uncoded capacity)", ylabel="latency (ms)", yscale="log",
               title=f"{fac}x workers, {strag} (solid p99.9, dashed p50;\n"
                                                       "each scheme's best setting at each load)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6)
    import textwrap

    fig.suptitle("\n".join(textwrap.wrap(title, 90)), fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _setting(params) -> str:
    """A row's settings, short: "q=0.8 copies=2 pull"."""
    if not isinstance(params, dict):
        return "" if params is None else str(params)
    short = {"hedge_q": "q", "hedge_copies": "copies", "deadline_factor": "deadline", "column_window": "column"}
    return " ".join(str(v) if k == "placement" else f"{short.get(k, k)}={v:g}" if isinstance(v, float)
                    else f"{short.get(k, k)}={v}" for k, v in params.items())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1.25x workers, slow nodes, 400 requests per run")
    ap.add_argument("--backend", default="local", choices=["local", "ray", "threads"])
    ap.add_argument("--workload", default="lenet5")
    ap.add_argument("-K", type=int, default=4)
    ap.add_argument("--micro-batch", type=int, default=2)
    ap.add_argument("--base", type=float, default=0.04, help="injected task time, seconds")
    ap.add_argument("--task-time", choices=["sleep", "cpu"], default="sleep",
                    help="how a task spends --base: sleeping (default; a stand-in for a heavier f on a machine of "
                         "its own) or as CPU work on the worker (a busy loop: a CPU hog slows it, and every "
                         "redundant task costs core time on this machine's cores); cpu: --stragglers cpu-hog "
                         "or none only")
    ap.add_argument("--window", type=float, default=None,
                    help="batching window, seconds (default: the mean time to fill a batch at the offered rate, "
                         "at most 4 x base)")
    ap.add_argument("--loads", default="0.3,0.5,0.7")
    ap.add_argument("--factors", default=None, help="N / K (default 1.25,1.5,2; quick: 1.25)")
    ap.add_argument("--stragglers", default=None, help="default slow-nodes,pareto,cpu-hog; quick: slow-nodes")
    ap.add_argument("--schemes", default=",".join(SCHEMES))
    ap.add_argument("--requests", type=int, default=None, help="per run (default 2000; quick: 400)")
    ap.add_argument("--run-limit", type=float, default=30.0, help="seconds to wait for answers after the last arrival")
    ap.add_argument("--deadline-factors", default=str(DEADLINE_FACTOR),
                    help="grid of the coded schemes' adaptive deadline: factor x the p90 of recent latencies")
    ap.add_argument("--column-windows", default="none",
                    help="grid of the -direct schemes' column window, in units of a request group's fill time "
                         "B / rate (1: the wait of a hedged group of B); 'none' (default: 1 had the longer tail "
                         "in the README's seed study): an input waits for its B requests until its batch closes")
    ap.add_argument("--hedge-qs", default="0.8,0.95", help="grid of hedged requests' backup quantile")
    ap.add_argument("--hedge-copies", default="2,3",
                    help="grid of hedged requests' copies in all (2: one backup; 3 had the shortest tail of the "
                         "seed study, results/bench_load_serving)")
    ap.add_argument("--placements", default="pinned,pull",
                    help="grid of where tasks go, for every scheme but uncoded-clean: pinned (queued on their "
                         "worker at once) or pull (held at the master until a worker is idle)")
    ap.add_argument("--no-gc-freeze", dest="gc_freeze", action="store_false",
                    help="leave the master's garbage collector as it is; by default each run starts with "
                         "gc.freeze(), as a serving process should: a full collection over start-up's "
                         "objects stalled the master for 100-170 ms in 2 of 6 straggler-free runs, 0 of 6 "
                         "with the collector off")
    ap.add_argument("--warmup", type=int, default=100,
                    help="requests served (not measured) before each executor's runs, on straggler draws of "
                         "their own: the adaptive deadline and hedge delay are the cap until 20 task latencies "
                         "are seen, so a cold executor's first batches wait up to 10 x base")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="results/bench_load")
    args = ap.parse_args(argv)
    factors = [float(f) for f in (args.factors or ("1.25" if args.quick else "1.25,1.5,2")).split(",")]
    kinds = (args.stragglers or ("slow-nodes" if args.quick else "slow-nodes,pareto,cpu-hog")).split(",")
    n_req = args.requests or (400 if args.quick else 2000)
    loads = [float(x) for x in args.loads.split(",")]
    K, B, base = args.K, args.micro_batch, args.base
    window_cap = 4 * base  # the batching window, unless --window: the time to fill a group at the offered rate,
    # at most 4 x base
    schemes = args.schemes.split(",")
    deadline_factors = [float(x) for x in args.deadline_factors.split(",")]
    column_windows = [None if x == "none" else float(x) for x in args.column_windows.split(",")]
    hedge_qs = [float(x) for x in args.hedge_qs.split(",")]
    hedge_copies = [int(x) for x in args.hedge_copies.split(",")]
    placements = args.placements.split(",")
    wl = get(args.workload)
    model = WorkloadFactory(args.workload)
    opts = {"threads": 1} if args.backend == "local" else None
    rng = np.random.default_rng(args.seed)
    X = wl.X[rng.choice(len(wl.X), size=n_req, replace=n_req > len(wl.X))]
    truth = wl.f(X).reshape(n_req, -1)
    t_start = time.monotonic()
    uptime = os.getloadavg()
    cpu = args.task_time == "cpu"
    for kind in kinds:  # a straggler process without a CPU form fails now, not after the capacity run
        try:
            worker_stragglers(kind, base, K, args.seed, cpu=cpu)
        except ValueError as exc:
            ap.error(str(exc))
    capacity = measure_capacity(model, K, B, base, X, backend=args.backend, backend_options=opts, cpu=cpu)
    print(f"capacity (uncoded, K={K}, B={B}, base {base:g} s of {args.task_time}): {capacity:.1f} inputs/s; "
          f"load average {uptime[0]:.1f}", flush=True)
    rows = []

    def settings(name) -> list[dict]:
        """The grid of scheme ``name``'s settings, one row each ({}: it has none)."""
        if name == "uncoded-clean":  # the baseline of the ratios: one fixed setting
            return [{}]
        if name == "hedged":
            grid = [{"hedge_q": q, "hedge_copies": c} for q in hedge_qs for c in hedge_copies]
        elif name.startswith(("uncoded", "replication")):
            grid = [{}]
        else:
            grid = [{"deadline_factor": d} for d in deadline_factors]
            if "-direct" in name:
                grid = [{**g, "column_window": c} for g in grid for c in column_windows]
        return [{**g, "placement": p} for g in grid for p in placements]

    def serve(name, factor, kind, N, scheme=None, params=None, **tuning):
        column = tuning.get("column_window")  # x the group fill time B / rate: set with the batch window
        ex = make_executor(name, model, K, N, B, base, window_cap, None, backend=args.backend, backend_options=opts,
                           scheme=scheme, **{k: v for k, v in tuning.items() if k != "column_window"})

        n_w = K if name.startswith("uncoded") else N

        def stragglers(seed):  # the straggler process of this row's cell, on draws of ``seed``
            return worker_stragglers("none" if name == "uncoded-clean" else kind, base, n_w, seed, cpu=cpu)

        def set_windows(rate):
            ex.set_batch_window(min(window_cap, (B if name == "hedged" else B * K) / rate) if args.window is None
                                else args.window)
            if column is not None:
                ex.set_column_window(column * B / rate)

        if tuning:  # the row names its settings: the scheme's own (a label or a dict) and the grid's
            own = {} if params is None else params if isinstance(params, dict) else {"scheme": params}
            params = {**own, **tuning}
        try:
            if args.warmup:  # steady state: the deadline and hedge delay have seen latencies
                rate = loads[0] * capacity
                set_windows(rate)
                ex.faults = stragglers(args.seed + 10_000)
                warm = run_open_loop(ex, X[:args.warmup], arrival_times(rate, args.warmup, args.seed + 10_000),
                                     run_limit=args.run_limit)
                if warm.lost:
                    raise RuntimeError(f"{name}: {warm.lost} warm-up requests lost")
            for load in loads:
                rate = load * capacity
                times = arrival_times(rate, n_req, args.seed + int(1000 * load))  # same arrivals for every scheme
                set_windows(rate)  # requests per task (hedged) or per coded batch, and per input (-direct)
                ex.faults = stragglers(args.seed)
                if args.gc_freeze:  # start-up's objects out of the collector's sight (see --no-gc-freeze)
                    gc.collect()
                    gc.freeze()
                hog_s = float(times[-1]) + args.run_limit
                padded0 = ex.padded_columns if column is not None else 0
                t = time.monotonic()
                if kind == "cpu-hog" and name != "uncoded-clean" and args.backend == "local":
                    with CpuHog(ex.backend.pids[0], hog_s):
                        run = run_open_loop(ex, X, times, run_limit=args.run_limit)
                else:
                    run = run_open_loop(ex, X, times, run_limit=args.run_limit)
                row = {"backend": args.backend, "factor": factor, "stragglers": kind if name != "uncoded-clean"
                       else "none", "scheme": name, "workers": n_w, "load": load, "params": params,
                       "setting": _setting(params),
                       "window_ms": 1e3 * ex.batch_window, **summarize(run, truth, rate), "loadavg": round(os.getloadavg()[0], 1)}
                if name == "hedged":
                    row["hedged"] = int(ex.stats["hedged"])
                if column is not None:  # inputs sent partial at the column window
                    row["padded_columns"] = ex.padded_columns - padded0
                rows.append(row)
                print(f"  {factor}x {kind} {name} ({row['setting']}) load {load:.0%}: p50 {row['p50_ms']:.0f} ms, "
                      f"p99.9 {row['p999_ms']:.0f} ms, agree {row['agreement']:.3f} "
                      f"(decoded {fmt(row['decoded_agreement'])}), lost {row['lost']} "
                      f"({time.monotonic() - t:.0f} s)", flush=True)
        finally:
            ex.shutdown(wait=False)

    serve("uncoded-clean", 1.0, "none", K)
    for factor in factors:
        N = int(round(factor * K))
        for kind in kinds:
            for name in schemes:
                if name == "parm" and N != K + 1:
                    continue
                scheme, params = None, None
                if name == "letcc":
                    scheme, params = best_letcc(wl.f, K, N, wl.X, st.RandomStragglers(N - K), LETCC_GRID,
                                                rounds=5, seed=args.seed + 1)
                elif name == "gcc-cal":  # one fixed decoder, chosen on held-out batches: cheap decodes
                    scheme = GCC(K, N).calibrate(wl.f, wl.X, st.RandomStragglers(N - K), rounds=5,
                                                 seed=args.seed + 1)
                    params = scheme.calibration_[0][0]
                for tuning in settings(name):  # ratios below use hedging's best setting
                    serve(name, factor, kind, N, scheme, params, **tuning)
    # ratios within the run
    clean = {r["load"]: r for r in rows if r["scheme"] == "uncoded-clean"}
    # hedged requests at their best setting (lowest p99.9) in each cell
    hedged = best_settings([r for r in rows if r["scheme"] == "hedged"],
                           key=lambda r: (r["factor"], r["stragglers"], r["load"]))
    for r in rows:
        c = clean.get(r["load"])
        r["p999/clean_p50"] = r["p999_ms"] / c["p50_ms"] if c else float("nan")
        h = hedged.get((r["factor"], r["stragglers"], r["load"]))
        r["p999/hedged"] = r["p999_ms"] / h["p999_ms"] if h else float("nan")
    cols = ["factor", "stragglers", "scheme", "setting", "workers", "load", "window_ms", "offered_rps", "throughput_rps", "p50_ms", "p99_ms",
            "p999_ms", "p999/clean_p50", "p999/hedged", "agreement", "exact", "decoded_agreement", "untrusted", "answered", "errors", "lost",
            "unaccounted", "loadavg"]
    title = (f"{args.workload}, K={K}, B={B}, base {base:g} s of {args.task_time}, window: fill time <= {window_cap:g} s, {n_req} requests per run, "
             f"{args.backend} backend, capacity {capacity:.0f}/s, {os.cpu_count()} cores, "
             f"load average at start {uptime[0]:.1f}")
    print(format_table(rows, cols, title=title))
    lost = sum(r["lost"] + r["unaccounted"] for r in rows)
    print(f"lost or unaccounted requests: {lost}; total {time.monotonic() - t_start:.0f} s")
    os.makedirs(args.out, exist_ok=True)
    suffix = "" if args.backend == "local" else f"_{args.backend}"
    settings = vars(args) | {"capacity_rps": capacity, "window_cap": window_cap, "letcc_grid": LETCC_GRID,
                             "loadavg_start": uptime, "cores": os.cpu_count()}
    write_json({"settings": settings, "rows": rows}, os.path.join(args.out, f"load{suffix}.json"))
    write_csv(rows, os.path.join(args.out, f"load{suffix}.csv"), cols + ["params", "max_ms", "hedged"])
    plot(rows, os.path.join(args.out, f"load{suffix}.png"), title)
    print(f"wrote {args.out}/load{suffix}.(json|csv|png)")
    return rows


if __name__ == "__main__":
    sys.exit(0 if main() is not None else 1)
