"""Worst-case stragglers on a network: GCC's default decoder against BACC and LeTCC at its best.

The adversary removes the S workers whose loss hurts the decoder most: a
contiguous block (all N - S + 1 tried) and the worse of that and a greedy
adversary (``WorstCaseStragglers``), each against each scheme's own decoder.
LeTCC's ridges come from ``gencc.experiments.peers.LETCC_GRID`` on
calibration batches of another seed. Same batches (seed 0) for every scheme.

Run: PYTHONPATH=src python benchmarks/worst_case_check.py [rounds] [out]
"""

from __future__ import annotations

import sys
import time

import gencc
from gencc import stragglers as st
from gencc.evaluate import evaluate
from gencc.experiments.peers import LETCC_GRID, best_letcc
from gencc.report import format_table
from gencc.workloads import get

SETTINGS = [("lenet5", 8, 32, 8), ("convnet", 8, 32, 8), ("lenet5", 4, 16, 4)]


def main(rounds: int = 8, out: str | None = None):
    rows = []
    for name, K, N, S in SETTINGS:
        wl = get(name)
        for model in (st.ContiguousStragglers(S), st.WorstCaseStragglers(S)):
            t0 = time.perf_counter()
            letcc, label = best_letcc(wl.f, K, N, wl.X, model, rounds=max(2, rounds // 4))
            mse = {s: evaluate(wl.f, scheme, wl.X, model, rounds=rounds, seed=0).mean("mse")
                   for s, scheme in (("gcc", gencc.GCC(K, N)), ("bacc", gencc.BACC(K, N)), ("letcc", letcc))}
            rows.append({"workload": name, "K": K, "N": N, "S": S, "adversary": type(model).__name__,
                         "gcc": mse["gcc"], "bacc": mse["bacc"], "letcc": mse["letcc"],
                         "gcc/bacc": mse["gcc"] / mse["bacc"], "gcc/letcc": mse["gcc"] / mse["letcc"],
                         "letcc ridges": label, "seconds": time.perf_counter() - t0})
            print(format_table(rows[-1:]), flush=True)
    text = format_table(rows, title=f"worst-case stragglers: MSE of decoded outputs, {rounds} batches per cell, "
                                    f"LeTCC grid {dict(LETCC_GRID)} (benchmarks/worst_case_check.py)")
    print(text)
    if out:
        with open(out, "w") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 8, sys.argv[2] if len(sys.argv) > 2 else None)
