"""Record a straggler trace from real worker processes under real disturbances.

    python tools/record_trace.py --out results/traces              # 8 workers, 3 phases of 4 s

N worker processes (``multiprocessing``, spawned), worker w pinned to core
``w mod cores``, each run a task every ``--period`` seconds (a fixed piece of
NumPy work: a matrix product and a pass over an 8 MB array, about
``--work`` seconds alone) and record, per task, its start and duration. The
run has three phases of ``--phase`` seconds each:

1. ``quiet``: nothing else runs;
2. ``cpu-hog``: ``--hogs`` busy-loop processes pinned to core 0 (the workers
   sharing that core slow down);
3. ``memory-hog``: a process copying 256 MB arrays back and forth on the last
   core (memory bandwidth: every worker slows, those on its core the most).

The trace goes to ``<out>/cpu_mem_hog.csv`` (columns ``worker, task, start,
duration, phase``: the schema :meth:`gencc.stragglers.TraceStragglers.load`
reads) and a stamped summary (per phase and worker: median, p99 and max
duration) to ``<out>/cpu_mem_hog.json``.
"""

from __future__ import annotations

import argparse
import csv
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

import numpy as np

PHASES = ("quiet", "cpu-hog", "memory-hog")


def _pin(core):
    try:
        os.sched_setaffinity(0, {core})
    except (AttributeError, OSError):  # not Linux: unpinned
        pass


def _worker(w, n_workers, core, t0, end, period, size, out):
    _pin(core)
    rng = np.random.default_rng(w)
    A = rng.standard_normal((size, size))
    big = rng.standard_normal(1 << 20)  # 8 MB
    rows, j, next_at = [], 0, t0 + period * w / n_workers  # staggered: the workers' tasks do not start together
    time.sleep(max(0.0, next_at - time.monotonic()))
    while time.monotonic() < end:
        start = time.monotonic()
        (A @ A).sum() + big.sum()
        rows.append((w, j, start - t0, time.monotonic() - start))
        j += 1
        next_at += period
        time.sleep(max(0.0, next_at - time.monotonic()))
    out.put(rows)


def _cpu_hog(core, start_at, until):
    _pin(core)
    time.sleep(max(0.0, start_at - time.monotonic()))  # started (and imported) before the run
    while time.monotonic() < until:
        pass


def _memory_hog(core, start_at, until):
    _pin(core)
    a = np.ones(1 << 25)  # 256 MB
    b = np.empty_like(a)
    time.sleep(max(0.0, start_at - time.monotonic()))
    while time.monotonic() < until:
        np.copyto(b, a)
        np.copyto(a, b)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--phase", type=float, default=4.0, help="seconds per phase")
    ap.add_argument("--period", type=float, default=0.02, help="seconds between a worker's task starts")
    ap.add_argument("--size", type=int, default=400, help="the task's matrix size (about 5 ms alone)")
    ap.add_argument("--hogs", type=int, default=4, help="busy-loop processes on core 0 in the cpu-hog phase")
    ap.add_argument("--out", default="results/traces")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from gencc.report import write_json

    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    cores = os.cpu_count() or 1
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    t0 = time.monotonic() + 5.0  # every worker and hog has started and imported NumPy
    end = t0 + len(PHASES) * args.phase
    workers = [ctx.Process(target=_worker, args=(w, args.workers, w % cores, t0, end, args.period, args.size, out))
               for w in range(args.workers)]
    for p in workers:
        p.start()
    hogs = [ctx.Process(target=_cpu_hog, args=(0, t0 + args.phase, t0 + 2 * args.phase)) for _ in range(args.hogs)]
    hogs.append(ctx.Process(target=_memory_hog, args=(cores - 1, t0 + 2 * args.phase, end)))
    for p in hogs:
        p.start()
    rows = [r for _ in workers for r in out.get(timeout=end - time.monotonic() + 60)]
    for p in workers + hogs:
        p.join(timeout=30)
    rows.sort(key=lambda r: (r[2], r[0]))
    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "cpu_mem_hog.csv", "w", newline="") as fh:
        wr = csv.writer(fh)
        wr.writerow(["worker", "task", "start", "duration", "phase"])
        for w, j, start, dur in rows:
            wr.writerow([w, j, f"{start:.6f}", f"{dur:.6f}", PHASES[min(int(start // args.phase), len(PHASES) - 1)]])
    summary = []
    for i, phase in enumerate(PHASES):
        for w in range(args.workers):
            d = np.array([r[3] for r in rows if r[0] == w and i * args.phase <= r[2] < (i + 1) * args.phase])
            if d.size:
                summary.append({"phase": phase, "worker": w, "core": w % cores, "tasks": int(d.size),
                                "median_ms": 1e3 * float(np.median(d)), "p99_ms": 1e3 * float(np.quantile(d, 0.99)),
                                "max_ms": 1e3 * float(d.max())})
    write_json({"hogs": args.hogs, "workers": args.workers, "cores": cores, "phase_s": args.phase, "period_s": args.period,
                "size": args.size, "tasks": len(rows), "summary": summary}, folder / "cpu_mem_hog.json")
    for phase in PHASES:
        med = [s["median_ms"] for s in summary if s["phase"] == phase]
        p99 = [s["p99_ms"] for s in summary if s["phase"] == phase]
        print(f"{phase:>10}: median {np.median(med):.1f} ms, p99 over workers {min(p99):.1f}-{max(p99):.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
