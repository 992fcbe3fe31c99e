"""Side-by-side accuracy of several schemes on one workload and straggler model."""

from __future__ import annotations

import numpy as np

from ..evaluate import evaluate
from ..schemes import make_scheme

__all__ = ["compare_schemes", "build_schemes", "ROW_COLUMNS"]

ROW_COLUMNS = ["scheme", "N", "K", "stragglers", "mse", "mse_ci95", "nmse", "rmse", "max_error", "accuracy",
               "failures", "missing_rate", "returned"]


def build_schemes(names, n_inputs, n_workers, lcc_degree: int = 1):
    """Schemes by name at the same (K, N); uncoded runs on K workers."""
    out = []
    for name in names:
        kw = {"degree": lcc_degree} if name == "lcc" else {}
        out.append(make_scheme(name, n_inputs, n_inputs if name == "uncoded" else n_workers, **kw))
    return out


def compare_schemes(workload, schemes, stragglers, *, rounds=20, draws=1, seed=0, progress=False, extra=None):
    """Evaluate each scheme on the same batches and straggler draws.

    Parameters
    ----------
    workload : LoadedWorkload
    schemes : sequence of CodingScheme
    stragglers : StragglerModel or callable(scheme) -> StragglerModel
    rounds, draws, seed : see :func:`gencc.evaluate`

    Returns
    -------
    rows : list of dict
        One per scheme, columns ``ROW_COLUMNS`` plus ``extra``.
    evaluations : list of Evaluation
    """
    rows, evals = [], []
    for s in schemes:
        model = stragglers(s) if callable(stragglers) and not hasattr(stragglers, "returned") else stragglers
        ev = evaluate(workload.f, s, workload.X, model, rounds=rounds, draws=draws, seed=seed,
                      task=workload.harness_task, progress=progress)
        m = ev.metrics
        mse = m["mse"]
        rows.append({
            **(extra or {}),
            "scheme": s.name, "N": s.n_workers, "K": s.n_inputs, "stragglers": type(model).__name__,
            "mse": ev.mean("mse"),
            "mse_ci95": None if mse is None else (mse.ci_high - mse.ci_low) / 2,
            "nmse": ev.mean("nmse"), "rmse": ev.mean("rmse"), "max_error": ev.mean("max_error"),
            "accuracy": ev.mean("accuracy") if "accuracy" in m else None,
            "failures": ev.failures, "missing_rate": ev.missing_rate, "returned": ev.returned_mean,
        })
        evals.append(ev)
    return rows, evals


