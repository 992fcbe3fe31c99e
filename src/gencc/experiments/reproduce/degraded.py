"""``degraded``: systematic codes in degraded mode, as ParM reports them.

Per model, K and redundancy N - K, with S random stragglers: the share of
inputs answered exactly (their own systematic worker returned), the argmax
agreement with f over the other inputs (``degraded_accuracy``, classifiers),
their MSE (``degraded_mse``) and the RMSE over all inputs. Schemes by name:
``"<scheme>-sys"`` is the systematic variant (``worker_points="systematic"``),
LeTCC's at its best ridges; ``"parm"`` runs only at N - K = 1 and only where
``gencc.ParM`` exists (see ``cells.EXTRA_SCHEMES``).
"""

from __future__ import annotations

from . import plots
from .cells import make_cell, scheme_applies

COLUMNS = ["workload", "K", "N", "N-K", "S", "scheme", "params", "exact_share", "degraded_accuracy",
           "degraded_accuracy_std", "degraded_mse", "rmse", "accuracy", "cosine", "missing_rate", "failures"]


def stragglers_for(cfg, K, N) -> list:
    """The S of the config's ``degraded_Ss`` at (K, N): ``"N-K"`` is N - K; repeats dropped."""
    out = []
    for S in cfg.degraded_Ss:
        S = N - K if S == "N-K" else int(S)
        if 0 <= S < N and S not in out:
            out.append(S)
    return out


def cells(cfg):
    out = []
    for model in cfg.degraded_models:
        for K in cfg.degraded_Ks:
            for R in cfg.degraded_Rs:
                N = K + R
                for S in stragglers_for(cfg, K, N):
                    out += [make_cell(cfg, "degraded", model, N, K, name, "random", S=S, rounds=cfg.degraded_rounds)
                            for name in cfg.degraded_schemes if scheme_applies(name, K, N)]
    return out


def analyse(rows, cfg, folder):
    for r in rows:
        r["N-K"] = r["N"] - r["K"]
    plots.bar_panels(
        rows, cfg.degraded_schemes, setting=lambda r: (r["K"], r["N-K"], r["S"]),
        tick=lambda s: f"K={s[0]}\nN-K={s[1]} S={s[2]}",
        metric_of=lambda mrows: ("degraded_accuracy" if any(r.get("degraded_accuracy") is not None for r in mrows)
                                 else "degraded_mse"),
        ylabel=lambda m: ("argmax agreement, inputs without their systematic worker" if m == "degraded_accuracy"
                          else "MSE, inputs without their systematic worker"),
        path=folder / "degraded.png")
    return {}, []
