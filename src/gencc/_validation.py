"""The one place where user arguments are checked and converted."""

from __future__ import annotations

import numbers

import numpy as np

from .errors import InsufficientReturnsError, InvalidInputError


def check_int(value, name: str, *, minimum: int = 1) -> int:
    """Return ``value`` as an int, or raise naming ``name`` and the bound."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return int(value)


def check_nonnegative(value, name: str) -> float:
    """Return ``value`` as a finite float >= 0."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a non-negative number, got {value!r}") from None
    if not np.isfinite(v) or v < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return v


def check_choice(value, name: str, choices: tuple):
    """Return ``value`` if it is one of ``choices``, or raise naming ``name`` and them."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value


def check_probability(value, name: str, *, closed: bool = False) -> float:
    """Return ``value`` as a float in [0, 1) (or [0, 1] when ``closed``)."""
    v = check_nonnegative(value, name)
    if v > 1 or (v == 1 and not closed):
        bound = "[0, 1]" if closed else "[0, 1)"
        raise ValueError(f"{name} must be in {bound}, got {value!r}")
    return v


def check_batch(X, name: str, n_rows: int | None = None, copy: bool = False) -> tuple[np.ndarray, tuple]:
    """Check a batch of rows and flatten it.

    Parameters
    ----------
    X : array_like, shape (n, *item_shape)
    name : str
        Argument name used in error messages.
    n_rows : int, optional
        Required number of rows.
    copy : bool
        Return a copy even when X is a float64 array already (the runtime's
        snapshot of a caller's buffer); otherwise X2 may be a view of X.

    Returns
    -------
    X2 : ndarray, shape (n, prod(item_shape)), float64
    item_shape : tuple
    """
    if np.iscomplexobj(X):
        raise TypeError(f"{name} must be real; got a complex array (its imaginary part would be lost)")
    try:
        arr = np.array(X, dtype=np.float64) if copy else np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a numeric array, got {type(X).__name__}: {exc}") from None
    if arr.ndim < 1:
        raise ValueError(f"{name} must have shape (n, ...) with one row per item, got a scalar")
    if n_rows is not None and arr.shape[0] != n_rows:
        raise ValueError(
            f"{name} must have {n_rows} rows (shape ({n_rows}, ...)), got shape {arr.shape}"
        )
    if arr.shape[0] == 0:
        raise ValueError(f"{name} must have at least one row, got shape {arr.shape}")
    bad = ~np.isfinite(arr)
    if bad.any():
        rows = np.unique(np.nonzero(bad.reshape(arr.shape[0], -1))[0])
        raise ValueError(
            f"{name} contains NaN or Inf in rows {rows[:10].tolist()}"
            + (" ..." if rows.size > 10 else "")
        )
    item_shape = arr.shape[1:]
    return arr.reshape(arr.shape[0], -1), item_shape


def check_points(t, name: str, *, min_size: int = 1) -> np.ndarray:
    """Return ``t`` as a finite float64 vector of at least ``min_size`` points, shape (n,)."""
    try:
        v = np.asarray(t, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be an array of real numbers, shape (n,), got {type(t).__name__}") from None
    if v.ndim == 0 or (v.ndim > 1 and v.size == max(v.shape)):  # one point, or a column or row of points
        v = v.reshape(-1)
    if v.ndim != 1:
        raise ValueError(f"{name} must have shape (n,), got {v.shape}")
    if v.size < min_size:
        raise ValueError(f"{name} must hold at least {min_size} point{'' if min_size == 1 else 's'}, got {v.size}")
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{name} must be finite, got {int(np.sum(~np.isfinite(v)))} NaN or infinite entries")
    return v


def check_targets(Y, n: int, name: str = "Y") -> np.ndarray:
    """Return ``Y`` as finite float64 with ``n`` rows, shape (n,) or (n, *out_shape)."""
    try:
        v = np.asarray(Y, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be an array of real numbers with {n} rows, got {type(Y).__name__}") from None
    if v.ndim == 0 or v.shape[0] != n:
        raise ValueError(f"{name} must have one row per node, shape ({n},) or ({n}, m), got {v.shape}")
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{name} must be finite, got {int(np.sum(~np.isfinite(v)))} NaN or infinite entries")
    return v


def check_returned(returned, n_workers: int, name: str = "returned") -> np.ndarray:
    """Check worker indices: 1-D integers in [0, n_workers), no duplicates.

    Returns the indices as an int64 array in the caller's order.
    """
    arr = np.asarray(returned)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D sequence of worker indices, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if np.issubdtype(arr.dtype, np.floating) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise TypeError(f"{name} must hold integer worker indices, got dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False)
    if arr.size and (arr.min() < 0 or arr.max() >= n_workers):
        bad = arr[(arr < 0) | (arr >= n_workers)]
        raise ValueError(
            f"{name} must index workers in [0, {n_workers}), got out-of-range {bad[:10].tolist()}"
        )
    srt = np.sort(arr)
    if arr.size > 1 and np.any(srt[1:] == srt[:-1]):
        uniq, counts = np.unique(arr, return_counts=True)
        raise ValueError(f"{name} must not repeat a worker, got duplicates {uniq[counts > 1].tolist()}")
    return arr


def require_returns(n_returned: int, n_required: int, scheme: str) -> None:
    if n_returned < n_required:
        raise InsufficientReturnsError(
            f"{scheme} needs at least {n_required} returned workers to decode, got {n_returned}",
            n_returned=n_returned,
            n_required=n_required,
        )


def rng_from(seed) -> np.random.Generator:
    """A numpy Generator from a seed, a Generator, or None."""
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(seed)


def check_stack(Y, name: str, n_rows: int, what: str):
    """Check a stack of batches, shape (B, n_rows, *item_shape); return (B, n_rows, p) and item_shape."""
    if np.iscomplexobj(Y):
        raise TypeError(f"{name} must be real; got a complex array (its imaginary part would be lost)")
    try:
        arr = np.asarray(Y, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a numeric array, got {type(Y).__name__}: {exc}") from None
    if arr.ndim < 2 or arr.shape[1] != n_rows:
        hint = (f"; shape ({n_rows}, ...) is one batch: pass {name}[None] or use the single-batch method"
                if arr.ndim >= 1 and arr.shape[0] == n_rows else "")
        raise ValueError(f"{name} must have shape (B, {n_rows}, ...): B batches of {n_rows} {what}, "
                         f"got shape {arr.shape}{hint}")
    if arr.shape[0] == 0:
        raise ValueError(f"{name} must hold at least one batch, got shape {arr.shape}")
    B = arr.shape[0]
    flat, item = check_batch(arr.reshape(B * n_rows, *arr.shape[2:]), name)
    return flat.reshape(B, n_rows, -1), item


def check_input(x, index, in_shape):
    """One input as a float64 copy of its own, with its shape, or an InvalidInputError naming it.

    The copy is the executor's snapshot of the input at the moment it is
    accepted: a caller may refill or free ``x`` as soon as this returns.

    Parameters
    ----------
    x : array_like
    index : int
        The input's position in its stream (named in the error).
    in_shape : tuple or None
        The shape every input must have (None: any).
    """
    if np.iscomplexobj(x):
        raise InvalidInputError(f"input {index} is complex; f is computed on real inputs", index=index)
    try:
        arr = np.array(x, dtype=np.float64)  # a copy, whatever x is (an ndarray, a view, a tensor)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"input {index} is not a numeric array: {exc}", index=index) from None
    if in_shape is not None and arr.shape != in_shape:
        raise InvalidInputError(f"input {index} has shape {arr.shape}, expected {in_shape} like the "
                                f"first input", index=index)
    if not np.all(np.isfinite(arr)):
        raise InvalidInputError(f"input {index} contains NaN or Inf", index=index)
    return arr, arr.shape
