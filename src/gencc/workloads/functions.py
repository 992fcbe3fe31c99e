"""Plain functions for the theory plots: x sin(x) and a random smooth MLP."""

from __future__ import annotations

import numpy as np

from . import LoadedWorkload, Workload, register


def xsinx(X):
    """Elementwise ``x sin(x)``."""
    X = np.asarray(X, dtype=np.float64)
    return X * np.sin(X)


def _load_xsinx():
    X = np.random.default_rng(0).uniform(-3.0, 3.0, size=(2000, 4))
    return LoadedWorkload("xsinx", xsinx, X, "regression", {"in_dim": 4, "out_dim": 4})


class SmoothMLP:
    """A fixed random MLP 16 -> 32 -> 32 -> 4 with tanh activations (seeded)."""

    def __init__(self, seed: int = 0, widths=(16, 32, 32, 4)):
        rng = np.random.default_rng(seed)
        self.layers = [
            (rng.normal(size=(a, b)) / np.sqrt(a), 0.1 * rng.normal(size=b)) for a, b in zip(widths[:-1], widths[1:])
        ]

    def __call__(self, X):
        h = np.asarray(X, dtype=np.float64)
        for i, (W, b) in enumerate(self.layers):
            h = h @ W + b
            if i < len(self.layers) - 1:
                h = np.tanh(h)
        return h


def _load_mlp():
    X = np.random.default_rng(1).normal(size=(2000, 16))
    return LoadedWorkload("mlp", SmoothMLP(0), X, "regression", {"in_dim": 16, "out_dim": 4})


register(Workload("xsinx", "x*sin(x) elementwise on 4-d inputs uniform in [-3, 3]", "regression", _load_xsinx))
register(Workload("mlp", "random smooth MLP 16-32-32-4 (tanh), Gaussian inputs", "regression", _load_mlp))
