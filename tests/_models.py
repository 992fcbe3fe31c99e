"""Importable model factories for runtime tests (workers must be able to import them)."""

import numpy as np


def xsinx():
    return lambda X: np.asarray(X, dtype=np.float64) * np.sin(X)


def broken():
    raise RuntimeError("no weights here")


def slow_start():
    import time

    time.sleep(3.0)
    return xsinx()


def twice(X):
    """A stand-in parity model: clearly not f, so a test sees which worker ran it."""
    return 2.0 * np.asarray(X, dtype=np.float64)
