"""Screening returned outputs for Byzantine workers before a decode.

GCC's robust decode (``GCC(robust=True)``) calls :func:`screen_outliers` on
the returned outputs and decodes without the workers it flags. The peers
locate errors algebraically with :func:`berlekamp_welch`: ApproxIFER by a
rational fit per output coordinate and a vote, LCC (``n_adversaries``) by
a polynomial fit with an error locator, exact for polynomial f.
"""

from __future__ import annotations

import numpy as np
from numpy.polynomial import chebyshev

from ._validation import check_int
from .kernels import Kernel, Sobolev2
from .ridge import KernelRidge

__all__ = ["berlekamp_welch", "screen_outliers", "standardised_loo"]


def berlekamp_welch(t, Y, num_degree: int, den_degree: int) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares Berlekamp-Welch fits, one per column of ``Y``: the error locator at the nodes.

    Parameters
    ----------
    t : array_like, shape (n,)
        Nodes on [-1, 1] (the returned workers' points beta), distinct.
    Y : array_like, shape (n, m)
        Values at the nodes, one fit per column.
    num_degree, den_degree : int
        Degrees a and b of the polynomials P and Q of each fit; needs
        ``n >= a + b + 1`` for a unique fit of exact data.

    Returns
    -------
    locator : ndarray, shape (n, m)
        ``|Q_j(t_i)|`` over ``max_i |Q_j(t_i)|``: near 0 at the nodes the
        fit of column j judges wrong. Columns that are constant (no spread
        to fit) are all ones.
    valid : ndarray of bool, shape (m,)
        False for those constant columns.

    Notes
    -----
    For each column y, standardised as ``z = (y - median y) / s`` (s the
    median absolute deviation about the median, or the largest deviation
    where that is 0; an affine change of y keeps the degrees of P / Q), it
    finds P of degree a and Q of degree b, not both zero, minimising
    ``sum_i (P(t_i) - z_i Q(t_i))^2`` with the coefficients in the
    Chebyshev basis of unit norm: the right singular vector of the smallest
    singular value of ``[V_a, -diag(z) V_b]`` (n, a + b + 2), V the
    Chebyshev-Vandermonde matrices. If z agrees with a rational function
    p / q of type (a - e, b - e) except at e <= E nodes, with
    ``n >= a + b + 1``, then P = p L and Q = q L, L the error locator
    ``prod (t - t_err)``, solve it exactly [1]_: Q vanishes at the wrong
    nodes. For polynomial data take b = e (q = 1), the classical decoder
    of Reed-Solomon codes over the reals. For data that is only close to
    such a rational function the least-squares solution is an
    approximation, and so is the location.

    References
    ----------
    .. [1] L. R. Welch, E. R. Berlekamp, "Error correction for algebraic
       block codes", US Patent 4,633,470 (1986).
    """
    t = np.asarray(t, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64).reshape(t.size, -1)
    a = check_int(num_degree, "num_degree", minimum=0)
    b = check_int(den_degree, "den_degree", minimum=0)
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(Y))):
        raise ValueError("berlekamp_welch: t and Y must be finite")
    n, m = Y.shape
    med = np.median(Y, axis=0)
    dev = np.abs(Y - med)
    s = np.median(dev, axis=0)
    s = np.where(s > 0, s, dev.max(axis=0))
    valid = s > 0
    locator = np.ones((n, m))
    if not valid.any():
        return locator, valid
    Z = (Y[:, valid] - med[valid]) / s[valid]  # (n, m')
    Va = chebyshev.chebvander(t, a)
    Vb = chebyshev.chebvander(t, b)
    M = np.concatenate([np.broadcast_to(Va, (Z.shape[1], n, a + 1)), -Z.T[:, :, None] * Vb[None]], axis=2)
    Vt = np.linalg.svd(M, full_matrices=True)[2]  # (m', a + b + 2, a + b + 2)
    q = Vt[:, -1, a + 1:]  # the denominators' coefficients, (m', b + 1)
    Q = np.abs(Vb @ q.T)  # (n, m')
    top = Q.max(axis=0)
    locator[:, valid] = Q / np.where(top > 0, top, 1.0)
    return locator, valid


def standardised_loo(t, Y, kernel: Kernel | None = None, lam: float = 1e-8) -> np.ndarray:
    """Leave-one-out residuals standardised by their Gaussian-process variance.

    Parameters
    ----------
    t : array_like, shape (n,)
        Nodes (returned workers' points beta).
    Y : array_like, shape (n, m)
        Outputs.
    kernel : Kernel, default Sobolev2
    lam : float, default 1e-8
        With lam > 0 the process has a white-noise part of variance n lam
        sigma^2 and the same formula holds.

    Returns
    -------
    z : ndarray, shape (n, m)
        ``z = c / sqrt(a)``: the leave-one-out residual ``c / a`` times
        ``sqrt(a)``.

    Notes
    -----
    With the fit's coefficients c and ``a = diag(Z (Z^T G Z + n lam I)^{-1}
    Z^T)`` (:class:`gencc.ridge.KernelRidge`), the leave-one-out residual
    is ``r_i = c_i / a_i`` and, if y were a Gaussian process with kernel k
    (plus a white ridge term), ``Var r_i = sigma^2 / a_i``. So
    ``z_i = r_i sqrt(a_i) = c_i / sqrt(a_i)`` is the residual in units of
    its own standard deviation, which removes the dependence on the local
    node spacing (a straggler's hole, the dense ends of Chebyshev points).
    It is also the likelihood-ratio statistic for a single shift of y_i.
    Computed as ``sign(c) sqrt(c r)`` (c r = c^2 / a >= 0), without a.
    """
    return _standardised(t, Y, kernel, lam)[0]


def _standardised(t, Y, kernel, lam):
    """(z, r): standardised and plain leave-one-out residuals, both (n, m)."""
    fit = KernelRidge(Sobolev2() if kernel is None else kernel, lam).fit(t, Y)
    c, r = fit.coef_, fit.loo_residuals_
    return np.sign(c) * np.sqrt(np.abs(c * r)), r


def _pooled_scores(z):
    """Per row, the root-mean-square over coordinates of ``z`` in units of each
    coordinate's robust scale ``s = 1.4826 * median|z|``: (q, s, ok), with ``ok``
    the coordinates where s > 0; q is None where there is none."""
    s = 1.4826 * np.median(np.abs(z), axis=0)
    ok = s > 0
    if not ok.any():
        return None, s, ok
    return np.sqrt(np.mean((z[:, ok] / s[ok]) ** 2, axis=1)), s, ok


def _top_rows(score, real, n, above) -> list[int]:
    """The (at most ``n``) highest-scoring real rows, those above ``above``, highest first."""
    return [int(j) for j in np.argsort(-np.where(real, score, -np.inf), kind="stable")[:n]
            if real[j] and score[j] > above]


def screen_outliers(t, Y, *, min_keep: int, max_remove: int, threshold: float = 3.0,
                    kernel: Kernel | None = None, lam: float = 1e-8, local: int = 0,
                    local_threshold: float = 3.0, rtol: float = 1e-7, contrast: bool = False,
                    confirm: int = 3, gain: float = 4.0, pairs: bool = False, gross: float = 6.0,
                    gross_lam: float = 1e-4, rank_lam: float | None = None,
                    rank_threshold: float = 2.0, vote: float | None = 0.5,
                    also_lam: float | None = 1e-6, spacing_ref: int | None = None) -> np.ndarray:
    """Flag outputs inconsistent with a smooth curve through the rest, one at a time.

    Parameters
    ----------
    t : array_like, shape (n,)
        Nodes of the returned workers.
    Y : array_like, shape (n, m)
        Their outputs (flattened).
    min_keep : int
        Never flag so many that fewer than ``min_keep`` remain.
    max_remove : int
        At most this many are flagged.
    threshold : float, default 3.0
        A row is a candidate while its score exceeds this many robust
        standard deviations.
    kernel : Kernel, default Sobolev2
        A fixed kernel: the decoder's own kernel selection is not run while
        screening, so a liar cannot steer it.
    lam : float, default 1e-8
        The ridge of the confirmed stage's fit (the decoder's own).
    local : int, default 0
        If > 0 (and ``confirm`` is 0), score each row against the median
        score of its ``2 local`` nearest rows instead (flag when that ratio
        exceeds ``threshold`` and the score exceeds ``local_threshold``).
        Measured worse; kept for the study.
    local_threshold : float, default 3.0
    rtol : float, default 1e-7
        A row whose leave-one-out residuals are all below ``rtol`` times
        the outputs' scale (per coordinate) is never flagged: on a curve
        the kernel reproduces exactly, the residuals are round-off and
        their robust z-scores mean nothing.
    contrast : bool, default False
        Score ``z_i - (z_{i-1} + z_{i+1}) / 2`` (a spike against its
        neighbours) instead of z. Measured worse; kept for the study.
    confirm : int, default 3
        Confirmed removal (see Notes) among the ``confirm`` highest scores;
        0 flags the highest score alone while it exceeds ``threshold``.
    gain : float, default 4.0
        A removal is confirmed when it lowers the other rows' squared
        scores by more than ``gain`` median squared scores.
    pairs : bool, default False
        Also try removing each candidate together with its higher-scoring
        neighbour (two adjacent liars mask each other). Measured no better.
    gross : float, default 6.0
        With ``confirm``, first flag (unconfirmed) every row whose score in
        a smoothing fit (ridge ``gross_lam``) exceeds ``gross``; 0 skips it.
    gross_lam : float, default 1e-4
    rank_lam : float, optional
        Rank the confirmed stage's candidates by the scores of a fit at
        this ridge instead (those above ``rank_threshold``). Measured mixed
        (better on some settings, worse on others); kept for the study.
    rank_threshold : float, default 2.0
    vote : float or None, default 0.5
        A removal is confirmed only if, besides the pooled drop, it lowers
        the other rows' squared scores by more than ``gain`` of that
        coordinate's median squared score on at least this fraction of the
        output coordinates (see Notes). None: the pooled drop alone (the
        screen before this option).
    also_lam : float or None, default 1e-6
        Also take the confirmed stage's candidates from the ``confirm``
        highest scores (above ``threshold``) of a smoother fit at this
        ridge, besides those of the fit at ``lam``; their removal is still
        confirmed at ``lam``. None: only ``lam``'s candidates.
        ``vote=None, also_lam=None`` is the earlier screen exactly.
    spacing_ref : int or None, default None
        If set, every ridge above (``lam``, ``gross_lam``, ``also_lam``,
        ``rank_lam``) is the one for ``spacing_ref + 1`` rows; with n rows it
        is multiplied by ``min(1, (spacing_ref / (n - 1))^4)``, so each fit
        smooths over the same number of nodes at every N (see Notes: more
        liars found at N >= 160, but honest workers flagged at N = 1,000).
        None: the ridges as given at every n.

    Returns
    -------
    flagged : ndarray of int, shape (n_flagged,)
        Row indices into ``t`` / ``Y``, in the order they were flagged.

    Notes
    -----
    Scores. Per round, z = :func:`standardised_loo` on the rows kept
    (n', m); per output coordinate j a robust scale ``s_j = 1.4826
    median_i |z_ij|`` (the normal-consistent median absolute deviation
    about 0); per row ``q_i = sqrt(mean_j (z_ij / s_j)^2)``, a vector
    residual pooled over the m coordinates. Rows are removed one at a time
    and the fit redone, because a liar also inflates its neighbours'
    residuals (the curve bends towards it) and removing it first clears
    them.

    The null is the difficulty. f(u_enc(t)) is not a stationary process:
    on the workloads here honest leave-one-out residuals at N = 4K are
    0.2-1 standard deviations of the outputs (holding a node out doubles
    the gap the curve must bridge) and vary by 10-50x along t, and they
    do so in every coordinate at once (where u_enc moves fast). So a
    large q is not enough evidence. Two stages:

    1. Gross: with a smoothing fit (``gross_lam`` 1e-4; its standardised
       residuals are far less heavy-tailed than the interpolating fit's)
       flag while the top score exceeds ``gross`` (6).
    2. Confirmed: with the decoder's fit (``lam`` 1e-8), take the
       ``confirm`` (3) highest scores above ``threshold`` (3); for each,
       refit without it and measure how much the *other* rows' squared
       scores drop (in units of the median squared score). A liar's
       removal clears the residuals it induced in its neighbours (a
       large drop); an honest node in a wiggly stretch only widens a gap,
       and its neighbours' residuals stay or grow. The candidate with the
       largest drop above ``gain`` (4) is flagged; none: stop.

    Measured (``benchmarks/byzantine_study.py``, ``results/byzantine_study/byzantine_study.txt``):
    on honest outputs it costs 0.99-1.06x the plain decode's MSE
    (geometric mean over draws), but single draws up to 4x (x sin x,
    K = 8, N = 32: 0.4 false flags per decode). Outputs scaled by 10 are
    caught with recall 1.00 in all six settings, sign flips with 0.88-1.00
    at N = 16 but about 0.6 at K = 8, N = 32; attacks of the size of the
    honest leave-one-out residual (a one-standard-deviation bias, a copied
    output, random outputs in range) with recall 0.38-1.00, the colluding
    curve 0.12-0.81: they are not told apart from the honest curve at this
    resolution. Even an oracle that removes exactly the liars leaves
    1.3-4.1x the
    adversary-free MSE (A removals widen the holes), so the 2x target is
    out of reach for x sin x at N = 4K with A = N/10.

    Vote and a second candidate list (``vote`` 0.5, ``also_lam`` 1e-6).
    With the per-coordinate drop ``d_k = sum_{i != j} (z_ik / s_k)^2 -
    sum_i (z'_ik / s_k)^2`` (z' the refit without candidate j) and
    ``m_k = median_i (z_ik / s_k)^2``, removal of j also needs
    ``mean_k [d_k / m_k > gain] >= vote``: a vote of the coordinates, as
    ApproxIFER's locator votes. A liar's wrong output (sign flip, bias,
    copy, random, a colluding curve) is wrong in most coordinates; an
    honest node in a wiggly stretch usually bends the fit in one or two
    (x sin x: coordinates are independent functions, and false removals
    had drops like (400, -9, 0, -2) median squared scores). A voter
    counting any drop > 0 measured worse on x sin x (honest cost 3.40x at
    N = 16), and one voting on the candidate's own per-coordinate score
    lost recall. ``also_lam``: two liars near each other mask each other
    at lam 1e-8 (each explains the other's residual) but stand out in a
    smoother fit. Measured on the reproduce byzantine sweep's cells (seed
    of ``ReproduceConfig``, 40 draws, gcc-robust only; old = ``vote=None,
    also_lam=None``): honest cost (robust MSE over plain MSE, no liars)
    x sin x 3.28 -> 2.76 (N = 16), 2.46 -> 2.20 (N = 32); lenet5 1.18 ->
    0.98 and 1.02 -> 1.02; convnet 1.01 -> 1.00 and 1.13 -> 1.08; target
    cells "MSE within 2x" 7/72 -> 11/72; flag precision and recall >=
    0.95 in 5/60 -> 4/60 cells; mean precision 0.78 -> 0.82, recall 0.78
    -> 0.81, false flags per attacked draw 0.54 -> 0.40; geometric mean
    of MSE / clean over attacked cells 4.50 -> 4.12. ``vote`` 0.75 meets
    the flag target in 11/60 cells and costs less on honest x sin x
    (2.11x, 1.67x) but loses recall (0.67): 6/72 MSE cells, 5.4 geometric
    mean; ``also_lam`` alone: 11/72, 4/60, 4.18.

    Ridges that follow the node spacing (``spacing_ref``). A fit with
    ridge lam smooths over a width of about ``lam^(1/4)`` in t whatever n
    is (the equivalent kernel of a cubic smoothing spline), so ridges
    tuned at N = 16-32 smooth across many nodes at N in the hundreds: at
    K = 100, N = 1,000 (x sin x) the honest leave-one-out residuals at
    lam 1e-8 were 0.47 (median) against 0.002 at interpolation, as large
    as a sign flip, and the screen flagged almost nothing. Scaling every
    ridge by ``(64 / (n - 1))^4`` above 65 rows (``spacing_ref=64``: the
    same width in nodes) raised the mean recall over N = 80-1,000 (x sin x
    and a tanh MLP, four attacks, A = N/10, dev seed 11, 3 draws each) from
    0.49 to 0.68 and lowered the geometric-mean MSE over the adversary-free
    decode from 9.0e4 to 5.5e4, precision 0.90 -> 0.82, at no cost on that
    seed's honest outputs. Scaling from 32 rows found more (recall 0.76)
    but flagged honest workers (up to 1e7x the plain decode's MSE with no
    liar). On a fresh seed (2296131035, ``benchmarks/byzantine_scale.py``)
    the 64-row scaling again found more liars at N = 160-400 (recall 0.67
    against 0.48 on sign flips at N = 400, 0.49 against 0.13 on random
    outputs) but with no liar it cost 274x (x sin x) and 9.9x (the MLP) the
    plain decode's MSE at N = 1,000, where the fixed ridges cost 1.0x. So it
    is not the default: the screen must not hurt honest outputs.
    ``benchmarks/byzantine_scale.py`` scores both on the same draws.

    Alternatives measured and not taken: one stage at lam 1e-8 (threshold
    8: 2.4 false flags per honest decode on x sin x, K = 8); one stage at
    lam 1e-4, threshold 3 (good on lenet5, 4.6x honest cost on x sin x at
    K = 4, N = 16); a local scale; the spike contrast; pairs; ranking
    the candidates by a smoother fit's scores (``rank_lam`` 1e-4 or 1e-6:
    better in some settings, worse in others, within the noise of 16
    draws); a decoder
    ridge of 1e-4 or 1e-3 with or without screening (the adversarial-
    setting paper's remedy; it bounds a liar's influence only
    asymptotically: at these N it cost 1.0-12x on honest outputs and did
    not lower the attacked MSE).
    """
    t = np.asarray(t, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64).reshape(t.size, -1)
    if spacing_ref is not None:  # the same smoothing width in nodes at every n (Notes)
        scale = min(1.0, (check_int(spacing_ref, "spacing_ref", minimum=1) / max(t.size - 1, 1)) ** 4)
        lam, gross_lam = lam * scale, gross_lam * scale
        also_lam = None if also_lam is None else also_lam * scale
        rank_lam = None if rank_lam is None else rank_lam * scale
    keep = np.ones(t.size, dtype=bool)
    flagged = []
    if gross and confirm:  # first the gross liars, by the smoothing fit's scores alone
        first = screen_outliers(t, Y, min_keep=min_keep, max_remove=max_remove, threshold=gross,
                                kernel=kernel, lam=gross_lam, rtol=rtol, confirm=0, spacing_ref=None)
        keep[first] = False
        flagged = [int(i) for i in first]
    while len(flagged) < max_remove and keep.sum() > max(min_keep, 3):
        rows = np.flatnonzero(keep)
        z, r = _standardised(t[rows], Y[rows], kernel, lam)
        # a residual at round-off level (a curve the kernel reproduces) is never a liar's
        tiny = rtol * np.maximum(Y[rows].std(axis=0), np.abs(Y[rows]).max(axis=0))
        real = np.any(np.abs(r) > tiny, axis=1)
        if contrast:  # the spike against the mean of its two neighbours (rows sorted by t)
            zp = np.pad(z, ((1, 1), (0, 0)), mode="reflect")
            z = z - 0.5 * (zp[:-2] + zp[2:])
        q, s, ok = _pooled_scores(z)
        if q is None:
            break
        if local:
            # each row's score over the median score of its 2*local nearest rows (itself excluded)
            m = q.size
            ref = np.empty(m)
            for i in range(m):
                lo, hi = max(0, i - local), min(m, i + local + 1)
                nb = np.concatenate([q[lo:i], q[i + 1:hi]])
                ref[i] = np.median(nb) if nb.size else np.inf
            ratio = q / np.maximum(ref, np.finfo(float).tiny)
            cand = np.flatnonzero((q > local_threshold) & (ratio > threshold) & real)
            if cand.size == 0:
                break
            j = int(cand[np.argmax(ratio[cand])])
        elif confirm:
            # of the `confirm` highest-scoring rows above the threshold, the one whose removal lowers
            # the others' squared scores most, if by more than `gain` times the median squared score
            best, ref = None, max(float(np.median(q**2)), np.finfo(float).tiny)
            m = q.size
            rank = q
            if rank_lam is not None:  # candidates ranked by a smoother fit's scores
                rank = _pooled_scores(_standardised(t[rows], Y[rows], kernel, rank_lam)[0])[0]
                rank = q if rank is None else rank
            cands = _top_rows(rank, real, confirm, threshold if rank_lam is None else rank_threshold)
            if also_lam is not None:  # and the top of a smoother fit's scores (liars masking each other)
                qa = _pooled_scores(_standardised(t[rows], Y[rows], kernel, also_lam)[0])[0]
                if qa is not None:
                    cands += [j for j in _top_rows(qa, real, confirm, threshold) if j not in cands]
            if vote is not None:  # per coordinate: the scores in units of s, and their median square
                zs = z[:, ok] / s[ok]
                medk = np.maximum(np.median(z[:, ok] ** 2, axis=0) / s[ok] ** 2, np.finfo(float).tiny)
            for j in cands:
                # the row alone, and (pairs) with its higher-scoring neighbour: two adjacent liars mask
                # each other, and removing one of them alone explains little
                blocks = [[int(j)]]
                if pairs and len(flagged) + 2 <= max_remove and keep.sum() - 2 >= max(min_keep, 3):
                    nb = [i for i in (j - 1, j + 1) if 0 <= i < m]
                    blocks.append(sorted([int(j), max(nb, key=lambda i: q[i])]))
                for B in blocks:
                    sub = np.delete(rows, B)
                    if sub.size < 4:
                        continue
                    z2sq = (_standardised(t[sub], Y[sub], kernel, lam)[0][:, ok] / s[ok]) ** 2
                    q2 = np.mean(z2sq, axis=1)
                    g = (np.sum(np.delete(q, B) ** 2) - np.sum(q2)) / ref / len(B)
                    if vote is not None:  # each coordinate's own drop, in its own median squared scores
                        d = np.sum(np.delete(zs, B, axis=0) ** 2, axis=0) - np.sum(z2sq, axis=0)
                        if np.mean(d / medk > gain) < vote:
                            continue
                    if g > gain and (best is None or g > best[1]):
                        best = (B, g)
            if best is None:
                break
            for j in best[0]:
                keep[rows[j]] = False
                flagged.append(int(rows[j]))
            continue
        else:
            j = int(np.argmax(np.where(real, q, -np.inf)))
            if not (real[j] and q[j] > threshold):
                break
        keep[rows[j]] = False
        flagged.append(int(rows[j]))
    return np.asarray(flagged, dtype=np.int64)
