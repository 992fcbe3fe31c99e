"""Encode/decode cost against N, as ratios to a same-shape matrix product.

    python benchmarks/bench_codec.py               # N = 16 .. 4096
    python benchmarks/bench_codec.py --max-n 1024 --out docs/bench_codec.json

K = N/4 inputs of d = 784, m = 10 outputs, N/8 stragglers. For each scheme
the table gives seconds and the ratio to ONE float64 matrix product of the
decode's shape, (K, |F|) @ (|F|, m), measured in the same run; and, for
scale, the cost of a real DNN on the N coded inputs (an MLP 784-512-512-10,
float32 torch, as a worker pool would spend in total).
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import gencc  # noqa: E402
from gencc.report import format_table, write_json  # noqa: E402


def best_time(fn, repeat):
    best = np.inf
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def dnn_time(N, repeat):
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    net = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                              torch.nn.ReLU(), torch.nn.Linear(512, 10)).eval()
    x = torch.randn(N, 784)
    with torch.inference_mode():
        return best_time(lambda: net(x), repeat)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--max-n", type=int, default=4096)
    ap.add_argument("--out", default=None, help="write the rows as JSON here")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    N = 16
    while N <= args.max_n:
        K, S, d, m = N // 4, N // 8, 784, 10
        repeat = 5 if N <= 512 else 1
        X = rng.normal(size=(K, d))
        ret = np.sort(rng.choice(N, size=N - S, replace=False))
        A, B = rng.normal(size=(K, ret.size)), rng.normal(size=(ret.size, m))
        base = best_time(lambda: A @ B, max(repeat, 20))
        f_cost = dnn_time(N, repeat)
        schemes = {
            "gcc": gencc.GCC(K, N),  # the default: kernel by leave-one-out, ridge 1e-8
            "gcc-auto": gencc.GCC(K, N, lam_dec="auto"),
            "gcc-fixed": gencc.GCC(K, N, kernel="sobolev2", lam_dec=1e-8),
            "letcc": gencc.LeTCC(K, N),
            "bacc": gencc.BACC(K, N),
        }
        for name, s in schemes.items():
            build = best_time(lambda: s._encoder_matrix(), repeat)
            E = s.encoder_matrix()
            enc = best_time(lambda: E @ X, repeat)
            Y = np.tanh(rng.normal(size=(N, m)))[ret]
            dec = best_time(lambda: s.decode(Y, ret), repeat)
            rows.append({"N": N, "K": K, "scheme": name, "encoder_build_s": build, "encode_s": enc,
                         "decode_s": dec, "matmul_s": base, "decode_ratio": dec / base,
                         "dnn_f_s": f_cost, "decode_over_f": None if f_cost is None else dec / f_cost})
        print(format_table(rows[-len(schemes):], title=f"N={N} K={K} |F|={ret.size}"), flush=True)
        N *= 2
    if args.out:
        print(f"wrote {write_json(rows, args.out)}")


if __name__ == "__main__":
    main()
