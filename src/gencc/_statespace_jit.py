"""Compiled (numba) per-node recursions of :mod:`gencc.statespace`.

The NumPy implementation in :mod:`gencc.statespace` is the reference; these
kernels compute the same quantities with the same formulas, one model at a
time and only in the model's true state dimension p (1, 2 or 3), with the
transitions ``Phi(h)``, ``Q(h)`` evaluated on the fly instead of stored.
Importing this module raises ImportError when numba is missing; the caller
falls back to NumPy.

Notes
-----
Layouts (B models, n nodes, m outputs, K query points):

- ``Nk`` (B, 3, 3, 3): ``Nk[b, k] = N^k / k!`` padded with zeros;
- ``C`` (B, 5, 3, 3): ``q C_j`` padded, so ``Q(h) = sum_j C_j I_j(h)``;
- ``rate`` (B,), ``p`` (B,) int, ``diffuse`` (B,) bool, ``Pinf`` (B, 3, 3),
  ``Pinv`` (B, 3, 3) (zero for the flat prior), ``sigma2`` (B,), ``q`` (B,);
- filtered means ``mf`` (B, n, 3, m) and covariances ``Pf`` (B, n, 3, 3),
  padded entries zero; the backward filter runs on the mirrored data.

``I_j(h) = int_0^h exp(-2 lam s) s^j ds`` is ``j! / (2 lam)^(j+1) P(j+1, 2 lam h)``
(regularised lower incomplete gamma, by the series of
:func:`gencc.statespace._gammainc_int`) for ``lam > 0`` and ``h^(j+1) / (j+1)``
for the integrated Wiener process.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

_SERIES = 30


_RINV = 1.0 / np.arange(1, 64, dtype=np.float64)  # _RINV[i - 1] = 1 / i


@njit(cache=True, inline="always")
def _inc_gamma(jmax, x, ex, out):
    """out[a - 1] = P(a, x) for a = 1 .. jmax + 1 (as statespace._gammainc_int).

    For x <= 2 the tail ``sum_{i >= a0} x^i / i!`` is summed forward until its
    terms fall below 1e-17 of the sum (at most ``_SERIES`` terms, as the
    reference's Horner sum), with multiplications by reciprocals only.
    ``ex`` is ``exp(-x)``, which the caller has at hand.
    """
    a0 = jmax + 1
    if x > 2.0:
        term = 1.0
        head = 0.0
        for a in range(1, a0 + 1):  # head = sum_{i < a} x^i / i!
            head += term
            out[a - 1] = 1.0 - ex * head
            term = term * x * _RINV[a - 1]
        return
    # out[a - 1] <- x^a / a! for now
    pw = 1.0
    for a in range(1, a0 + 1):
        pw = pw * x * _RINV[a - 1]
        out[a - 1] = pw
    T = 1.0
    term = 1.0
    for i in range(a0 + 1, a0 + _SERIES + 1):
        term = term * x * _RINV[i - 1]
        T += term
        if term < 1e-17 * T:
            break
    acc = out[a0 - 1] * T
    out[a0 - 1] = acc * ex
    for a in range(a0 - 1, 0, -1):  # adding positive terms: no cancellation
        acc = acc + out[a - 1]
        out[a - 1] = acc * ex
    # (the loop reads out[a - 1] = x^a / a! before overwriting it)


@njit(cache=True, inline="always")
def _icoef(rate, p, out):
    """out[j] = j! / (2 lam)^(j + 1) for j < 2p - 1 (proper models)."""
    if rate > 0.0:
        r = 1.0 / (2.0 * rate)
        c = r
        for j in range(2 * p - 1):
            out[j] = c
            c = c * (j + 1) * r


@njit(cache=True, inline="always")
def _transition(Nk, C, rate, p, h, Phi, Q, inc, icoef):
    """Phi(h), Q(h) of one model into (p, p) blocks of Phi, Q (3, 3)."""
    J = 2 * p - 1
    hk = 1.0
    for i in range(p):
        for j in range(p):
            Phi[i, j] = Nk[0, i, j]
            Q[i, j] = 0.0
    for k in range(1, p):
        hk *= h
        for i in range(p):
            for j in range(p):
                Phi[i, j] += hk * Nk[k, i, j]
    if rate > 0.0:
        e = math.exp(-rate * h)
        for i in range(p):
            for j in range(p):
                Phi[i, j] *= e
        _inc_gamma(J - 1, 2.0 * rate * h, e * e, inc)
        for jj in range(J):
            Ij = icoef[jj] * inc[jj]
            for i in range(p):
                for j in range(p):
                    Q[i, j] += Ij * C[jj, i, j]
    else:
        hj = h
        for jj in range(J):
            Ij = hj * _RINV[jj]
            for i in range(p):
                for j in range(p):
                    Q[i, j] += Ij * C[jj, i, j]
            hj *= h


@njit(cache=True)
def _filter_one(Nk, C, rate, p, diffuse, P0, sigma2, t, Y, backward, mout, Pout):
    """Covariance-form Kalman filter of one model on sorted nodes t (mirrored if backward)."""
    n, m = Y.shape
    Phi = np.zeros((3, 3))
    Q = np.zeros((3, 3))
    inc = np.empty(5)
    Pp = np.zeros((3, 3))
    T1 = np.zeros((3, 3))
    mp = np.zeros((3, m))
    G = np.zeros(3)
    icoef = np.zeros(5)
    _icoef(rate, p, icoef)
    for k in range(n):
        yk = n - 1 - k if backward else k
        if k == 0:
            for i in range(p):
                for j in range(p):
                    Pp[i, j] = P0[i, j]
                for c in range(m):
                    mp[i, c] = 0.0
        else:
            h = t[n - k] - t[n - k - 1] if backward else t[k] - t[k - 1]
            _transition(Nk, C, rate, p, h, Phi, Q, inc, icoef)
            for i in range(p):
                for c in range(m):
                    mp[i, c] = 0.0
                for l in range(p):
                    f = Phi[i, l]
                    for c in range(m):
                        mp[i, c] += f * mout[k - 1, l, c]
                for j in range(p):
                    s = 0.0
                    for l in range(p):
                        s += Phi[i, l] * Pout[k - 1, l, j]
                    T1[i, j] = s
            for i in range(p):
                for j in range(p):
                    s = 0.0
                    for l in range(p):
                        s += T1[i, l] * Phi[j, l]
                    Pp[i, j] = s + Q[i, j]
        den = Pp[0, 0] + sigma2
        for i in range(p):
            G[i] = Pp[i, 0] / den
        for i in range(p):
            for j in range(p):
                Pout[k, i, j] = Pp[i, j] - G[i] * Pp[0, j]
            for c in range(m):
                mout[k, i, c] = mp[i, c] - G[i] * (mp[0, c] - Y[yk, c])
        if k == 1 and diffuse:
            h = t[n - 1] - t[n - 2] if backward else t[1] - t[0]
            y0 = n - 1 if backward else 0
            y1 = n - 2 if backward else 1
            for c in range(m):
                mout[1, 0, c] = Y[y1, c]
                mout[1, 1, c] = (Y[y1, c] - Y[y0, c]) / h
            Pout[1, 0, 0] = sigma2
            Pout[1, 0, 1] = sigma2 / h
            Pout[1, 1, 0] = sigma2 / h
            Pout[1, 1, 1] = (2 * sigma2 + Q[0, 0]) / h**2


@njit(cache=True)
def _filters_loops(Nk, C, rate, p, diffuse, Pinf, sigma2, t, Y, mf, Pf, mb, Pb):
    """Forward and backward filters of every model, the loop version of :func:`filters`."""
    B = rate.size
    for b in range(B):
        _filter_one(Nk[b], C[b], rate[b], p[b], diffuse[b], Pinf[b], sigma2[b], t, Y, False, mf[b], Pf[b])
        _filter_one(Nk[b], C[b], rate[b], p[b], diffuse[b], Pinf[b], sigma2[b], t, Y, True, mb[b], Pb[b])


@njit(cache=True, inline="always")
def _solve_small(A, x, p):
    """Solve A z = x in place (x <- z) for p <= 3 by Gaussian elimination with partial pivoting."""
    for col in range(p):
        piv = col
        big = abs(A[col, col])
        for r in range(col + 1, p):
            if abs(A[r, col]) > big:
                big = abs(A[r, col])
                piv = r
        if piv != col:
            for j in range(p):
                tmp = A[col, j]
                A[col, j] = A[piv, j]
                A[piv, j] = tmp
            tmp = x[col]
            x[col] = x[piv]
            x[piv] = tmp
        for r in range(col + 1, p):
            f = A[r, col] / A[col, col]
            for j in range(col, p):
                A[r, j] -= f * A[col, j]
            x[r] -= f * x[col]
    for r in range(p - 1, -1, -1):
        s = x[r]
        for j in range(r + 1, p):
            s -= A[r, j] * x[j]
        x[r] = s / A[r, r]


@njit(cache=True, inline="always")
def _propagate(Phi, P, b, k, Q, out, T1, p):
    """out = Phi P[b, k] Phi^T + Q."""
    for i in range(p):
        for j in range(p):
            s = 0.0
            for l in range(p):
                s += Phi[i, l] * P[b, k, l, j]
            T1[i, j] = s
    for i in range(p):
        for j in range(p):
            s = 0.0
            for l in range(p):
                s += T1[i, l] * Phi[j, l]
            out[i, j] = s + Q[i, j]


@njit(cache=True)
def _query_loops(Nk, C, rate, p, diffuse, Pinf, Pinv, sigma2, q, t, Y, mf, Pf, mb, Pb, tau, iL, iR, mean, var,
                 bsel, ksel):
    """Posterior mean (B, K, m) and variance (B, K) of u(tau) from nodes <= iL and >= iR.

    As ``TwoFilter._query`` (general combination) and ``TwoFilter._flat_edges``
    (flat prior with one node or none on a side), per (model, point), for
    the models ``bsel`` and points ``ksel``: the loop version, used for the
    flat-prior edges (:func:`query` runs the unrolled one elsewhere).
    """
    n, m = Y.shape
    PhL = np.zeros((3, 3))
    PhR = np.zeros((3, 3))
    QL = np.zeros((3, 3))
    QR = np.zeros((3, 3))
    Pfk = np.zeros((3, 3))
    Pbk = np.zeros((3, 3))
    T1 = np.zeros((3, 3))
    R = np.zeros((3, 3))
    M = np.zeros((3, 3))
    d = np.zeros(3)
    w = np.zeros(3)
    u = np.zeros(3)
    cL = np.zeros(3)
    cR = np.zeros(3)
    inc = np.empty(5)
    mfk = np.zeros((2, m))
    mbk = np.zeros((2, m))
    S = np.array([1.0, -1.0, 1.0])
    icoef = np.zeros(5)
    for b in bsel:
        pb = p[b]
        dfb = diffuse[b]
        _icoef(rate[b], pb, icoef)
        Nkb = Nk[b]
        Cb = C[b]
        rateb = rate[b]
        for k in ksel:
            a, r_ = iL[k], iR[k]
            hasL = a >= 0
            hasR = r_ < n
            jL = a if hasL else 0
            jR = r_ if hasR else n - 1
            hL = tau[k] - t[jL] if hasL else 0.0
            hR = t[jR] - tau[k] if hasR else 0.0
            rb = n - 1 - jR
            _transition(Nkb, Cb, rateb, pb, hL, PhL, QL, inc, icoef)
            _transition(Nkb, Cb, rateb, pb, hR, PhR, QR, inc, icoef)
            if hasL:
                _propagate(PhL, Pf, b, jL, QL, Pfk, T1, pb)
            else:
                for i in range(pb):
                    for j in range(pb):
                        Pfk[i, j] = Pinf[b, i, j]
            if hasR:
                _propagate(PhR, Pb, b, rb, QR, Pbk, T1, pb)
                for i in range(pb):
                    for j in range(pb):
                        Pbk[i, j] *= S[i] * S[j]
            else:
                for i in range(pb):
                    for j in range(pb):
                        Pbk[i, j] = Pinf[b, i, j]
            edge = not (a >= 1 and r_ <= n - 2)
            if dfb and edge:
                # flat prior, a side with one node (a scalar observation) or none
                propL = a >= 1
                propR = r_ <= n - 2
                s2 = sigma2[b]
                rL = s2 + q[b] * (hL**3 / 3)
                rR = s2 + q[b] * (hR**3 / 3)
                for i in range(2):
                    for c in range(m):
                        sf = 0.0
                        sb = 0.0
                        for l in range(pb):
                            sf += PhL[i, l] * mf[b, jL, l, c]
                            sb += PhR[i, l] * mb[b, rb, l, c]
                        mfk[i, c] = sf
                        mbk[i, c] = S[i] * sb
                if (propR and a == 0) or (propL and r_ == n - 1):
                    if propR and a == 0:
                        P, mm, g1, yrow, rr = Pbk, mbk, -hL, 0, rL
                    else:
                        P, mm, g1, yrow, rr = Pfk, mfk, hR, n - 1, rR
                    # condition on u - hL u' = y_0 (or u + hR u' = y_{n-1})
                    Pg0 = P[0, 0] + P[0, 1] * g1
                    Pg1 = P[1, 0] + P[1, 1] * g1
                    s = Pg0 + g1 * Pg1 + rr
                    K0 = Pg0 / s
                    for c in range(m):
                        innov = Y[yrow, c] - (mm[0, c] + g1 * mm[1, c])
                        mean[b, k, c] = mm[0, c] + K0 * innov
                    var[b, k] = P[0, 0] - K0 * Pg0
                elif propR and a < 0:
                    for c in range(m):
                        mean[b, k, c] = mbk[0, c]
                    var[b, k] = Pbk[0, 0]
                elif propL and r_ >= n:
                    for c in range(m):
                        mean[b, k, c] = mfk[0, c]
                    var[b, k] = Pfk[0, 0]
                elif a == 0 and r_ == n - 1:
                    det = hR + hL
                    wL = hR / det
                    wR = hL / det
                    for c in range(m):
                        mean[b, k, c] = wL * Y[0, c] + wR * Y[n - 1, c]
                    var[b, k] = wL**2 * rL + wR**2 * rR
                else:
                    for c in range(m):
                        mean[b, k, c] = np.nan
                    var[b, k] = np.nan
                continue
            # R = I - Pb Pinf^{-1}, M = Pb + R Pf
            for i in range(pb):
                for j in range(pb):
                    s = 0.0
                    for l in range(pb):
                        s += Pbk[i, l] * Pinv[b, l, j]
                    R[i, j] = (1.0 if i == j else 0.0) - s
            for i in range(pb):
                for j in range(pb):
                    s = 0.0
                    for l in range(pb):
                        s += R[i, l] * Pfk[l, j]
                    M[i, j] = Pbk[i, j] + s
            for i in range(pb):
                di = math.sqrt(abs(Pfk[i, i]) + abs(Pbk[i, i]))
                d[i] = di if di > 0 else 1.0
            # w^T = Pf[0, :] M^{-1}: solve M^T w = Pf[0, :], scaled by d
            for i in range(pb):
                for j in range(pb):
                    T1[i, j] = M[j, i] / d[i] / d[j]
                w[i] = Pfk[0, i] / d[i]
            _solve_small(T1, w, pb)
            for i in range(pb):
                w[i] /= d[i]
            for i in range(pb):
                s = 0.0
                for j in range(pb):
                    s += R[j, i] * w[j]
                u[i] = s
            v = Pfk[0, 0]
            for i in range(pb):
                v -= u[i] * Pfk[i, 0]
            var[b, k] = v
            for j in range(pb):
                sl = 0.0
                sr = 0.0
                for i in range(pb):
                    sl += ((1.0 if i == 0 else 0.0) - u[i]) * PhL[i, j]
                    sr += w[i] * S[i] * PhR[i, j]
                cL[j] = sl if hasL else 0.0
                cR[j] = sr if hasR else 0.0
            for c in range(m):
                s = 0.0
                for i in range(pb):
                    s += cL[i] * mf[b, jL, i, c] + cR[i] * mb[b, rb, i, c]
                mean[b, k, c] = s


from ._statespace_gen import (_filter_p1, _filter_p2, _filter_p3, _query_p1, _query_p2,  # noqa: E402
                              _query_p3)


@njit(cache=True)
def filters(Nk, C, rate, p, diffuse, Pinf, sigma2, t, Y, mf, Pf, mb, Pb):
    """Forward and backward filters of every model: fills mf, Pf, mb, Pb (B, n, 3, .).

    The unrolled per-dimension filters of :mod:`gencc._statespace_gen`."""
    B = rate.size
    n = t.size
    icoef = np.zeros(5)
    FS = np.zeros((n, 3, 3))
    QS = np.zeros((n, 3, 3))
    for b in range(B):
        _icoef(rate[b], p[b], icoef)
        for back in range(2):  # forward first: the backward pass reuses its transitions
            mo = mb[b] if back else mf[b]
            Po = Pb[b] if back else Pf[b]
            if p[b] == 1:
                _filter_p1(Nk[b], C[b], rate[b], icoef, diffuse[b], Pinf[b], sigma2[b], t, Y, back == 1, mo, Po, FS, QS)
            elif p[b] == 2:
                _filter_p2(Nk[b], C[b], rate[b], icoef, diffuse[b], Pinf[b], sigma2[b], t, Y, back == 1, mo, Po, FS, QS)
            else:
                _filter_p3(Nk[b], C[b], rate[b], icoef, diffuse[b], Pinf[b], sigma2[b], t, Y, back == 1, mo, Po, FS, QS)


@njit(cache=True)
def query(Nk, C, rate, p, diffuse, Pinf, Pinv, sigma2, q, t, Y, mf, Pf, mb, Pb, tau, iL, iR, mean, var):
    """Posterior mean (B, K, m) and variance (B, K) of u(tau) from nodes <= iL and >= iR.

    The unrolled per-dimension queries of :mod:`gencc._statespace_gen`, and
    the loop version for the flat-prior edges (a side with one node or none).
    """
    B = rate.size
    n = t.size
    K = tau.size
    edge = np.zeros(K, dtype=np.bool_)
    noskip = np.zeros(K, dtype=np.bool_)
    ne = 0
    for k in range(K):
        if not (iL[k] >= 1 and iR[k] <= n - 2):
            edge[k] = True
            ne += 1
    kedge = np.empty(ne, dtype=np.int64)
    j = 0
    for k in range(K):
        if edge[k]:
            kedge[j] = k
            j += 1
    icoef = np.zeros(5)
    for b in range(B):
        _icoef(rate[b], p[b], icoef)
        skip = edge if diffuse[b] else noskip
        if p[b] == 1:
            _query_p1(b, Nk[b], C[b], rate[b], icoef, Pinf, Pinv, t, mf, Pf, mb, Pb, tau, iL, iR, mean, var, skip)
        elif p[b] == 2:
            _query_p2(b, Nk[b], C[b], rate[b], icoef, Pinf, Pinv, t, mf, Pf, mb, Pb, tau, iL, iR, mean, var, skip)
        else:
            _query_p3(b, Nk[b], C[b], rate[b], icoef, Pinf, Pinv, t, mf, Pf, mb, Pb, tau, iL, iR, mean, var, skip)
        if diffuse[b] and ne:
            bsel = np.full(1, b, dtype=np.int64)
            _query_loops(Nk, C, rate, p, diffuse, Pinf, Pinv, sigma2, q, t, Y, mf, Pf, mb, Pb, tau, iL, iR, mean,
                         var, bsel, kedge)
