"""Byzantine attack models: returned workers that answer with finite, plausible, wrong outputs.

A straggler model (:mod:`gencc.stragglers`) says *which* workers return; an
attack model says which of the returned workers lie and *what* they return.
Every model answers ``attack(Y, returned, rng, points=None)`` with the
corrupted outputs and the indices of the liars, leaving every other row of
``Y`` as it was:

>>> import numpy as np
>>> from gencc.byzantine import SignFlip
>>> Y = np.arange(1.0, 13.0).reshape(6, 2)          # outputs of workers 10..15
>>> Yc, liars = SignFlip(workers=[11, 13]).attack(Y, returned=np.arange(10, 16), rng=0)
>>> liars.tolist(), Yc[:, 0].tolist()
([11, 13], [1.0, -3.0, 5.0, -7.0, 9.0, 11.0])

Which workers lie: ``n_adversaries`` of the returned ones chosen uniformly
at random (A, capped at the number returned), or the fixed set ``workers``
(those of them that returned). The scale of the attacks that need one (the
bias, the colluding curve) is read from the *honest* returned outputs, per
output coordinate, so an attack is as large relative to f's outputs on every
workload.

The runtime injects the same attacks into real workers
(:class:`gencc.runtime.Faults`): a worker sees only its own output, so it
scales its lie by an :class:`OutputScale` the fault plan gives it, through
the same :meth:`ByzantineModel.lie` the harness uses.

References
----------
.. [1] M. Soleymani, R. E. Ali, H. Mahdavifar, A. S. Avestimehr,
   "ApproxIFER: A Model-Agnostic Approach to Resilient and Robust
   Prediction Serving Systems", AAAI 2022.
.. [2] P. Moradi, H. Akbarinodehi, M. A. Maddah-Ali, "General Coded
   Computing: Adversarial Settings", 2025.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from ._validation import check_batch, check_int, check_nonnegative, check_returned, rng_from

__all__ = [
    "ByzantineModel", "OutputScale", "SignFlip", "ScaledOutput", "RandomOutput", "ConstantBias", "CopyOutput",
    "ColludingSmooth", "make_attack", "ATTACKS",
]


def _check_workers(workers):
    if workers is None:
        return None
    arr = np.asarray(workers)
    if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
        raise TypeError(f"workers must be a 1-D sequence of worker indices, got {workers!r}")
    if arr.size and arr.min() < 0:
        raise ValueError(f"workers must be worker indices >= 0, got {arr.tolist()}")
    if np.unique(arr).size != arr.size:
        raise ValueError(f"workers must not repeat a worker, got {arr.tolist()}")
    return np.sort(arr.astype(np.int64))


@dataclass(frozen=True)
class OutputScale:
    """What an attack scales its lie by, per output coordinate (flattened, shape (m,)).

    Attributes
    ----------
    std : ndarray, shape (m,)
        Spread of honest outputs: the unit of :class:`ConstantBias` and
        :class:`ColludingSmooth`.
    low, high : ndarray, shape (m,)
        Range of honest outputs: where :class:`RandomOutput` draws.
    """

    std: np.ndarray
    low: np.ndarray
    high: np.ndarray

    @classmethod
    def of(cls, Y) -> "OutputScale":
        """From honest outputs ``Y`` (n, m): their per-coordinate std, min and max."""
        Y = np.asarray(Y, dtype=np.float64)
        return cls(Y.std(axis=0), Y.min(axis=0), Y.max(axis=0))


@dataclass
class ByzantineModel:
    """Base class of the attack models.

    Parameters
    ----------
    n_adversaries : int, default 0
        A: how many returned workers lie, chosen uniformly at random among
        the returned (all of them if fewer return). Ignored when ``workers``
        is given.
    workers : sequence of int, optional
        A fixed set of lying workers (worker indices); those of them that
        returned lie.

    Notes
    -----
    Subclasses implement :meth:`lie` (what liars return, given their honest
    outputs and an :class:`OutputScale`), or, when a lie needs the other
    workers' outputs (:class:`CopyOutput`), ``_corrupt(Y, honest, bad,
    points, rng)``: ``Y`` (n, m) the returned outputs flattened, ``honest``
    and ``bad`` boolean masks of shape (n,), ``points`` (n,) the workers'
    points beta or None; it returns the new rows for ``bad``, shape (A, m).
    """

    n_adversaries: int = 0
    workers: object = None

    needs_points = False

    def __post_init__(self):
        self.n_adversaries = check_int(self.n_adversaries, "n_adversaries", minimum=0)
        self.workers = _check_workers(self.workers)

    def adversaries(self, returned, rng=None) -> np.ndarray:
        """The lying workers among ``returned``: sorted worker indices, shape (A,)."""
        returned = np.asarray(returned, dtype=np.int64)
        if self.workers is not None:
            return np.intersect1d(returned, self.workers)
        A = min(self.n_adversaries, returned.size)
        return np.sort(rng_from(rng).choice(returned, size=A, replace=False)) if A else np.empty(0, np.int64)

    def attack(self, Y, returned, rng=None, points=None):
        """Corrupt the outputs of the lying returned workers.

        Parameters
        ----------
        Y : array_like, shape (n, *out_shape)
            ``Y[i]`` is the honest output of worker ``returned[i]``.
        returned : sequence of int, shape (n,)
            Distinct worker indices, in the order of ``Y``'s rows.
        rng : int, Generator or None
            Chooses the liars (unless ``workers`` is fixed) and the random
            parts of the attack.
        points : array_like, shape (n,), optional
            The returned workers' points beta (``scheme.beta[returned]``);
            needed by :class:`ColludingSmooth`.

        Returns
        -------
        Y_attacked : ndarray, shape (n, *out_shape), float64
            A copy of ``Y`` in which only the liars' rows differ.
        liars : ndarray of int64, shape (A,)
            The lying workers (worker indices, sorted).
        """
        returned = np.asarray(returned)
        idx = check_returned(returned, np.iinfo(np.int64).max)
        Y2, shape = check_batch(Y, "Y", idx.size)
        if self.needs_points:
            if points is None:
                raise ValueError(f"{type(self).__name__} needs points=scheme.beta[returned], shape ({idx.size},)")
        if points is not None:
            points = np.asarray(points, dtype=np.float64)
            if points.shape != (idx.size,):
                raise ValueError(f"points must have shape ({idx.size},), one per returned worker, got {points.shape}")
        rng = rng_from(rng)
        liars = self.adversaries(idx, rng)
        bad = np.isin(idx, liars)
        out = Y2.copy()
        if bad.any():
            honest = ~bad
            if not honest.any():
                honest = np.ones_like(bad)  # everyone lies: scale the attack from all outputs
            out[bad] = self._corrupt(Y2, honest, bad, points, rng)
        return out.reshape((idx.size, *shape)), liars

    def lie(self, Y, scale: OutputScale, points=None, rng=None) -> np.ndarray:
        """What liars return instead of their honest outputs.

        Parameters
        ----------
        Y : ndarray, shape (A, m)
            The liars' honest outputs, flattened.
        scale : OutputScale
            Per-coordinate spread and range of honest outputs (``m`` each).
        points : ndarray, shape (A,), optional
            The liars' points beta (:class:`ColludingSmooth` needs them).
        rng : Generator, optional

        Returns
        -------
        ndarray, shape (A, m)
        """
        raise NotImplementedError(f"{type(self).__name__} needs the other workers' outputs to lie")

    def _corrupt(self, Y, honest, bad, points, rng):
        return self.lie(Y[bad], OutputScale.of(Y[honest]), None if points is None else points[bad], rng)


@dataclass
class SignFlip(ByzantineModel):
    """Each liar returns ``-f(x~_n)``."""

    def lie(self, Y, scale, points=None, rng=None):
        return -np.asarray(Y, dtype=np.float64)


@dataclass
class ScaledOutput(ByzantineModel):
    """Each liar returns ``factor * f(x~_n)``.

    Parameters
    ----------
    factor : float, default 10.0
        Any finite number other than 1.
    """

    factor: float = 10.0

    def __post_init__(self):
        super().__post_init__()
        if isinstance(self.factor, bool) or not isinstance(self.factor, numbers.Real) or not np.isfinite(self.factor):
            raise TypeError(f"factor must be a finite number, got {self.factor!r}")
        if self.factor == 1:
            raise ValueError("factor must differ from 1 (factor = 1 is an honest worker)")
        self.factor = float(self.factor)

    def lie(self, Y, scale, points=None, rng=None):
        return self.factor * np.asarray(Y, dtype=np.float64)


@dataclass
class RandomOutput(ByzantineModel):
    """Each liar returns an output drawn uniformly, per coordinate, from the
    range [min, max] of the honest returned outputs in that coordinate."""

    def lie(self, Y, scale, points=None, rng=None):
        Y = np.asarray(Y)
        return scale.low + (scale.high - scale.low) * rng_from(rng).random(Y.shape)


@dataclass
class ConstantBias(ByzantineModel):
    """Each liar returns ``f(x~_n) + multiple * s``, where s (m,) is the
    standard deviation of the honest returned outputs per coordinate (the
    same shift for every liar).

    Parameters
    ----------
    multiple : float, default 1.0
        > 0.
    """

    multiple: float = 1.0

    def __post_init__(self):
        super().__post_init__()
        if check_nonnegative(self.multiple, "multiple") == 0:
            raise ValueError("multiple must be > 0 (a zero bias is an honest worker)")
        self.multiple = float(self.multiple)

    def lie(self, Y, scale, points=None, rng=None):
        return np.asarray(Y, dtype=np.float64) + self.multiple * scale.std


@dataclass
class CopyOutput(ByzantineModel):
    """Each liar returns the output of another returned worker (an honest
    one chosen at random per liar): a right answer to the wrong input."""

    def _corrupt(self, Y, honest, bad, points, rng):
        src = np.flatnonzero(honest & ~bad)
        if src.size == 0:
            src = np.flatnonzero(bad)
        pick = rng.choice(src, size=int(bad.sum()), replace=True)
        if src.size > 1:  # never a worker's own output (when everyone lies)
            own = np.flatnonzero(bad)
            for j in np.flatnonzero(pick == own):
                pick[j] = rng.choice(src[src != own[j]])
        return Y[pick]


@dataclass
class ColludingSmooth(ByzantineModel):
    """The liars add the same smooth curve, ``g(beta_n) * d``, so their
    values are consistent with each other and with some smooth function.

    ``g(t) = amplitude * cos(pi * frequency * (t - phase))`` with a random
    phase, and ``d`` (m,) a random direction (unit Gaussian vector) scaled
    per coordinate by the standard deviation of the honest returned
    outputs, both drawn once per attack.

    Parameters
    ----------
    amplitude : float, default 1.0
        > 0, in units of the outputs' standard deviation.
    frequency : float, default 1.0
        >= 0; 0 gives a common constant shift.
    """

    amplitude: float = 1.0
    frequency: float = 1.0
    needs_points = True

    def __post_init__(self):
        super().__post_init__()
        if check_nonnegative(self.amplitude, "amplitude") == 0:
            raise ValueError("amplitude must be > 0")
        self.amplitude = float(self.amplitude)
        self.frequency = check_nonnegative(self.frequency, "frequency")

    def lie(self, Y, scale, points=None, rng=None):
        """The phase and direction come first from ``rng``: liars given generators
        seeded alike (the runtime's colluding workers) add the same curve."""
        if points is None:
            raise ValueError("ColludingSmooth needs the liars' points beta")
        Y = np.asarray(Y, dtype=np.float64)
        rng = rng_from(rng)
        phase = rng.uniform(-1.0, 1.0)
        d = rng.standard_normal(Y.shape[1])
        d *= np.sqrt(Y.shape[1]) / max(np.linalg.norm(d), np.finfo(float).tiny)
        g = self.amplitude * np.cos(np.pi * self.frequency * (np.asarray(points, dtype=np.float64) - phase))
        return Y + g[:, None] * (d * scale.std)[None, :]


ATTACKS = {
    "sign-flip": SignFlip, "scale": ScaledOutput, "random": RandomOutput, "bias": ConstantBias,
    "copy": CopyOutput, "colluding": ColludingSmooth,
}


def make_attack(kind: str, n_adversaries: int = 0, *, workers=None, **params) -> ByzantineModel:
    """Build an attack model by name.

    Parameters
    ----------
    kind : {"sign-flip", "scale", "random", "bias", "copy", "colluding"}
    n_adversaries : int
        A.
    workers : sequence of int, optional
        A fixed set of liars instead.
    **params
        The model's own parameters (``factor``, ``multiple``, ``amplitude``,
        ``frequency``).
    """
    if kind not in ATTACKS:
        raise ValueError(f"attack must be one of {list(ATTACKS)}, got {kind!r}")
    try:
        return ATTACKS[kind](n_adversaries, workers, **params)
    except TypeError as exc:
        if "unexpected keyword" in str(exc):
            raise TypeError(f"attack {kind!r} takes no parameter among {sorted(params)}: {exc}") from None
        raise
