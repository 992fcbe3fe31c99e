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


def closes_its_pipes():
    """f that, on an input of 777, closes every inherited descriptor and stays alive: a worker
    whose events pipe is gone while its process runs."""
    import os
    import time

    def f(X):
        X = np.asarray(X, dtype=np.float64)
        if np.any(X == 777.0):
            os.closerange(3, 4096)
            time.sleep(120)
        return X
    return f
