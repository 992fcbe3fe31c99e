"""Gauss-Markov (state-space) forms of the Sobolev-2 and Matern kernels.

Kernel ridge regression with these kernels is the posterior mean of a
Gauss-Markov process observed in white noise, so it can be computed in
O(n) per output coordinate by Kalman filtering instead of O(n^3) dense
algebra. This module holds the models (exact transition matrices) and the
linear-time two-filter smoother that :mod:`gencc.ridge` uses as its fast
solver; it knows nothing of ridge selection.

Notes
-----
*Models.* Matern with ``nu = p - 1/2`` and length scale ``ell`` is the
stationary solution of ``(d/dt + lam)^p u = sqrt(q) w(t)`` (w white noise,
``lam = sqrt(2 nu) / ell``), a p-dimensional state ``x = (u, u', ...)`` with
companion matrix ``F``; ``F + lam I = N`` is nilpotent, so the transition
over a step h is exactly ``Phi(h) = exp(-lam h) sum_k N^k h^k / k!`` and its
noise covariance ``Q(h) = q sum_{k,l} v_k v_l^T / (k! l!) int_0^h
exp(-2 lam s) s^(k+l) ds`` with ``v_k = N^k e_p``; the integrals are
regularised incomplete gamma functions, accurate for tiny steps (no
``Pinf - Phi Pinf Phi^T`` cancellation). q is fixed by ``Pinf[0, 0] = k(0) =
1`` [3]_. Sobolev-2 (``|s-t|^3 / (12 scale^3)``) is the integrated Wiener
process, ``u'' = scale^(-3/2) w``, with a diffuse (flat) prior on the initial
state ``(u, u')``: the flat prior is the unpenalised affine null space, and
the posterior mean is the cubic smoothing spline [1]_ [4]_. The objective
``(1/n) sum |u(t_i) - y_i|^2 + lam |u|_H^2`` is the posterior mean with noise
variance ``sigma2 = n lam``.

*Two filters.* A covariance-form Kalman filter runs left to right, and the
same filter runs on the mirrored data (``t -> -t``, which leaves both models
invariant up to the sign flip ``S = diag(1, -1, 1)`` of odd derivatives).
The prediction of u at a point tau from the nodes left of index ``iL``
(inclusive) and right of ``iR`` (inclusive) combines the forward posterior
``N(mf, Pf)`` (propagated to tau) with the backward one ``N(mb, Pb)``; both
contain the prior ``Pinf`` once, which is divided out:
``M = Pb + R Pf``, ``R = I - Pb Pinf^{-1}``, mean ``mf + Pf M^{-1} (mb - R
mf)``, variance ``Pf - Pf M^{-1} R Pf`` (``R = I`` for the flat prior). Only
``M`` is inverted, never a covariance. This gives, each in O(1) after the two
O(n) passes: predictions off the nodes (``iL``, ``iL + 1`` around tau), the
leave-one-out prediction and variance ``v_-i`` (``iL = i - 1``,
``iR = i + 1``), hence the hat-matrix diagonal ``a_i = 1 / (v_-i + sigma2)``
and kernel coefficients ``c_i = a_i (y_i - u_-i(t_i))`` without the
cancellation of ``(y - u(t)) / sigma2``, and leave-block-out predictions for
contiguous blocks (the gap criterion) [2]_. With the flat prior a side with a
single node is not a proper Gaussian; it enters as one scalar observation of
the state at tau (``u - h u' = y_0`` with variance ``sigma2 + h^3 / 3``),
and the forward filter starts exactly at the second node from the two-point
posterior ``u = y_1``, ``u' = (y_1 - y_0) / h``.

*Cost.* Everything is O(n m) per model. The NumPy implementation here (the
reference, and the fallback when numba is missing or ``GENCC_NO_NUMBA`` is
set) takes one Python step per node, vectorised over the models and both
directions, about 20 us per node on one core: GCC's default decode (16
candidate kernels) at N = 1,000 took 37-63 ms against 1.9-3 s dense. A
segmented parallel-prefix filter [5]_ (O(sqrt n) Python steps) was tried and
was 6.5x slower in NumPy, whose batched 3 x 3 algebra costs far more per
matrix than a loop step. The compiled path (:mod:`gencc._statespace_jit`,
``USE_COMPILED``) runs the same recursions per model in numba, with the
3 x 3 algebra unrolled per state dimension p (:mod:`gencc._statespace_gen`,
written by ``tools/gen_statespace_jit.py``: loops over p ran 3-5x slower),
the transitions evaluated on the fly and shared by the two passes: about
0.1 us per node and model, and the same default decode in 3.2-4.7 ms. It equals the NumPy path to 1e-12 relative (tests). Its first
call compiles for about 20 s of CPU; ``cache=True`` keeps the machine code
in ``__pycache__``, so a later process loads it in well under a second.

References
----------
.. [1] M. R. Wecker and C. F. Ansley, "The signal extraction approach to
   nonlinear regression and spline smoothing", JASA 78 (1983) 81-89.
.. [2] M. F. Hutchinson and F. R. de Hoog, "Smoothing noisy data with spline
   functions", Numer. Math. 47 (1985) 99-106.
.. [3] J. Hartikainen and S. Sarkka, "Kalman filtering and smoothing solutions
   to temporal Gaussian process regression models", MLSP 2010.
.. [4] C. H. Reinsch, "Smoothing by spline functions", Numer. Math. 10 (1967)
   177-183.
.. [5] S. Sarkka and A. F. Garcia-Fernandez, "Temporal parallelization of
   Bayesian smoothers", IEEE Trans. Automatic Control 66 (2021) 299-306.
"""

from __future__ import annotations

import os
from math import comb, factorial

import numpy as np

from .kernels import Kernel, Matern, Sobolev2

try:  # the compiled per-node recursions; NumPy (below) is the reference and the fallback
    from . import _statespace_jit as _jit
except ImportError:  # pragma: no cover - numba missing
    _jit = None

__all__ = ["GaussMarkov", "gauss_markov", "has_state_space", "transitions", "TwoFilter", "USE_COMPILED",
           "compiled_available"]

#: Whether :class:`TwoFilter` runs the compiled (numba) recursions. True when
#: numba imports, unless the environment variable ``GENCC_NO_NUMBA`` is set to
#: a non-empty value other than "0"; set it to False to force the NumPy reference.
USE_COMPILED = _jit is not None and os.environ.get("GENCC_NO_NUMBA", "") in ("", "0")


def compiled_available() -> bool:
    """Whether the compiled (numba) recursions could be imported."""
    return _jit is not None

_P = 3  # every model is embedded in a 3-dim state so that kernels batch together
_QUERY_CHUNK = 32768  # (point, model) pairs per vectorised query step: bounds its memory


def has_state_space(kernel: Kernel) -> bool:
    """Whether ``kernel`` has an exact state-space form (Sobolev2, Matern 1/2, 3/2, 5/2)."""
    return type(kernel) is Sobolev2 or (type(kernel) is Matern and kernel.nu in (0.5, 1.5, 2.5))


_SERIES = 30  # terms of the exponential series; x <= 2 leaves a relative tail below 1e-17


def _gammainc_int(jmax: int, x) -> np.ndarray:
    """Regularised lower incomplete gamma ``P(a, x)`` for a = 1 .. jmax + 1: shape (len(x), jmax + 1).

    ``P(a, x) = 1 - exp(-x) sum_{i<a} x^i / i!`` for x > 2 and
    ``exp(-x) sum_{i>=a} x^i / i!`` (no cancellation) for x <= 2; equal to
    ``scipy.special.gammainc`` to round-off, and several times cheaper.
    """
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    xs = np.minimum(x, 2.0)
    a0 = jmax + 1
    powers = [np.ones_like(xs)]  # xs^a / a!
    for a in range(1, a0 + 1):
        powers.append(powers[-1] * xs / a)
    T = np.ones_like(xs)  # Horner: sum_{i >= a0} xs^i / i! = xs^a0 / a0! * T
    for i in range(a0 + _SERIES, a0, -1):
        T = 1.0 + xs * T / i
    small = np.empty((x.size, a0))
    small[:, a0 - 1] = powers[a0] * T
    for a in range(a0 - 1, 0, -1):  # adding positive terms: no cancellation
        small[:, a - 1] = small[:, a] + powers[a]
    ex = np.exp(-x)[:, None]
    small *= ex
    big = x > 2.0
    if big.any():
        xb = x[big]
        steps_b = np.empty((xb.size, jmax + 1))
        steps_b[:, 0] = 1.0
        steps_b[:, 1:] = xb[:, None] / np.arange(1, jmax + 1)
        head = np.cumsum(np.cumprod(steps_b, axis=1), axis=1)  # sum_{i < a}
        small[big] = 1.0 - ex[big] * head
    return small


class GaussMarkov:
    """Exact state-space model of a kernel, embedded in a 3-dim state.

    Parameters
    ----------
    kernel : Sobolev2 or Matern

    Attributes
    ----------
    p : int
        True state dimension (1, 2 or 3).
    rate : float
        ``lam`` in ``(d/dt + lam)^p``; 0 for the integrated Wiener process.
    diffuse : bool
        Flat prior on the initial state (Sobolev2).
    Pinf : ndarray, shape (3, 3)
        Stationary covariance (identity in the padded dimensions; identity
        also for the diffuse model, where it is not used).
    """

    def __init__(self, kernel: Kernel):
        if not has_state_space(kernel):
            raise ValueError(f"kernel {kernel} has no state-space form")
        self.kernel = kernel
        if type(kernel) is Sobolev2:
            self.p, self.rate, self.diffuse = 2, 0.0, True
            N = np.array([[0.0, 1.0], [0.0, 0.0]])
            self.q = float(kernel.scale) ** -3
        else:
            p = int(kernel.nu + 0.5)
            self.p, self.diffuse = p, False
            lam = np.sqrt(2.0 * kernel.nu) / kernel.scale
            self.rate = float(lam)
            A = np.zeros((p, p))
            A[:-1, 1:] = np.eye(p - 1)
            A[-1] = [-comb(p, k) * lam ** (p - k) for k in range(p)]
            N = A + lam * np.eye(p)
            self.q = 1.0
        p = self.p
        powers = [np.linalg.matrix_power(N, k) for k in range(p)]
        self._Nk = [Nk / factorial(k) for k, Nk in enumerate(powers)]  # N^k / k!
        e = np.zeros(p)
        e[-1] = 1.0
        v = [Nk @ e for Nk in powers]
        # Q(h) = q sum_j C_j I_j(h), I_j = int_0^h exp(-2 lam s) s^j ds
        self._C = [sum(np.outer(v[k], v[j - k]) / (factorial(k) * factorial(j - k))
                       for k in range(p) if 0 <= j - k < p) for j in range(2 * p - 1)]
        if not self.diffuse:
            lam = self.rate
            Qinf = sum(C * factorial(j) / (2 * lam) ** (j + 1) for j, C in enumerate(self._C))
            self.q = 1.0 / Qinf[0, 0]
            Pinf = self.q * Qinf
        else:
            Pinf = np.eye(p)
        self.Pinf = np.eye(_P)
        self.Pinf[:p, :p] = Pinf
        self.S = np.diag([1.0, -1.0, 1.0])
        self.pad = np.zeros(_P)
        self.pad[p:] = 1.0

    def transition(self, h):
        """``Phi(h)`` and ``Q(h)`` for steps ``h >= 0``: shapes (len(h), 3, 3) each."""
        Phi, Q = transitions([self], h)
        return Phi[0], Q[0]


def transitions(models, h):
    """``Phi(h)`` and ``Q(h)`` of every model for steps ``h >= 0``.

    Parameters
    ----------
    models : sequence of GaussMarkov, length B
    h : array_like, shape (L,)

    Returns
    -------
    Phi, Q : ndarray, shape (B, L, 3, 3) each
        Computed in one vectorised pass per kind of model (state dimension,
        proper or flat prior), whatever B.
    """
    h = np.asarray(h, dtype=np.float64).reshape(-1)
    B, L = len(models), h.size
    Phi = np.zeros((B, L, _P, _P))
    Q = np.zeros((B, L, _P, _P))
    groups: dict = {}
    for b, mo in enumerate(models):
        groups.setdefault((mo.p, mo.rate > 0), []).append(b)
    for (p, proper), idx in groups.items():
        mos = [models[i] for i in idx]
        G = len(mos)
        Nk = np.stack([np.stack(mo._Nk).reshape(p, p * p) for mo in mos])  # (G, p, p^2)
        C = np.stack([mo.q * np.stack(mo._C).reshape(2 * p - 1, p * p) for mo in mos])  # (G, 2p-1, p^2)
        ph = (h[:, None] ** np.arange(p)) @ Nk  # (G, L, p^2)
        j = np.arange(2 * p - 1)
        if proper:
            lam = np.array([mo.rate for mo in mos])[:, None]  # (G, 1)
            ph *= np.exp(-lam * h)[..., None]
            fact = np.array([factorial(i) for i in j], dtype=np.float64)
            inc = _gammainc_int(2 * p - 2, (2 * lam * h).ravel()).reshape(G, L, 2 * p - 1)
            I = fact / (2 * lam[..., None]) ** (j + 1) * inc
        else:
            I = np.broadcast_to(h[:, None] ** (j + 1) / (j + 1), (G, L, 2 * p - 1))
        idx = np.asarray(idx)
        Phi[idx, :, :p, :p] = ph.reshape(G, L, p, p)
        Q[idx, :, :p, :p] = (I @ C).reshape(G, L, p, p)
    return Phi, Q


_MODELS: dict = {}
_PACKED: dict = {}


def _packed(models):
    """Per-batch arrays of the models (cached by the models' identities): diffuse (B,),
    Pinf (B, 3, 3), pad (B, 3), q (B,), Pinv (B, 3, 3) (0 for a flat prior) and, for the
    compiled path, Nk (B, 3, 3, 3) (``N^k / k!``), C (B, 5, 3, 3) (``q C_j``), rate (B,), p (B,)."""
    key = tuple(map(id, models))
    hit = _PACKED.get(key)
    if hit is not None and hit[0] == key:  # hit[1] keeps the models alive, so their ids stay theirs
        return hit[2]
    diffuse = np.array([mo.diffuse for mo in models], dtype=bool)
    Pinf = np.stack([mo.Pinf for mo in models])
    pad = np.stack([mo.pad for mo in models])
    q = np.array([mo.q for mo in models], dtype=np.float64)
    Pinv = np.where(diffuse[:, None, None], 0.0, np.linalg.inv(Pinf))
    B = len(models)
    Nk = np.zeros((B, _P, _P, _P))
    C = np.zeros((B, 2 * _P - 1, _P, _P))
    for b, mo in enumerate(models):
        p = mo.p
        for k, A in enumerate(mo._Nk):
            Nk[b, k, :p, :p] = A
        for j, A in enumerate(mo._C):
            C[b, j, :p, :p] = mo.q * A
    rate = np.array([mo.rate for mo in models], dtype=np.float64)
    p = np.array([mo.p for mo in models], dtype=np.int64)
    out = (diffuse, Pinf, pad, q, Pinv, Nk, C, rate, p)
    if len(_PACKED) > 64:
        _PACKED.clear()
    _PACKED[key] = (key, list(models), out)
    return out


def gauss_markov(kernel: Kernel) -> GaussMarkov:
    """The (cached) :class:`GaussMarkov` model of a kernel."""
    model = _MODELS.get(kernel)
    if model is None:
        model = _MODELS[kernel] = GaussMarkov(kernel)
    return model


def _filter(Phi, Q, P0, Y, sigma2, diffuse, h1):
    """Covariance-form Kalman filter, batched over models (node index first).

    Phi, Q : (n, B, 3, 3), the step into node k at index k (index 0 unused);
    P0 : (B, 3, 3) prior covariance at node 0; Y : (n, B, m); sigma2 : (B,);
    diffuse : (B,) bool, flat prior (exact start at node 1 from nodes 0, 1);
    h1 : (B,) first steps. Returns filtered means (n, B, 3, m) and
    covariances (n, B, 3, 3). One Python step per node, vectorised over B.
    """
    n, B = Phi.shape[:2]
    m = Y.shape[2]
    # state and covariance side by side, X = [P | m] (B, 3, 3 + m): one matmul predicts both
    X = np.empty((n, B, _P, _P + m))
    PhiT = np.swapaxes(Phi, -1, -2)
    Xp = np.zeros((B, _P, _P + m))
    Xp[:, :, :_P] = P0
    Pp = np.empty((B, _P, _P))
    r = np.empty((B, _P + m))
    Yx = np.zeros((n, B, _P + m))  # [0 | y]: the innovation row is Xp[:, 0] - Yx[k]
    Yx[:, :, _P:] = Y
    for k in range(n):
        if k:
            np.matmul(Phi[k], X[k - 1], out=Xp)
            np.matmul(Xp[:, :, :_P], PhiT[k], out=Pp)
            np.add(Pp, Q[k], out=Xp[:, :, :_P])
        G = Xp[:, :, 0] / (Xp[:, 0, 0] + sigma2)[:, None]
        np.subtract(Xp[:, 0, :], Yx[k], out=r)
        np.multiply(G[:, :, None], r[:, None, :], out=X[k])
        np.subtract(Xp, X[k], out=X[k])
        if k == 1 and diffuse.any():
            d, h = diffuse, h1[diffuse][:, None]
            sd = sigma2[d]
            y0, y1 = Y[0, d], Y[1, d]
            Xd = np.zeros((sd.size, _P, _P + m))
            Xd[:, 0, _P:] = y1
            Xd[:, 1, _P:] = (y1 - y0) / h
            Xd[:, 0, 0] = sd
            Xd[:, 0, 1] = Xd[:, 1, 0] = sd / h[:, 0]
            Xd[:, 1, 1] = (2 * sd + Q[1, d, 0, 0]) / h[:, 0] ** 2
            X[1, d] = Xd
    return X[..., _P:], X[..., :_P]


def _scalar_update(m, P, g, y, r):
    """Condition N(m, P) on the scalar observation ``g . x = y`` with noise r.

    m (..., 3, m), P (..., 3, 3), g (..., 3), y (..., m), r (...)."""
    Pg = np.einsum("...ij,...j->...i", P, g)
    s = np.einsum("...i,...i->...", g, Pg) + r
    K = Pg / s[..., None]
    innov = y - np.einsum("...i,...im->...m", g, m)
    return m + K[..., :, None] * innov[..., None, :], P - K[..., :, None] * Pg[..., None, :]


class TwoFilter:
    """Forward and backward filters of a batch of models on sorted nodes.

    Parameters
    ----------
    models : sequence of GaussMarkov, length B
    sigma2 : array_like, shape (B,)
        Noise variances ``n lam`` (> 0).
    t : ndarray, shape (n,)
        Strictly increasing nodes (n >= 3 for diffuse models).
    Y : ndarray, shape (n, m)

    Notes
    -----
    The two passes cost O(n B m), run together as one Kalman filter over
    2B models (the backward one on the mirrored data) with one Python step
    per node; every query afterwards is O(m) per model and point (see the
    module Notes for the formulas).
    """

    def __init__(self, models, sigma2, t, Y):
        self.models = list(models)
        self.sigma2 = np.asarray(sigma2, dtype=np.float64).reshape(-1)
        self.t = t
        self.Y = Y
        n = t.size
        B = len(self.models)
        packed = _packed(self.models)
        self.diffuse, self.Pinf, self.pad, self.q, self._Pinv = packed[:5]
        self._native = None
        if USE_COMPILED:
            self._params = packed[5:]
            t = np.ascontiguousarray(t, dtype=np.float64)
            Yc = np.ascontiguousarray(Y, dtype=np.float64)
            m = Yc.shape[1]
            mf, mb = np.zeros((B, n, _P, m)), np.zeros((B, n, _P, m))
            Pf, Pb = np.zeros((B, n, _P, _P)), np.zeros((B, n, _P, _P))
            Nk, C, rate, p = self._params
            _jit.filters(Nk, C, rate, p, self.diffuse, self.Pinf, self.sigma2, t, Yc, mf, Pf, mb, Pb)
            self.t, self.Y = t, Yc
            self._native = (mf, Pf, mb, Pb)
            self.fwd = (np.swapaxes(mf, 0, 1), np.swapaxes(Pf, 0, 1))  # (n, B, ...) views, as the NumPy path
            self.bwd = (np.swapaxes(mb, 0, 1), np.swapaxes(Pb, 0, 1))
            return
        h = np.diff(t)
        Phi, Q = self._transitions(np.concatenate([h, h[::-1]]))  # (B, 2n-2, 3, 3)
        PhiA = np.zeros((n, 2 * B, _P, _P))
        QA = np.zeros((n, 2 * B, _P, _P))
        PhiA[1:, :B] = np.swapaxes(Phi[:, : n - 1], 0, 1)
        PhiA[1:, B:] = np.swapaxes(Phi[:, n - 1 :], 0, 1)
        QA[1:, :B] = np.swapaxes(Q[:, : n - 1], 0, 1)
        QA[1:, B:] = np.swapaxes(Q[:, n - 1 :], 0, 1)
        YA = np.empty((n, 2 * B, Y.shape[1]))
        YA[:, :B] = Y[:, None]
        YA[:, B:] = Y[::-1, None]
        P0 = np.concatenate([self.Pinf, self.Pinf])
        h1 = np.full(2 * B, h[0] if n > 1 else 1.0)
        h1[B:] = h[-1] if n > 1 else 1.0
        mf, Pf = _filter(PhiA, QA, P0, YA, np.tile(self.sigma2, 2), np.tile(self.diffuse, 2), h1)
        self.fwd = (mf[:, :B], Pf[:, :B])
        self.bwd = (mf[:, B:], Pf[:, B:])

    def select(self, b: int) -> "TwoFilter":
        """Model ``b`` alone: a view of the batch, or a copy (so that the batch
        can be freed) when the batch holds more than 4 MB; the batch itself
        when it holds one model."""
        if len(self.models) == 1 and b == 0:
            return self
        out = TwoFilter.__new__(TwoFilter)
        take = (lambda x: x[:, b : b + 1].copy()) if self.fwd[0].nbytes > 4e6 else (lambda x: x[:, b : b + 1])
        out.models = [self.models[b]]
        out.sigma2 = self.sigma2[b : b + 1].copy()
        out.t, out.Y = self.t, self.Y
        for name in ("diffuse", "Pinf", "pad", "q", "_Pinv"):
            setattr(out, name, getattr(self, name)[b : b + 1].copy())
        out._native = None
        if self._native is not None:
            big = self._native[0].nbytes > 4e6
            out._native = tuple(x[b : b + 1].copy() if big else x[b : b + 1] for x in self._native)
            out._params = tuple(x[b : b + 1] for x in self._params)
            out.fwd = (np.swapaxes(out._native[0], 0, 1), np.swapaxes(out._native[1], 0, 1))
            out.bwd = (np.swapaxes(out._native[2], 0, 1), np.swapaxes(out._native[3], 0, 1))
            return out
        out.fwd = tuple(take(x) for x in self.fwd)
        out.bwd = tuple(take(x) for x in self.bwd)
        return out

    def _transitions(self, h):
        """Phi, Q of every model for steps h: (B, len(h), 3, 3)."""
        return transitions(self.models, h)

    def query(self, tau, iL, iR):
        """Posterior mean and variance of u(tau) from nodes ``<= iL`` and ``>= iR``.

        Parameters
        ----------
        tau : ndarray, shape (K,)
            Points with ``t[iL] <= tau <= t[iR]`` (an absent side: iL = -1
            or iR = n).
        iL, iR : ndarray of int, shape (K,)

        Returns
        -------
        mean : ndarray, shape (B, K, m)
        var : ndarray, shape (B, K)
            NaN where the nodes left cannot determine the null space.
        """
        tau = np.asarray(tau, dtype=np.float64).reshape(-1)
        iL = np.asarray(iL).reshape(-1)
        iR = np.asarray(iR).reshape(-1)
        if self._native is not None:
            B, K, m = len(self.models), tau.size, self.Y.shape[1]
            mean, var = np.empty((B, K, m)), np.empty((B, K))
            Nk, C, rate, p = self._params
            _jit.query(Nk, C, rate, p, self.diffuse, self.Pinf, self._Pinv, self.sigma2, self.q, self.t, self.Y,
                       *self._native, np.ascontiguousarray(tau), iL.astype(np.int64), iR.astype(np.int64),
                       mean, var)
            return mean, var
        step = max(1, _QUERY_CHUNK // max(len(self.models), 1))
        if tau.size <= step:
            return self._query(tau, iL, iR)
        parts = [self._query(tau[i : i + step], iL[i : i + step], iR[i : i + step]) for i in range(0, tau.size, step)]
        return np.concatenate([p[0] for p in parts], axis=1), np.concatenate([p[1] for p in parts], axis=1)

    def _query(self, tau, iL, iR):
        t, n = self.t, self.t.size
        B, K, m = len(self.models), tau.size, self.Y.shape[1]
        hasL, hasR = iL >= 0, iR < n
        jL, jR = np.where(hasL, iL, 0), np.where(hasR, iR, n - 1)
        hL = np.where(hasL, tau - t[jL], 0.0)
        hR = np.where(hasR, t[jR] - tau, 0.0)
        Ph, Qh = self._transitions(np.concatenate([hL, hR]))
        Ph, Qh = np.swapaxes(Ph, 0, 1), np.swapaxes(Qh, 0, 1)  # (2K, B, 3, 3)
        PhL, PhR, QL, QR = Ph[:K], Ph[K:], Qh[:K], Qh[K:]
        mfF, PfF = self.fwd
        mbF, PbF = self.bwd
        rb = n - 1 - jR
        S = np.array([1.0, -1.0, 1.0])
        Pf = PhL @ PfF[jL] @ np.swapaxes(PhL, -1, -2) + QL
        Pb = S[:, None] * (PhR @ PbF[rb] @ np.swapaxes(PhR, -1, -2) + QR) * S
        # an absent side is the prior (proper models)
        if not hasL.all():
            Pf[~hasL] = self.Pinf
        if not hasR.all():
            Pb[~hasR] = self.Pinf
        # combination of two proper posteriors, (K, B, ...): with w^T = Pf[0, :] M^{-1}
        # and u = R^T w, mean = mf[0] - u . mf + w . mb and var = Pf[0, 0] - u . Pf[:, 0];
        # the m-column means enter only through two final contractions
        eye = np.eye(_P)
        R = eye - Pb @ self._Pinv
        M = Pb + R @ Pf + self.pad[:, :, None] * eye
        d = np.sqrt(np.abs(np.diagonal(Pf, axis1=-2, axis2=-1)) + np.abs(np.diagonal(Pb, axis1=-2, axis2=-1)))
        d[d <= 0] = 1.0
        MsT = np.swapaxes(M, -1, -2) / d[..., :, None] / d[..., None, :]
        edge = ~((iL >= 1) & (iR <= n - 2))
        dmask = self.diffuse
        fix = dmask.any() and edge.any()
        if fix:
            MsT[np.ix_(edge, dmask)] = eye  # replaced below
        w = np.linalg.solve(MsT, (Pf[..., 0, :] / d)[..., None])[..., 0] / d
        u = np.einsum("kbji,kbj->kbi", R, w)
        var = Pf[..., 0, 0] - np.einsum("kbi,kbi->kb", u, Pf[..., :, 0])
        cL = -u
        cL[..., 0] += 1.0
        cL = np.einsum("kbi,kbij->kbj", cL, PhL)  # coefficients on the filtered mean at iL
        cR = np.einsum("kbi,kbij->kbj", w * S, PhR)
        # an absent side contributes its prior mean, 0
        mean = np.einsum("kbi,kbim->kbm", np.where(hasL[:, None, None], cL, 0.0), mfF[jL])
        mean += np.einsum("kbi,kbim->kbm", np.where(hasR[:, None, None], cR, 0.0), mbF[rb])
        if fix:
            e, db = np.flatnonzero(edge), np.flatnonzero(dmask)
            sub = np.ix_(e, db)
            mf = PhL[sub] @ mfF[np.ix_(jL[e], db)]
            mb = S[:, None] * (PhR[sub] @ mbF[np.ix_(rb[e], db)])
            me, ve = self._flat_edges(iL[e], iR[e], hL[e], hR[e], db, mf, Pf[sub], mb, Pb[sub])
            mean[sub] = me
            var[sub] = ve
        return np.swapaxes(mean, 0, 1), var.T

    def _flat_edges(self, iL, iR, hL, hR, db, mf, Pf, mb, Pb):
        """Flat-prior combination where a side has one node (a scalar
        observation) or none: arrays (K, b, ...) for the diffuse models db."""
        n, m = self.t.size, self.Y.shape[1]
        K, nb = iL.size, db.size
        s2 = self.sigma2[db][None]
        q = self.q[db][None]
        gL = np.zeros((K, 1, _P))
        gL[:, 0, 0], gL[:, 0, 1] = 1.0, -hL
        gR = np.zeros((K, 1, _P))
        gR[:, 0, 0], gR[:, 0, 1] = 1.0, hR
        rL = s2 + q * (hL**3 / 3)[:, None]
        rR = s2 + q * (hR**3 / 3)[:, None]
        y0 = np.broadcast_to(self.Y[0], (K, nb, m))
        yn = np.broadcast_to(self.Y[-1], (K, nb, m))
        propL, propR = iL >= 1, iR <= n - 2
        mean = np.full((K, nb, m), np.nan)
        var = np.full((K, nb), np.nan)
        for use, (mm, PP) in (
            (propR & (iL == 0), _scalar_update(mb, Pb, gL, y0, rL)),
            (propL & (iR == n - 1), _scalar_update(mf, Pf, gR, yn, rR)),
            (propR & (iL < 0), (mb, Pb)),
            (propL & (iR >= n), (mf, Pf)),
        ):
            mean[use] = mm[use][..., 0, :]
            var[use] = PP[use][..., 0, 0]
        # one node on each side: two scalar observations determine (u, u')
        both = (iL == 0) & (iR == n - 1)
        if both.any():
            det = hR + hL  # rows (1, -hL), (1, hR)
            wL, wR = hR / det, hL / det
            mean[both] = wL[both, None, None] * y0[both] + wR[both, None, None] * yn[both]
            var[both] = wL[both, None] ** 2 * rL[both] + wR[both, None] ** 2 * rR[both]
        return mean, var
