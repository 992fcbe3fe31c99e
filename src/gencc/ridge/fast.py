"""The linear-time solver: state-space two-filter smoothing, O(n m) per kernel and ridge
(Sobolev2 and Matern 1/2, 3/2, 5/2; :mod:`gencc.statespace`)."""

from __future__ import annotations

import numpy as np

from ..kernels import Kernel, Sobolev2
from ..statespace import TwoFilter, gauss_markov
from . import common as _common
from .common import _RIDGE_FLOOR, _Solution
from .path_row import PathRow


def _cubic_sums(t, W):
    """``sum_j W_j |t_i - t_j|^3`` for sorted ``t`` (n,), ``W`` (n, m): shape (n, m), O(n m).

    Expands ``(t_i - t_j)^3`` and accumulates prefix sums of ``W_j t_j^k``
    (k = 0..3) from the left and from the right; ``t`` is centred first.
    """
    t = t - 0.5 * (t[0] + t[-1])
    tp = np.stack([np.ones_like(t), t, t * t, t**3])[:, :, None]  # (4, n, 1)
    Wt = tp * W[None]  # W_j t_j^k
    left = np.cumsum(Wt, axis=1) - Wt  # sum over j < i
    right = np.cumsum(Wt[:, ::-1], axis=1)[:, ::-1] - Wt  # sum over j > i
    ti = tp[1]
    coef = (ti**3, -3 * ti**2, 3 * ti, -1.0)
    out = np.zeros_like(W)
    for k in range(4):
        out = out + coef[k] * (left[k] - right[k])
    return out


def _sobolev_scale(kernel: Kernel, ts):
    """Mean eigenvalue ``trace(Z^T G Z) / (n - 2)`` of the Sobolev2 Gram matrix in O(n).

    ``diag(G) = 0`` and ``Z Z^T = I - Q1 Q1^T`` give ``trace(Z^T G Z) =
    -trace(Q1^T G Q1) = -trace((T^T G T)(T^T T)^{-1})`` with ``T = [1, t]``;
    ``G T`` comes from :func:`_cubic_sums`.
    """
    T = np.vander(ts, 2, increasing=True)
    GT = _cubic_sums(ts, T) / (12.0 * kernel.scale**3)
    tr = -np.trace(np.linalg.solve(T.T @ T, T.T @ GT))
    return max(tr / (ts.size - 2), np.finfo(float).tiny)


class _FastSolver:
    """Linear-time kernel ridge regression by state-space two-filter smoothing.

    Serves a batch of kernels with state-space forms on the same nodes (any
    order, distinct) and targets; see :mod:`gencc.statespace` for the
    algorithm. Every quantity of the dense solver is exact here: ``c``,
    ``a = diag(A)``, predictions, leave-block-out residuals and the scale
    (mean eigenvalue of ``Z^T G Z``; 1 for Matern, O(n) prefix sums for
    Sobolev2).
    """

    def __init__(self, t, Y2):
        self.t, self.Y2 = t, Y2
        self.order = np.argsort(t, kind="stable")
        self.rank = np.empty_like(self.order)
        self.rank[self.order] = np.arange(t.size)
        self.sorted = bool(np.all(self.order[1:] > self.order[:-1]))  # given in sorted order: no permutations
        self.ts = t if self.sorted else t[self.order]
        self.Ys = np.ascontiguousarray(Y2 if self.sorted else Y2[self.order])
        self._scales = {}

    def scale(self, kernel) -> float:
        """Mean eigenvalue of the penalised Gram matrix ``Z^T G Z``."""
        if kernel not in self._scales:
            self._scales[kernel] = _sobolev_scale(kernel, self.ts) if type(kernel) is Sobolev2 else 1.0
        return self._scales[kernel]

    def nlam(self, kernel, lam, relative) -> float:
        n = self.t.size
        if not relative and kernel not in self._scales and type(kernel) is Sobolev2:
            # the scale (an O(n) pass, but the largest cost of a small fixed-ridge fit) only
            # matters when the floor binds; it is at most ||Z^T G Z||_2 <= n max|G_ij| =
            # n span^3 / (12 scale^3), so above that bound's floor n*lam is the answer
            span = float(self.ts[-1] - self.ts[0])
            if n * float(lam) >= _RIDGE_FLOOR * n * span**3 / (12.0 * kernel.scale**3):
                return n * float(lam)
        sc = self.scale(kernel)
        return max(float(lam) * sc if relative else n * float(lam), _RIDGE_FLOOR * sc)

    def sorted_blocks(self, blocks):
        """Blocks (original indices) as (target rank, first rank, last rank); None if one is not contiguous."""
        out = []
        for j, B in blocks:
            r = self.rank[np.asarray(B)]
            lo, hi = int(r.min()), int(r.max())
            if hi - lo + 1 != len(B):
                return None
            out.append((int(self.rank[j]), lo, hi))
        return np.array(out, dtype=np.int64).reshape(-1, 3)

    def _loo(self, tf):
        n = self.t.size
        i = np.arange(n)
        mu, v = tf.query(self.ts, i - 1, i + 1)
        loo = self.Ys[None] - mu
        a = 1.0 / (v + tf.sigma2[:, None])
        c = a[..., None] * loo
        if self.sorted:
            return c, a
        return c[:, self.rank], a[:, self.rank]  # back to the caller's order

    def _null_coef(self, kernel, c, nlam):
        if kernel.null_degree < 0:
            return np.zeros((0, c.shape[1]))
        cs = c[self.order]
        Gc = _cubic_sums(self.ts, cs) / (12.0 * kernel.scale**3)
        T = np.vander(self.ts, 2, increasing=True)
        return np.linalg.lstsq(T, self.Ys - nlam * cs - Gc, rcond=None)[0]

    def _solution(self, kernel, tf1, ca, nlam):
        """``tf1``: the one-model TwoFilter, or a callable returning it."""
        ts = self.ts
        get = tf1 if callable(tf1) else (lambda: tf1)

        def predict(s):
            iL = np.searchsorted(ts, s, side="right") - 1
            return get().query(s, iL, iL + 1)[0][0]

        def loo():
            c, a = self._loo(get())
            return c[0], a[0]

        return _Solution(self.t, nlam / self.t.size, predict, loo if ca is None else ca,
                         lambda c: self._null_coef(kernel, c, nlam))

    def batches(self, models):
        """Split ``models`` (list of (kernel, nlam)) into batches within the memory budget."""
        per = 2 * self.t.size * 3 * (self.Y2.shape[1] + 3) * 8.0
        size = max(1, int(_common.FAST_BATCH_BYTES // per))
        for i in range(0, len(models), size):
            yield models[i : i + size]

    def path(self, models, *, targets=None, blocks=None, loo=True):
        """Yield one row per (kernel, nlam) in ``models``, as :func:`ridge_path`'s rows.

        ``blocks`` must come from :meth:`sorted_blocks`. ``loo=False`` skips
        ``c`` and ``a`` (the row's ``solution()`` still builds them).
        """
        ts = self.ts
        for ib, batch in enumerate(self.batches(models)):
            tf = TwoFilter([gauss_markov(k) for k, _ in batch], [nl for _, nl in batch], ts, self.Ys)
            c = a = pred = res = None
            if loo:
                c, a = self._loo(tf)
            if targets is not None:
                s = np.asarray(targets, dtype=np.float64).reshape(-1)
                iL = np.searchsorted(ts, s, side="right") - 1
                pred = tf.query(s, iL, iL + 1)[0]
            if blocks is not None and len(blocks):
                j, lo, hi = blocks.T
                mu, _ = tf.query(ts[j], lo - 1, hi + 1)
                res = self.Ys[j][None] - mu
            for b, (kernel, nlam) in enumerate(batch):
                row = PathRow(nlam / ts.size, kernel=kernel, batch=ib)
                if loo:
                    row.c, row.a = c[b], a[b]
                if pred is not None:
                    row.pred = pred[b]
                if res is not None:
                    row.block = res[b]
                row.solution = (lambda lazy=False, b=b, tf=tf, kernel=kernel, nlam=nlam, row=row:
                                   self._materialise(tf, b, kernel, nlam, row, lazy))
                yield row

    def _materialise(self, tf, b, kernel, nlam, row, lazy=False):
        """Model b of the batch as a solution; ``lazy``: select it from the batch on first use
        (the solution then keeps the whole batch alive)."""
        ca = (row.c, row.a) if row.c is not None else None
        if not lazy:
            return self._solution(kernel, tf.select(b), ca, nlam)
        box = []

        def get():
            if not box:
                box.append(tf.select(b))
            return box[0]

        return self._solution(kernel, get, ca, nlam)

    def solve(self, kernel, lam) -> _Solution:
        """One kernel at one ridge ``lam`` (raised to the relative floor)."""
        row = next(self.path([(kernel, self.nlam(kernel, lam, False))]))
        return row.solution()
