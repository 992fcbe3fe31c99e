"""One registry of workloads: the functions and models the CLI, the harness
and the runtime take by name.

>>> from gencc import workloads
>>> w = workloads.get("xsinx")
>>> w.f(w.X[:2]).shape
(2, 4)
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

__all__ = ["Workload", "LoadedWorkload", "WorkloadFactory", "register", "get", "names", "describe"]


@dataclass
class LoadedWorkload:
    """A workload ready to run.

    Attributes
    ----------
    name : str
    f : callable
        Vectorised: (n, *in_shape) -> (n, *out_shape), float64 in and out.
    X : ndarray, shape (n_samples, *in_shape)
        Inputs to draw batches from (held-out data for trained models).
    task : {"regression", "classification", "embedding"}
    info : dict
        Facts such as the recorded test accuracy of a trained model.
    labels : ndarray, optional
        True labels of ``X`` for classifiers.
    """

    name: str
    f: Callable
    X: np.ndarray
    task: str
    info: dict = field(default_factory=dict)
    labels: np.ndarray | None = None

    @property
    def harness_task(self) -> str:
        """Task name for :func:`gencc.evaluate` (the workload's task)."""
        return self.task


@dataclass(frozen=True)
class Workload:
    """A registered workload: ``loader()`` builds a :class:`LoadedWorkload`;
    ``model_loader()``, where given, builds only f (what a worker needs,
    without the data set)."""

    name: str
    description: str
    task: str
    loader: Callable[[], LoadedWorkload]
    needs_torch: bool = False
    model_loader: Callable[[], Callable] | None = None


_REGISTRY: dict[str, Workload] = {}


def register(workload: Workload) -> Workload:
    """Add a workload to the registry (names are unique)."""
    if workload.name in _REGISTRY:
        raise ValueError(f"workload {workload.name!r} is already registered")
    _REGISTRY[workload.name] = workload
    return workload


def names() -> list[str]:
    """Registered workload names."""
    _load_builtin()
    return list(_REGISTRY)


def describe() -> list[tuple[str, str, str]]:
    """(name, task, description) of every registered workload."""
    _load_builtin()
    return [(w.name, w.task, w.description) for w in _REGISTRY.values()]


@functools.lru_cache(maxsize=None)
def get(name: str) -> LoadedWorkload:
    """Load a workload by name (cached per process).

    Raises
    ------
    ValueError
        For an unknown name, listing the known ones.
    """
    _load_builtin()
    try:
        w = _REGISTRY[name]
    except KeyError:
        raise ValueError(f"workload must be one of {sorted(_REGISTRY)}, got {name!r}") from None
    return w.loader()


@functools.lru_cache(maxsize=None)
def _load_builtin():
    from . import functions  # noqa: F401

    try:
        from . import models  # noqa: F401
    except ImportError:  # torch is an optional extra
        pass


class WorkloadFactory:
    """A picklable zero-argument model factory for the runtime: each worker
    calls it once and gets the workload's f, loaded from the registry.

    >>> WorkloadFactory("xsinx")()(np.zeros((1, 4))).shape
    (1, 4)
    """

    def __init__(self, name: str):
        self.name = name

    def __call__(self):
        _load_builtin()
        wl = _REGISTRY.get(self.name)
        if wl is not None and wl.model_loader is not None:
            return wl.model_loader()  # the model alone: workers need no data set
        return get(self.name).f

    @property
    def preload(self) -> tuple:
        """Modules a forkserver can import once for every worker (the loader's)."""
        _load_builtin()
        wl = _REGISTRY.get(self.name)
        return () if wl is None else (wl.loader.__module__,)

    def __repr__(self):
        return f"WorkloadFactory({self.name!r})"


def as_float64(fn):
    """Wrap fn so it returns a float64 ndarray."""

    @functools.wraps(fn)
    def wrapped(X):
        return np.asarray(fn(X), dtype=np.float64)

    return wrapped
