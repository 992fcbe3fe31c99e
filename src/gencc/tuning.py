"""Choosing scheme hyper-parameters from a calibration batch of real inputs."""

from __future__ import annotations

import itertools

import numpy as np

from .evaluate import evaluate

__all__ = ["tune", "search"]


class _Memo:
    """f with its outputs remembered by input bytes: every candidate of a search sees the same
    coded inputs unless it changes the encoder, so f runs once per distinct coded batch."""

    def __init__(self, f):
        self.f, self.cache = f, {}

    def __call__(self, X):
        X = np.ascontiguousarray(X, dtype=np.float64)
        key = (X.shape, X.tobytes())
        if key not in self.cache:
            self.cache[key] = np.asarray(self.f(X), dtype=np.float64)
        return self.cache[key]


def search(f, candidates, X, stragglers, *, rounds: int = 5, seed=0, metric: str = "mse") -> list:
    """Every candidate's mean ``metric`` on the same batches and straggler draws, best first.

    Parameters
    ----------
    f : callable
    candidates : sequence of (params, CodingScheme)
        ``params`` (a dict) labels the scheme in the table.
    X : array_like, shape (n, *in_shape)
        Inputs of f (batches of K are drawn from them).
    stragglers : StragglerModel
    rounds : int
        Batches per candidate.
    seed : int
    metric : str
        A metric of :class:`gencc.evaluate.Evaluation` (its mean is compared).

    Returns
    -------
    list of (dict, float)
        ``(params, mean metric)``, lowest first; NaN (nothing decoded) last.
    """
    g = _Memo(f)
    table = [(params, evaluate(g, scheme, X, stragglers, rounds=rounds, seed=seed).mean(metric))
             for params, scheme in candidates]
    table.sort(key=lambda row: (row[1] != row[1], row[1]))  # NaN last
    return table


def tune(f, scheme, X_calib, stragglers, param_grid: dict, *, rounds: int = 5, seed=0, metric: str = "mse"):
    """Grid-search scheme parameters by measured error on calibration inputs.

    Parameters
    ----------
    f : callable
        The vectorised function the scheme will serve.
    scheme : CodingScheme
        The starting scheme; each candidate is ``scheme.with_params(**params)``.
    X_calib : array_like, shape (n, *in_shape)
        Calibration inputs of f.
    stragglers : StragglerModel
        The straggler model to tune for.
    param_grid : dict of str -> sequence
        Parameter values to try (all combinations).
    rounds : int
        Batches per candidate; all candidates see the same batches and draws.
    seed : int
    metric : str
        Metric whose mean is minimised.

    Returns
    -------
    best : CodingScheme
    table : list of (dict, float)
        Every candidate's parameters and mean metric, best first.

    Examples
    --------
    >>> import numpy as np, gencc
    >>> X = np.random.default_rng(0).uniform(-1, 1, (50, 2))
    >>> best, table = gencc.tune(np.sin, gencc.LeTCC(4, 12), X, gencc.stragglers.RandomStragglers(2),
    ...                          {"lam_dec": [1e-8, 1e-2]}, rounds=2)
    >>> len(table)
    2
    """
    if not param_grid:
        raise ValueError("param_grid must name at least one parameter to tune")
    names = list(param_grid)
    grid = [dict(zip(names, values)) for values in itertools.product(*(param_grid[n] for n in names))]
    table = search(f, [(params, scheme.with_params(**params)) for params in grid], X_calib, stragglers,
                   rounds=rounds, seed=seed, metric=metric)
    return scheme.with_params(**table[0][0]), table
