"""Robust GCC decoding against Byzantine workers: candidate methods side by side.

For each setting (workload, K, N, S stragglers, A liars) and each attack of
:mod:`gencc.byzantine`, every method decodes the same draws (same batches,
stragglers and attacks: ``gencc.evaluate(..., byzantine=...)`` at one seed).
Reported per method and attack: the geometric mean over draws of the decoded
MSE over the adversary-free MSE of the plain default GCC on the same draw
("x clean"), and, for methods that flag, the flagged set's precision and
recall (means over draws with a flag / with a liar) and the false flags per
draw. The "none" column is the honest cost: MSE with no liar over the plain
decode's, and the false flags on honest workers.

Run: ``python benchmarks/byzantine_study.py SETTING [ROUNDS]`` writes one
setting's table into ``results/byzantine_study/byzantine_study.txt``, replacing that setting's
earlier table (SETTING indexes SETTINGS; each takes one to two minutes on a
loaded 2-core machine). ``... SETTING ROUNDS m1,m2`` prints only those
methods' rows; with ``--merge`` after it, they replace (or join) their rows
in the setting's table.
"""

from __future__ import annotations

import functools
import sys
import time
from pathlib import Path

import numpy as np

import gencc
from gencc import byzantine as bz
from gencc import stragglers as st
from gencc import workloads
from gencc.kernels import make_kernel
from gencc.robust import screen_outliers
from gencc.schemes import gcc as gcc_mod

HEADER = """Robust GCC decoding against Byzantine workers (benchmarks/byzantine_study.py)

Every method decodes the same draws: batches, S random stragglers and A liars among the returned
workers (gencc.evaluate(..., byzantine=...) at seed 0). Cell: geometric mean over draws of the
decoded MSE over the adversary-free MSE of the plain default GCC on the same draw, the worst draw
in brackets; for methods that flag, the flag precision / recall (means over draws with a flag /
with a liar; "-" where none) and the false flags per draw. Column "none": no liar (the honest
cost). Last column: geometric mean over the six attacks. Attacks: sign flip; output x 10; random
output within the honest outputs' range per coordinate; bias of 1 standard deviation per
coordinate; a copy of another returned worker's output; colluding smooth curve (amplitude 1 std,
one random direction, cos(pi (beta - phase))).

Methods: plain = GCC default (gap-selected kernel, mix of 3, lam 1e-8); oracle = drops exactly
the liars (the floor of any screen); ridgeX = decoder ridge X (Moradi, Akbarinodehi, Maddah-Ali
2025); looL tT = iterative removal of the top pooled standardised LOO score of a Sobolev2 fit at
ridge L while above T (+r: decoder ridge 1e-4 too); local-w4 = that score over the median of its
8 nearest; contrast = a spike contrast of the scores; confL-TgG = confirmed removal at ridge L,
threshold T, gain G (pair: also adjacent pairs); g6+ = a gross stage first (ridge 1e-4, threshold
6); rankL = candidates ranked by the scores at ridge L (above 2; t15: above 1.5), confirmed as
conf8-3g4 (all these without the vote / also_lam options); robust = GCC(robust=True) as shipped
(g6 + conf8-3g4 + a vote of the coordinates, 0.5, + candidates from ridge 1e-6 too); robust-old =
robust before those two options (vote=None, also_lam=None); robust+r = robust with decoder ridge
1e-4. Peers (Berrut coding, the same draws): bacc = BACC, no screening; bacc-orac = BACC dropping
exactly the liars (the floor of any Berrut screen); approxif = ApproxIFER(K, N, n_adversaries=A)
(Soleymani et al., AAAI 2022: Berlekamp-Welch rational fits of type (K+A-1, K+A-1) per output
coordinate, the A workers located by most coordinates dropped, Berrut decode of the rest; it drops A
workers on every decode, so its precision is the share of liars among them). LCC with error
correction is not run: none of these workloads is a polynomial. Time per decode: one batch, 10
repeats, on a loaded 2-core machine.
"""

SETTINGS = [  # workload, K, N, S, A
    ("xsinx", 8, 32, 2, 3),
    ("lenet5", 8, 32, 2, 3),
    ("lenet5", 4, 16, 1, 1),
    ("mlp", 4, 16, 1, 1),
    ("xsinx", 4, 16, 1, 1),
    ("convnet", 4, 16, 1, 1),
]
ATTACKS = {
    "none": lambda A: bz.SignFlip(0),
    "sign": lambda A: bz.SignFlip(A),
    "scale10": lambda A: bz.ScaledOutput(A, factor=10.0),
    "random": lambda A: bz.RandomOutput(A),
    "bias1": lambda A: bz.ConstantBias(A, multiple=1.0),
    "copy": lambda A: bz.CopyOutput(A),
    "collude1": lambda A: bz.ColludingSmooth(A, amplitude=1.0),
}
METHODS = {  # "_screen": arguments of gencc.robust.screen_outliers (the rest: GCC's own)
    "plain": dict(),                       # the default GCC: gap selection, mix of 3, lam 1e-8
    "oracle": dict(),                      # drops exactly the liars: the floor for any screen
    "ridge1e-4": dict(lam_dec=1e-4),       # the larger ridge of Moradi et al. 2025, no screening
    "ridge1e-3": dict(lam_dec=1e-3),
    # iterative removal of the top pooled standardised LOO score while it exceeds the threshold
    "loo1e-8t8": dict(robust=True, robust_threshold=8.0, _screen=dict(lam=1e-8, confirm=0)),
    "loo1e-5t4": dict(robust=True, robust_threshold=4.0, _screen=dict(lam=1e-5, confirm=0)),
    "loo1e-4t3": dict(robust=True, robust_threshold=3.0, _screen=dict(lam=1e-4, confirm=0)),
    "loo1e-4+r": dict(robust=True, robust_threshold=3.0, lam_dec=1e-4, _screen=dict(lam=1e-4, confirm=0)),
    # the same scores against a local scale (median of the 8 nearest) or as a spike contrast
    "local-w4": dict(robust=True, robust_threshold=3.0, _screen=dict(lam=1e-4, confirm=0, local=4,
                                                                    local_threshold=2.0)),
    "contrast": dict(robust=True, robust_threshold=3.0, _screen=dict(lam=1e-4, confirm=0, contrast=True)),
    # confirmed removal: of the top 3 above the threshold, the one whose removal lowers the others'
    # squared scores by more than `gain` median squared scores
    "conf8-3g2": dict(robust=True, _screen=dict(gross=0.0, gain=2.0)),
    "conf8-3g4": dict(robust=True, _screen=dict(gross=0.0)),
    "pair8-3g4": dict(robust=True, _screen=dict(gross=0.0, pairs=True)),
    # a gross stage first (loo1e-4 at threshold 6), then confirmed removal
    "g6+conf6": dict(robust=True, _screen=dict(lam=1e-6)),
    # candidates ranked by the scores of a smoother fit (ridge 1e-4 or 1e-6, above 2), confirmed as above
    "rank4": dict(robust=True, _screen=dict(rank_lam=1e-4, rank_threshold=2.0)),
    "rank4t15": dict(robust=True, _screen=dict(rank_lam=1e-4, rank_threshold=1.5)),
    "rank6": dict(robust=True, _screen=dict(rank_lam=1e-6, rank_threshold=2.0)),
    "robust-old": dict(robust=True, _screen=dict(vote=None, also_lam=None)),  # before vote / also_lam
    "robust": dict(robust=True),           # robust=True as shipped: g6 + conf8-3g4 + vote 0.5 + also 1e-6
    "robust+r": dict(robust=True, lam_dec=1e-4),
    # peers, built by (K, N, A) -> scheme: Berrut coding plain, with the liars dropped, and ApproxIFER
    "bacc": lambda K, N, A: gencc.BACC(K, N),
    "bacc-orac": lambda K, N, A: _BerrutOracle(K, N),
    "approxif": lambda K, N, A: gencc.ApproxIFER(K, N, n_adversaries=A),
}


_LAST = {"liars": np.empty(0, np.int64)}


class _Recording(bz.ByzantineModel):
    """An attack that remembers its last liars (for the oracle)."""

    def __init__(self, inner):
        self.inner, self.needs_points = inner, inner.needs_points

    def attack(self, Y, returned, rng=None, points=None):
        Ya, liars = self.inner.attack(Y, returned, rng, points)
        _LAST["liars"] = liars
        return Ya, liars


class _Oracle(gencc.GCC):
    """Removes exactly the liars of the last attack: the best any screen can do."""

    def _screen(self, idx, Y2):
        return ~np.isin(idx, _LAST["liars"])


class _BerrutOracle(gencc.BACC):
    """BACC that removes exactly the liars of the last attack: the floor of any Berrut screen."""

    def _screen(self, idx, Y2):
        return ~np.isin(idx, _LAST["liars"])


def gmean(x):
    x = np.asarray(x, dtype=np.float64)
    return float(np.exp(np.mean(np.log(np.maximum(x, 1e-300)))))


def run(setting, rounds, only=None):
    name, K, N, S, A = setting
    w = workloads.get(name)
    task = "classification" if w.task == "classification" else "regression"
    plain = gencc.GCC(K, N)
    ref = {}
    for an, make in ATTACKS.items():
        ev = gencc.evaluate(w.f, plain, w.X, st.RandomStragglers(S), rounds=rounds, seed=0, task=task,
                            byzantine=make(A))
        ref[an] = ev.samples["clean_mse"]
    lines = [f"\n## {name}  K={K} N={N} S={S} A={A}  ({rounds} draws per cell; x clean = geometric mean of "
             f"decoded MSE / plain adversary-free MSE, worst in brackets; p/r = flag precision/recall; "
             f"ff = false flags per draw)"]
    lines.append(f"{'method':<11}" + " | ".join(f"{an:<27}" for an in ATTACKS) + " | attacks (geo. mean)")
    for mn, params in METHODS.items():
        if only and mn not in only:
            continue
        if callable(params):  # a peer
            extra, scheme = {}, params(K, N, A)
        else:
            params = dict(params)
            extra = params.pop("_screen", {})
            if mn not in ("robust", "robust+r"):  # the study's other screens: without vote / also_lam
                extra = {"vote": None, "also_lam": None, **extra}
            scheme = plain.with_params(**params) if mn != "oracle" else _Oracle(K, N)
        gcc_mod.screen_outliers = functools.partial(screen_outliers, **extra)
        cells, t0, gms = [], time.perf_counter(), []
        for an, make in ATTACKS.items():
            ev = gencc.evaluate(w.f, scheme, w.X, st.RandomStragglers(S), rounds=rounds, seed=0, task=task,
                                byzantine=_Recording(make(A)))
            ratio = ev.samples["mse"] / ref[an]
            cell = f"{gmean(ratio):.2f}x[{ratio.max():.0f}]"
            if an != "none":
                gms.append(gmean(ratio))
            if ev.samples["n_flagged"].size:
                p = ev.samples["flag_precision"]
                r = ev.samples["flag_recall"]
                ps = f"{p.mean():.2f}" if p.size else "-"
                rs = f"{r.mean():.2f}" if r.size else "-"
                cell += f" {ps}/{rs} ff{ev.samples['false_flags'].mean():.1f}"
            cells.append(cell)
        lines.append(f"{mn:<11}" + " | ".join(f"{c:<27}" for c in cells)
                     + f" | {gmean(gms):.2f}x  ({(time.perf_counter() - t0):.0f} s)")
    # time per decode (honest outputs of one batch, all returned but S)
    Xb = w.X[:K]
    Y = np.asarray(w.f(plain.encode(Xb)), dtype=np.float64).reshape(N, -1)
    ret = np.arange(S, N)
    times = []
    for sch in (plain, plain.with_params(robust=True), gencc.ApproxIFER(K, N, n_adversaries=A)):
        sch.decode_with_info(Y[ret], ret)
        t0 = time.perf_counter()
        for _ in range(10):
            sch.decode_with_info(Y[ret], ret)
        times.append((time.perf_counter() - t0) / 10 * 1e3)
    lines.append(f"time per decode (m = {Y.shape[1]}): plain {times[0]:.1f} ms, robust {times[1]:.1f} ms, "
                 f"approxifer {times[2]:.1f} ms")
    return "\n".join(lines)


def write(text, out):
    """Put a setting's table into ``out``: in place of that setting's earlier table, else at the end;
    the file's header is rewritten to the current HEADER."""
    old = out.read_text() if out.exists() else HEADER
    i = old.find("\n## ")
    body = old[i:] if i >= 0 else ""
    key = text.lstrip("\n").split("(", 1)[0]  # "## name  K=.. N=.. S=.. A=..  "
    j = body.find("\n" + key)
    if j >= 0:
        k = body.find("\n## ", j + 1)
        body = body[:j] + "\n" + text.lstrip("\n").rstrip("\n") + "\n" + (body[k:] if k >= 0 else "")
    else:
        body = body.rstrip("\n") + "\n" + text.rstrip("\n") + "\n"
    out.write_text(HEADER.rstrip("\n") + "\n" + body)


def merge(text, out):
    """Put the method rows (and the time line) of a partial table ``text`` into the same setting's
    table in ``out``, replacing rows of the same method; the other rows stay as they are (every
    method's cells are deterministic at seed 0, so rerunning only some methods changes nothing else)."""
    new = text.strip("\n").split("\n")
    old = out.read_text()
    i = old.find("\n" + new[0] + "\n")
    if i < 0:
        raise SystemExit(f"no table {new[0]!r} in {out}: run the setting in full first")
    j = old.find("\n## ", i + 1)
    j = len(old) if j < 0 else j
    rows = old[i + 1:j].rstrip("\n").split("\n")
    for line in new[2:]:
        key = line[:10]
        at = [n for n, r in enumerate(rows) if r[:10] == key]
        if line.startswith("time per decode"):
            rows[-1] = line
        elif at:
            rows[at[0]] = line
        else:
            rows.insert(len(rows) - 1, line)  # before the time line
    body = old[:i + 1] + "\n".join(rows) + "\n" + old[j:]
    out.write_text(HEADER.rstrip("\n") + "\n" + body[body.find("\n## "):])  # the current header


if __name__ == "__main__":
    i = int(sys.argv[1])
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 6
    only = sys.argv[3].split(",") if len(sys.argv) > 3 else None  # a subset of METHODS: print only
    text = run(SETTINGS[i], rounds, only)
    print(text)
    out = Path(__file__).resolve().parent.parent / "results" / "byzantine_study" / "byzantine_study.txt"
    if only and sys.argv[4:] == ["--merge"]:  # and put those rows into the setting's table
        merge(text, out)
    elif not only:
        write(text, out)
