"""Chaos soak on real workers: 10,000 inputs through ``map`` under every fault at once, on each backend.

    python benchmarks/chaos_soak.py                              # both backends, 10,000 inputs each
    python benchmarks/chaos_soak.py --backends local --inputs 2000

lenet5 under GCC (K = 4, N = 12, n_wait = 9, deadline 0.5 s, timeout 10 s,
hang_timeout 1 s). Faults from inside, per task: crash 0.2%, hang 0.2%, error
0.5%, NaN 0.5%, wrong shape 0.5%, and 5% slow tasks (x20); from outside, a
SIGKILL or SIGSTOP of a random worker every 2 s on average; and 0.2% bad
inputs (NaN, or another shape). Reported per backend: inputs, answers,
explicit errors, lost inputs (must be 0), bad inputs rejected one by one,
argmax disagreement with f against the scheme's rate with no fault (from
n_wait returns, and from as many returns as the run's batches had), the fewest
returns any answer was decoded from (must be >= K), processes left after
shutdown (must be 0), the master's memory along the run, and wall time
against the stated bound. Writes ``chaos.json``, ``chaos.csv`` and
``chaos.png`` (memory along the run).
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from gencc.experiments.chaos import chaos_soak  # noqa: E402
from gencc.report import format_table, write_csv, write_json  # noqa: E402
from gencc.schemes import GCC  # noqa: E402
from gencc.workloads import WorkloadFactory, get  # noqa: E402

COLUMNS = ["backend", "inputs", "answers", "errors", "lost", "bad_inputs", "bad_inputs_rejected",
           "disagreement_rate", "healthy_disagreement_rate", "same_returns_disagreement_rate", "fewest_returns", "trusted_returns", "crashes",
           "hangs", "failed_batches", "sigkill", "sigstop", "seconds", "bound_s", "finished", "pids_seen",
           "pids_left", "rss_first_mb", "rss_last_mb"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backends", default="local,ray")
    p.add_argument("--inputs", type=int, default=10_000)
    p.add_argument("--workload", default="lenet5")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="results/chaos")
    args = p.parse_args(argv)

    w = get(args.workload)
    scheme = GCC(4, 12)
    rows, reports = [], {}
    for backend in args.backends.split(","):
        r = chaos_soak(WorkloadFactory(args.workload), w.f, scheme, w.X, task=w.task, backend=backend,
                       n_inputs=args.inputs, n_wait=9, deadline=0.5, timeout=10.0, hang_timeout=1.0,
                       seed=args.seed, progress=True)
        reports[backend] = r.as_dict()
        rows.append({**{k: v for k, v in r.as_dict().items() if k in COLUMNS},
                     "crashes": r.stats.get("crashes", 0), "hangs": r.stats.get("hangs", 0),
                     "failed_batches": r.stats.get("failed_batches", 0),
                     "sigkill": r.signals.get("SIGKILL", 0), "sigstop": r.signals.get("SIGSTOP", 0),
                     "seconds": round(r.seconds, 1),
                     "disagreement_rate": round(r.disagreement_rate, 4),
                     "healthy_disagreement_rate": round(r.healthy_disagreement_rate, 4),
                     "same_returns_disagreement_rate": round(r.same_returns_disagreement_rate, 4),
                     "rss_first_mb": float(np.mean(r.rss_mb[: max(1, len(r.rss_mb) // 4)])),
                     "rss_last_mb": float(np.mean(r.rss_mb[-max(1, len(r.rss_mb) // 4):]))})
    print(format_table(rows, COLUMNS, title=f"chaos soak: {args.workload}, {scheme!r}"))
    write_json({"settings": vars(args), "scheme": repr(scheme), "rows": rows, "reports": reports},
               f"{args.out}/chaos.json")
    write_csv(rows, f"{args.out}/chaos.csv", COLUMNS)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for backend, rep in reports.items():
        rss = rep["rss_mb"]
        ax.plot(np.linspace(0, rep["inputs"], len(rss)), rss, label=backend)
    ax.set_xlabel("inputs streamed")
    ax.set_ylabel("master RSS (MB)")
    ax.set_title("chaos soak: memory along the run")
    ax.legend()
    fig.tight_layout()
    fig.savefig(f"{args.out}/chaos.png", dpi=120)
    bad = [r for r in rows if r["lost"] or r["pids_left"] or not r["finished"]
           or r["fewest_returns"] < r["trusted_returns"]]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
