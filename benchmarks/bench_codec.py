"""Encode and decode cost of every scheme against N, as ratios to same-shape matrix products.

    python benchmarks/bench_codec.py                       # N = 16 .. 2048
    python benchmarks/bench_codec.py --max-n 65536 --budget 10   # the README table (about 5 minutes)
    python benchmarks/bench_codec.py --max-n 256 --out /tmp/codec --schemes gcc-fixed bacc

Setting: K = N/4 inputs of d = 784 features, m = 10 outputs per worker, N/8
random stragglers, one BLAS thread (and one torch thread). For each N the run
measures, in the same process:

- ``matmul_dec_s``: ONE float64 product of the decode's shape, (K, |F|) @ (|F|, m);
- ``matmul_enc_s``: ONE float64 product of the encode's shape, (N, K) @ (K, d);
- ``dnn_s``: an MLP 784-512-512-10 (float32 torch, one thread) forward on the N
  coded inputs, what the worker pool spends on f in total;

and for every scheme (a best-of-repeats time, and its ratio to the product):

- ``encode_cold``: encode on a fresh scheme (builds the (N, K) encoder matrix, or
  runs matrix-free above ``encoder_matrix_bytes``); ``encode``: a repeated encode;
- ``decode_cold``: the first decode of a returned set (decoded directly);
- ``decode_build``: its second decode (a cacheable scheme builds and stores the
  (K, |F|) decoder: the one-off price of the cache);
- ``decode_cached``: a repeated decode of the same set (one matrix product where the
  scheme caches decoders, column ``caches``; ``gcc``'s automatic selection and
  ``replication`` decode afresh every time);
- ``decode_info``: a repeated ``decode_with_info`` (adds the leave-one-out error,
  an (|F|, |F|) @ (|F|, m) product when cached); this is what the runtime calls;
- ``decode_many``: ``decode_many`` of 8 batches sharing the set, per batch (one
  (K, |F|) @ (|F|, 8m) product when cached; GCC's automatic selection loops);
- ``decode_over_dnn``: ``decode_cached / dnn_s``.

Where a reference product's left factor would exceed 256 MiB (N >= 8192 for the
encode, 16384 for the decode), it is timed on a block of rows and scaled to
the full product (``*_extrapolated`` in the JSON), so the run never allocates
the (N, K) matrix the codec itself avoids.

Schemes: ``gcc`` (the default: automatic kernel, decoded afresh every time),
``gcc-fixed`` (sobolev2, ridge 1e-8), ``letcc``, ``bacc``, ``lcc`` (Lagrange,
exact only for polynomial f; its fit is ill-conditioned at large K but its cost
is what is measured) and ``replication`` (whose returned sets are redrawn until
every input has a returned copy: otherwise its decode raises).

Budget: before each measurement the time is predicted from the scheme's two
previous sizes (slope capped below at 1, above at 3.5); a measurement predicted
to exceed ``--budget`` seconds is skipped, as is everything larger for that
scheme and operation, and the row says ``skipped (budget)``: never silently
missing. The prediction needs a history: start from a small ``--min-n`` (the
default 16), or a first size far out may run a dense decode for minutes. A
cold decode over budget whose decoder was not cached (too large for the
cache) skips the repeated decodes. Writes ``bench_codec.json``, ``bench_codec.csv`` and ``bench_codec.png``
(log-log time against N, with the slope of a least-squares line through the
points N >= ``--slope-from``) into ``--out``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import numpy as np  # noqa: E402

import gencc  # noqa: E402
from gencc.report import format_table, write_csv, write_json  # noqa: E402
from _timing import best_time  # noqa: E402

SCHEMES = {
    "gcc": lambda K, N: gencc.GCC(K, N),
    "gcc-fixed": lambda K, N: gencc.GCC(K, N, kernel="sobolev2", lam_dec=1e-8),
    "letcc": lambda K, N: gencc.LeTCC(K, N),
    "bacc": lambda K, N: gencc.BACC(K, N),
    "lcc": lambda K, N: gencc.LCC(K, N),
    "replication": lambda K, N: gencc.Replication(K, N),
}
OPS = ("encode_cold", "encode", "decode_cold", "decode_build", "decode_cached", "decode_info", "decode_many")
MANY = 8  # batches per decode_many
# a reference product whose left factor exceeds this is timed on a block of its rows and scaled
REF_BYTES = 256 * 2**20
D_IN, M_OUT = 784, 10


def dnn_time(N):
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(D_IN, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                              torch.nn.ReLU(), torch.nn.Linear(512, M_OUT)).eval()
    x = torch.randn(N, D_IN)
    with torch.inference_mode():
        return best_time(lambda: net(x))


def ref_product(rng, rows, inner, cols):
    """Seconds of one float64 (rows, inner) @ (inner, cols) product, and whether it was extrapolated."""
    block = rows if 8 * rows * inner <= REF_BYTES else max(1, REF_BYTES // (8 * inner))
    A, B = rng.normal(size=(block, inner)), rng.normal(size=(inner, cols))
    return best_time(lambda: A @ B) * rows / block, block < rows


class Budget:
    """Predicts each (scheme, op)'s next time from its last two and skips what would run too long."""

    def __init__(self, seconds):
        self.seconds = seconds
        self.history = {}  # (scheme, op) -> [(N, t)]
        self.dead = set()

    def allows(self, key, N):
        if key in self.dead:
            return False
        pts = self.history.get(key, [])
        if pts:
            (n1, t1) = pts[-1]
            slope = 3.0
            if len(pts) >= 2:
                (n0, t0) = pts[-2]
                slope = float(np.clip(np.log(t1 / t0) / np.log(n1 / n0), 1.0, 3.5))
            if t1 * (N / n1) ** slope > self.seconds:
                self.dead.add(key)
                return False
        return True

    def record(self, key, N, t):
        self.history.setdefault(key, []).append((N, t))


def measure_scheme(name, K, N, X, f_out, rng, budget, progress):
    """Times of one scheme at one N: {op: seconds or None (skipped)}."""
    times = {}

    def run(op, fn, **kw):
        key = (name, op)
        if not budget.allows(key, N):
            times[op] = None
            return
        progress(f"{name} {op}")
        t = best_time(fn, **kw)
        budget.record(key, N, t)
        times[op] = t

    fresh = [SCHEMES[name](K, N) for _ in range(3)]
    run("encode_cold", lambda: fresh.pop().encode(X) if fresh else SCHEMES[name](K, N).encode(X), max_runs=3)
    s = SCHEMES[name](K, N)
    coded = s.encode(X)
    Ystack = f_out(coded)  # (N, m): every worker's output
    run("encode", lambda: s.encode(X))

    S = N // 8
    def draw():
        while True:  # replication cannot answer an input whose copies all straggled: redraw such sets
            r = np.sort(rng.choice(N, N - S, replace=False))
            if not isinstance(s, gencc.Replication) or s.available(r).all():
                return r

    sets = iter([draw() for _ in range(16)])
    state = {}

    def cold():
        r = next(sets)
        state["r"] = r
        s.decode(Ystack[r], r)

    def build():
        r = state["r"]
        s.decode(Ystack[r], r)

    # cold and build alternate over fresh sets: each cold call sees a new set, each build its second sighting
    # the second decode builds the cached decoder: both must fit the budget (their history predicts them)
    if budget.allows((name, "decode_cold"), N) and budget.allows((name, "decode_build"), N):
        progress(f"{name} decode_cold/build")
        tc, tb, spent, n = np.inf, np.inf, 0.0, 0
        while n < 10 and (n == 0 or spent < 0.4):  # at most 10: 16 fresh sets drawn
            t0 = time.perf_counter()
            cold()
            t1 = time.perf_counter()
            build()
            t2 = time.perf_counter()
            tc, tb, spent, n = min(tc, t1 - t0), min(tb, t2 - t1), spent + t2 - t0, n + 1
            if t2 - t0 > budget.seconds:
                break
        budget.record((name, "decode_cold"), N, tc)
        budget.record((name, "decode_build"), N, tb)
        times["decode_cold"], times["decode_build"] = tc, tb
    elif budget.allows((name, "decode_cold"), N) and not np.all(np.isfinite(Ystack)):
        times["decode_cold"] = times["decode_build"] = None  # the encoder overflowed (LCC at large K)
        times["note"] = "worker outputs not finite (encoder overflow): no decode"
        budget.dead.update({(name, op) for op in OPS if op.startswith("decode")})
    elif budget.allows((name, "decode_cold"), N):
        # building the cached decoder is over budget, a first decode is not: time first decodes
        # only (each of a fresh set, so nothing is built), and skip what needs the cache
        progress(f"{name} decode_cold (build over budget)")
        tc, spent, n = np.inf, 0.0, 0
        while n < 10 and (n == 0 or spent < 0.4):
            t0 = time.perf_counter()
            cold()
            dt = time.perf_counter() - t0
            tc, spent, n = min(tc, dt), spent + dt, n + 1
            if dt > budget.seconds:
                break
        budget.record((name, "decode_cold"), N, tc)
        times["decode_cold"], times["decode_build"] = tc, None
        budget.dead.update({(name, "decode_cached"), (name, "decode_info"), (name, "decode_many")})
    else:
        times["decode_cold"] = times["decode_build"] = None
    # a repeated decode is fast only from the cache: after a cold decode over budget, skip it unless cached
    slow = times["decode_cold"] is not None and times["decode_cold"] > budget.seconds
    if slow and s.decoder_cache_info().currsize == 0:
        budget.dead.update({(name, "decode_cached"), (name, "decode_info"), (name, "decode_many")})
    if times["decode_cold"] is not None:
        r = state["r"]
        run("decode_cached", lambda: s.decode(Ystack[r], r))
        run("decode_info", lambda: s.decode_with_info(Ystack[r], r))
        Y8 = Ystack[r][None] * (1.0 + 0.01 * np.arange(MANY))[:, None, None]  # (B, |F|, m)
        run("decode_many", lambda: s.decode_many(Y8, r))
        if times["decode_many"] is not None:
            times["decode_many"] /= MANY
    else:
        times["decode_cached"] = times["decode_info"] = times["decode_many"] = None
    return times


def _slope_text(k):
    return "" if k is None else f" (slope {k:.2f})"


def slope(points, n_from):
    pts = [(n, t) for n, t in points if t is not None and n >= n_from]
    if len(pts) < 2:
        return None
    n, t = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
    return float(np.polyfit(n, t, 1)[0])


def plot(rows, base, path, n_from):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(14, 6))
    names = list(dict.fromkeys(r["scheme"] for r in rows))
    colours = dict(zip(names, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    panels = ((axes[0], "decode", (("decode_cold", "--"), ("decode_cached", "-"))),
              (axes[1], "encode", (("encode", "-"),)))
    for ax, what, ops in panels:
        for name in names:
            for op, style in ops:
                pts = [(r["N"], r[f"{op}_s"]) for r in rows if r["scheme"] == name and r[f"{op}_s"] is not None]
                if not pts:
                    continue
                k = slope(pts, n_from)
                label = f"{name} {op.split('_')[-1] if '_' in op else ''}".strip()
                label += _slope_text(k)
                ax.loglog(*zip(*pts), style, marker="o", ms=3, color=colours[name], label=label)
        ref = "matmul_dec_s" if what == "decode" else "matmul_enc_s"
        pts = [(b["N"], b[ref]) for b in base]
        k = slope(pts, n_from)
        ax.loglog(*zip(*pts), ":", color="black", lw=2,
                  label=f"one matmul {'(K,|F|)@(|F|,m)' if what == 'decode' else '(N,K)@(K,d)'}{_slope_text(k)}")
        dnn = [(b["N"], b["dnn_s"]) for b in base if b["dnn_s"] is not None]
        if dnn:
            k = slope(dnn, n_from)
            ax.loglog(*zip(*dnn), "-.", color="grey", lw=2, label=f"MLP forward on N inputs{_slope_text(k)}")
        ax.set_xlabel("N workers (K = N/4)")
        ax.set_ylabel("seconds (best of repeats, one thread)")
        ax.set_title(f"{what}: slopes fitted over N >= {n_from}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--min-n", type=int, default=16)
    ap.add_argument("--max-n", type=int, default=2048, help="largest N (doubling from --min-n)")
    ap.add_argument("--budget", type=float, default=10.0,
                    help="seconds one measurement may be predicted to take before it and larger N are skipped")
    ap.add_argument("--schemes", nargs="+", default=list(SCHEMES), choices=list(SCHEMES))
    ap.add_argument("--slope-from", type=int, default=256, help="fit slopes over N >= this")
    ap.add_argument("--out", default="results/bench_codec", help="folder for bench_codec.{json,csv,png}")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.min_n < 8 or args.max_n < args.min_n:
        ap.error("need 8 <= --min-n <= --max-n")

    rng = np.random.default_rng(args.seed)
    W = rng.normal(size=(D_IN, M_OUT)) / np.sqrt(D_IN)

    def f_out(coded):  # a cheap stand-in for f: the decode's cost does not depend on the values
        return np.tanh(coded.reshape(coded.shape[0], -1) @ W)

    # one-off process costs first (numba loading or compiling the state-space recursions, imports):
    # a first decode is not what a long-running decoder pays per request
    t_warm = time.perf_counter()
    for name in args.schemes:
        s = SCHEMES[name](16, 64)
        Yw = f_out(s.encode(rng.normal(size=(16, D_IN))))
        r = np.arange(60)  # four stragglers
        s.decode(Yw[r], r)
    warmup_s = time.perf_counter() - t_warm
    print(f"warm-up (imports, compiled recursions loaded or compiled): {warmup_s:.2f} s", file=sys.stderr)

    budget = Budget(args.budget)
    sizes = []
    N = args.min_n
    while N <= args.max_n:
        sizes.append(N)
        N *= 2
    rows, base = [], []
    t_start = time.perf_counter()
    for i, N in enumerate(sizes):
        K, S = N // 4, N // 8
        nF = N - S

        def progress(msg, N=N, i=i):
            print(f"  [{i + 1}/{len(sizes)} N={N} {time.perf_counter() - t_start:6.1f}s] {msg}",
                  file=sys.stderr, flush=True)

        progress("reference products and DNN")
        X = rng.normal(size=(K, D_IN))
        dec_s, dec_ex = ref_product(rng, K, nF, M_OUT)
        enc_s, enc_ex = ref_product(rng, N, K, D_IN)
        b = {"N": N, "K": K, "F": nF, "matmul_dec_s": dec_s, "matmul_dec_extrapolated": dec_ex,
             "matmul_enc_s": enc_s, "matmul_enc_extrapolated": enc_ex, "dnn_s": dnn_time(N)}
        base.append(b)
        block = []
        for name in args.schemes:
            t = measure_scheme(name, K, N, X, f_out, rng, budget, progress)
            row = {"N": N, "K": K, "F": nF, "scheme": name, "caches": SCHEMES[name](K, N).caches_decoders}
            for op in OPS:
                row[f"{op}_s"] = t[op]
                ref = b["matmul_enc_s"] if op.startswith("encode") else b["matmul_dec_s"]
                row[f"{op}_x"] = None if t[op] is None else t[op] / ref
            row["decode_over_dnn"] = (None if t["decode_cached"] is None or b["dnn_s"] is None
                                      else t["decode_cached"] / b["dnn_s"])
            skipped = [op for op in OPS if t[op] is None]
            row["skipped"] = f"skipped (budget): {' '.join(skipped)}" if skipped else ""
            if t.get("note"):
                row["skipped"] = f"{t['note']}; {row['skipped']}"
            block.append(row)
        rows += block
        cols = ["scheme", "encode_s", "encode_x", "decode_cold_s", "decode_cold_x", "decode_build_x",
                "decode_cached_s", "decode_cached_x", "decode_info_x", "decode_many_x", "decode_over_dnn", "skipped"]
        title = (f"N={N} K={K} |F|={nF}: matmul dec {b['matmul_dec_s']:.3g}s, enc {b['matmul_enc_s']:.3g}s, "
                 f"MLP on N inputs {b['dnn_s'] if b['dnn_s'] is None else format(b['dnn_s'], '.3g')}s "
                 f"(_x: ratio to the matmul)")
        print(format_table(block, cols, title=title), flush=True)

    slopes = []
    for name in args.schemes:
        for op in OPS:
            pts = [(r["N"], r[f"{op}_s"]) for r in rows if r["scheme"] == name]
            slopes.append({"scheme": name, "op": op, "slope": slope(pts, args.slope_from)})
    for ref in ("matmul_dec_s", "matmul_enc_s", "dnn_s"):
        slopes.append({"scheme": "reference", "op": ref[:-2],
                       "slope": slope([(b["N"], b[ref]) for b in base if b[ref] is not None], args.slope_from)})
    fitted = [s for s in slopes if s["slope"] is not None]
    print(format_table(fitted, title=f"log-log slopes over N >= {args.slope_from}") if fitted
          else f"(no slopes: fewer than two sizes N >= {args.slope_from})")

    os.makedirs(args.out, exist_ok=True)
    write_json({"settings": vars(args), "warmup_s": warmup_s, "reference": base, "rows": rows, "slopes": slopes},
               os.path.join(args.out, "bench_codec.json"))
    write_csv(rows, os.path.join(args.out, "bench_codec.csv"))
    plot(rows, base, os.path.join(args.out, "bench_codec.png"), args.slope_from)
    print(f"wrote {args.out}/bench_codec.{{json,csv,png}} in {time.perf_counter() - t_start:.0f}s")


if __name__ == "__main__":
    main()
