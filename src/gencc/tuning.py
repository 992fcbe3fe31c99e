"""Choosing scheme hyper-parameters from a calibration batch of real inputs."""

from __future__ import annotations

import itertools

from .evaluate import evaluate

__all__ = ["tune"]


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
    table = []
    for values in itertools.product(*(param_grid[n] for n in names)):
        params = dict(zip(names, values))
        cand = scheme.with_params(**params)
        ev = evaluate(f, cand, X_calib, stragglers, rounds=rounds, seed=seed)
        table.append((params, ev.mean(metric)))
    table.sort(key=lambda row: (row[1] != row[1], row[1]))  # NaN last
    return scheme.with_params(**table[0][0]), table
