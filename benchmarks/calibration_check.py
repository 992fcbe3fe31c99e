"""Does GCC.calibrate find a decoder that stays near the best on unseen batches?

For each setting the sample inputs are split in halves: ``calibrate`` runs on
the first half (seed 0); the second half (seed 1) measures every
configuration of ``CALIBRATION_GRID`` again (a second ``calibrate`` call, whose
table is that measurement). Reported: the held-out MSE of the calibrated
configuration over the held-out best (the oracle), and of the per-decode
defaults (criterion "gap" with 3-way mixing, and the former leave-one-out
over 4 kernels) under the same held-out draws.

Run: PYTHONPATH=src python benchmarks/calibration_check.py [rounds] [out]
"""

from __future__ import annotations

import sys
import time

import numpy as np

import gencc
from gencc import stragglers as st

SETTINGS = [
    ("lenet5", 8, 32, st.ContiguousStragglers(8)),
    ("lenet5", 8, 32, st.RandomStragglers(8)),
    ("xsinx", 4, 20, st.RandomStragglers(5)),
    ("xsinx", 8, 16, st.ContiguousStragglers(4)),
    ("mlp", 8, 16, st.BernoulliStragglers(0.2)),
    ("convnet", 4, 8, st.ContiguousStragglers(2)),
]
OLD = dict(candidates=[("sobolev2", 1.0), ("matern32", 0.5), ("matern52", 0.5), ("matern52", 2.0)],
           criterion="loo", mix=1)


def main(rounds=20, out="results/calibration_check/calibration_check.txt"):
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass
    lines = [f"calibration check: calibrate on half the inputs ({rounds} rounds, seed 0), "
             f"held-out MSE on the other half (seed 1); ratios to the held-out best of "
             f"{len(gencc.schemes.gcc.CALIBRATION_GRID)} fixed configurations (benchmarks/calibration_check.py)", "",
             f"{'setting':<42} {'held-out best':>13} {'calibrated':>11} {'default':>9} {'old loo':>9}  calibrated config"]
    t0 = time.time()
    for name, K, N, model in SETTINGS:
        wl = gencc.workloads.get(name)
        half = wl.X.shape[0] // 2
        Xc, Xh = wl.X[:half], wl.X[half:]
        s = gencc.GCC(K, N)
        cal = s.calibrate(wl.f, Xc, model, rounds=rounds, seed=0)
        held = s.calibrate(wl.f, Xh, model, rounds=rounds, seed=1).calibration_
        best = held[0][1]
        mine = [m for c, m in held if c == cal.calibration_[0][0]][0]
        dflt = gencc.evaluate(wl.f, s, Xh, model, rounds=rounds, seed=1).mean("mse")
        old = gencc.evaluate(wl.f, s.with_params(**OLD), Xh, model, rounds=rounds, seed=1).mean("mse")
        c = cal.calibration_[0][0]
        tag = f"{name} K={K} N={N} {model}"
        row = (f"{tag:<42} {best:>13.4g} {mine / best:>11.3f} {dflt / best:>9.3f} {old / best:>9.3f}  "
               f"{c['kernel']}@{c['scale']:g} lam_dec={c['lam_dec']:.0e}")
        lines.append(row)
        print(row, f"[{time.time() - t0:.0f}s]", flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if out:
        with open(out, "w") as fh:
            fh.write(text)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20, sys.argv[2] if len(sys.argv) > 2 else "results/calibration_check/calibration_check.txt")
