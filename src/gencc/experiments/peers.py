"""Peers at their best: LeTCC with ridges chosen on calibration batches.

A comparison is fair only when every scheme runs at good settings. LeTCC's two
smoothing parameters matter a lot, so wherever gencc compares schemes it picks
them from a stated grid with :func:`gencc.tune`, on calibration batches drawn
with another seed than the evaluation batches but under the same straggler
model.
"""

from __future__ import annotations

from ..schemes import LeTCC
from ..tuning import tune

__all__ = ["LETCC_GRID", "best_letcc", "tuned", "params_label"]

# (parameter, values) pairs; every combination is tried
LETCC_GRID = (("lam_dec", (0.0, 1e-8, 1e-6, 1e-4, 1e-2)), ("lam_enc", (0.0, 1e-6, 1e-4)))


def params_label(params: dict) -> str:
    """``{"lam_dec": 1e-6, "lam_enc": 0.0}`` -> ``"lam_dec=1e-06, lam_enc=0"``."""
    return ", ".join(f"{k}={v:g}" if isinstance(v, (int, float)) else f"{k}={v}" for k, v in params.items())


def tuned(f, scheme, X, stragglers, grid=LETCC_GRID, rounds: int = 5, seed=1):
    """``scheme`` at its best parameters from ``grid`` (lowest mean MSE).

    Parameters
    ----------
    f : callable
    scheme : CodingScheme
    X : array_like
        Pool the calibration batches are drawn from.
    stragglers : StragglerModel
    grid : sequence of (name, values) pairs, or dict
    rounds : int
        Calibration batches per candidate.
    seed : int
        Seed of the calibration batches and draws: not the evaluation's.

    Returns
    -------
    scheme : CodingScheme
    label : str
        The chosen parameters, e.g. ``"lam_dec=1e-06, lam_enc=0"``.
    """
    grid = dict(grid)
    best, table = tune(f, scheme, X, stragglers, grid, rounds=rounds, seed=seed)
    return best, params_label(table[0][0])


def best_letcc(f, K, N, X, stragglers, grid=LETCC_GRID, rounds: int = 5, seed=1, **scheme_kw):
    """LeTCC(K, N, **scheme_kw) at its best ridges from ``grid``; see :func:`tuned`."""
    return tuned(f, LeTCC(K, N, **scheme_kw), X, stragglers, grid, rounds, seed)
