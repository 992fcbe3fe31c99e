"""`gencc reproduce`: the paper's experiments as six sweeps, resumable.

1. ``rate``: error against N (log grid) at fixed K and S, random and worst-case
   stragglers, with fitted log-log slopes and the O(S^3 N^-3) reference.
2. ``stragglers``: error and relative accuracy of a classifier against S at
   fixed N and K.
3. ``bernoulli``: each worker straggles independently with probability p;
   error against N for several p, with the O(log_{1/p}^3(N) N^-3) reference.
4. ``dnn``: RMSE and relative accuracy (cosine similarity for the embedding
   model), mean and std over many batches, per model and (N, K, S).
5. ``degraded``: systematic codes (and ParM where available) in degraded
   mode: exact share, argmax agreement and MSE over the inputs whose own
   systematic worker straggled, against K and N - K.
6. ``byzantine``: MSE, argmax agreement and flag precision/recall against the
   number of liars A (besides S stragglers), per attack of
   :mod:`gencc.byzantine`, for plain and robust GCC, BACC, LeTCC and an
   oracle that drops exactly the liars; and the fitted rate of robust GCC's
   MSE against N with A = round(N^a) liars.

Every cell (one scheme at one setting) is evaluated by :func:`gencc.evaluate`
and appended to ``<out>/<sweep>/cells.jsonl`` as soon as it is done, so an
interrupted run picks up where it stopped. All schemes of a setting see the
same batches and straggler draws. LeTCC runs at its best ridges from the
config's ``letcc_grid``, tuned on calibration batches of another seed; its rows
say which (``params``).

Modules: ``config`` (settings, sweep names), ``cells`` (a cell, its key, its
scheme, its run), ``store`` (cells.jsonl), ``analysis`` (slopes, references),
``plots`` (shared plotting), one module per sweep (its cells, table columns,
analysis and plot) and ``run`` (:func:`run_reproduce`).
"""

from __future__ import annotations

from .analysis import fit_slope
from .cells import CELL_VERSION, Cell
from .config import SWEEPS, ReproduceConfig
from .run import plan_cells as _cells
from .run import run_reproduce

__all__ = ["ReproduceConfig", "run_reproduce", "SWEEPS", "fit_slope"]
