"""Kernels on [-1, 1] whose RKHS norms regularise the encoder and decoder.

A kernel is a callable ``k(s, t) -> (len(s), len(t))`` with an optional
polynomial null space: functions in the null space are not penalised, and the
representer-theorem solution is ``u(t) = sum_i c_i k(t, t_i) + p(t)`` with
``p`` in the null space.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Kernel", "Sobolev2", "Matern", "Gaussian", "make_kernel", "KERNELS"]


@dataclass(frozen=True)
class Kernel:
    """Base class: an isotropic kernel ``phi(|s - t| / scale)``.

    Parameters
    ----------
    scale : float
        Length scale, > 0.

    Attributes
    ----------
    null_degree : int
        Degree of the unpenalised polynomial null space; -1 for none.
    """

    scale: float = 1.0
    null_degree = -1
    name = "kernel"

    def __post_init__(self):
        if not (np.isfinite(self.scale) and self.scale > 0):
            raise ValueError(f"kernel scale must be a finite number > 0, got {self.scale!r}")

    def profile(self, r: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def __call__(self, s, t) -> np.ndarray:
        """Gram matrix ``k(s_i, t_j)``, shape (len(s), len(t))."""
        s = np.asarray(s, dtype=np.float64).reshape(-1, 1)
        t = np.asarray(t, dtype=np.float64).reshape(1, -1)
        return self.profile(np.abs(s - t) / self.scale)

    def null_basis(self, t) -> np.ndarray:
        """Null-space basis evaluated at ``t``: shape (len(t), null_degree + 1)."""
        t = np.asarray(t, dtype=np.float64)
        return np.vander(t, self.null_degree + 1, increasing=True)

    def __str__(self) -> str:
        return f"{self.name}(scale={self.scale:g})"


@dataclass(frozen=True)
class Sobolev2(Kernel):
    """Second-order Sobolev kernel: ``|s - t|^3 / 12`` with affine null space.

    Its semi-norm is ``int u''(t)^2 dt``, so kernel ridge regression with it
    is exactly the cubic smoothing spline (a natural cubic spline through or
    near the nodes). The kernel is conditionally positive definite of order 2.
    The scale only rescales the ridge (by ``scale**3``); it is kept for a
    uniform interface.

    Notes
    -----
    ``d^4/dt^4 |t|^3 / 12 = delta(t)``, so for ``u = sum_i c_i k(., t_i) + p``
    with ``T^T c = 0`` (T the affine basis at the nodes) integration by parts
    gives ``int u''^2 = c^T G c``.
    """

    null_degree = 1
    name = "sobolev2"

    def profile(self, r):
        return r**3 / 12.0


@dataclass(frozen=True)
class Matern(Kernel):
    """Matern kernel of smoothness ``nu`` in {0.5, 1.5, 2.5}.

    ``nu = 0.5``: ``exp(-r)``; ``1.5``: ``(1 + sqrt3 r) exp(-sqrt3 r)``;
    ``2.5``: ``(1 + sqrt5 r + 5 r^2 / 3) exp(-sqrt5 r)``, with r = |s-t|/scale.
    """

    nu: float = 1.5

    def __post_init__(self):
        super().__post_init__()
        if self.nu not in (0.5, 1.5, 2.5):
            raise ValueError(f"Matern nu must be 0.5, 1.5 or 2.5, got {self.nu!r}")

    @property
    def name(self):  # type: ignore[override]
        return {0.5: "matern12", 1.5: "matern32", 2.5: "matern52"}[self.nu]

    def profile(self, r):
        if self.nu == 0.5:
            return np.exp(-r)
        if self.nu == 1.5:
            a = np.sqrt(3.0) * r
            return (1.0 + a) * np.exp(-a)
        a = np.sqrt(5.0) * r
        return (1.0 + a + a * a / 3.0) * np.exp(-a)


@dataclass(frozen=True)
class Gaussian(Kernel):
    """Gaussian kernel ``exp(-r^2 / 2)``, r = |s-t|/scale."""

    name = "gaussian"

    def profile(self, r):
        return np.exp(-0.5 * r * r)


KERNELS = {
    "sobolev2": lambda scale=1.0: Sobolev2(scale),
    "matern12": lambda scale=1.0: Matern(scale, 0.5),
    "matern32": lambda scale=1.0: Matern(scale, 1.5),
    "matern52": lambda scale=1.0: Matern(scale, 2.5),
    "gaussian": lambda scale=1.0: Gaussian(scale),
}


def make_kernel(spec, scale: float = 1.0, name: str = "kernel") -> Kernel:
    """Resolve a kernel name (``"sobolev2"``, ``"matern12"``, ``"matern32"``,
    ``"matern52"``, ``"gaussian"``) or a :class:`Kernel` instance."""
    if isinstance(spec, Kernel):
        return spec
    if isinstance(spec, str) and spec in KERNELS:
        return KERNELS[spec](scale)
    raise ValueError(f"{name} must be a Kernel or one of {sorted(KERNELS)}, got {spec!r}")
