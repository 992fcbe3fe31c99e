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


def reused_output():
    """f in ``out=`` style: every call writes its answer into one buffer and returns that buffer."""
    out = {}

    def f(X):
        X = np.asarray(X, dtype=np.float64)
        buf = out.get(X.shape)
        if buf is None:
            buf = out[X.shape] = np.empty(X.shape)
        np.multiply(X, np.sin(X), out=buf)
        return buf
    return f


def in_place():
    """f that normalises its input in place before computing (x -> 2x, then x sin x)."""
    def f(X):
        X *= 2.0
        return X * np.sin(X)
    return f


def sleeps_on_999():
    """x sin x, except that an input holding 999 keeps f busy for 120 s (a worker inside f)."""
    import time

    def f(X):
        X = np.asarray(X, dtype=np.float64)
        if np.any(X == 999.0):
            time.sleep(120)
        return X * np.sin(X)
    return f


def slow_on_555():
    """x sin x, 1 s late on an input above 100 in size (an input holding 555, or a coded input
    made from one): time for a test to act while its batch runs."""
    import time

    def f(X):
        X = np.asarray(X, dtype=np.float64)
        if np.any(np.abs(X) > 100.0):
            time.sleep(1.0)
        return X * np.sin(X)
    return f
