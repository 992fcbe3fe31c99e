"""Exceptions and warnings raised by gencc."""

from __future__ import annotations

__all__ = [
    "BatchFailedError",
    "ErrorBoundExceededError",
    "InjectedError",
    "InvalidInputError",
    "InsufficientReturnsError",
    "MissingOutputsError",
    "NotFittedError",
    "IllConditionedWarning",
]


class InsufficientReturnsError(ValueError):
    """Too few workers returned for the scheme to decode.

    Attributes
    ----------
    n_returned : int
        Number of workers whose results were given to the decoder.
    n_required : int
        Smallest number of returns the scheme can decode from.
    """

    def __init__(self, message: str, *, n_returned: int, n_required: int):
        super().__init__(message)
        self.n_returned = n_returned
        self.n_required = n_required


class MissingOutputsError(InsufficientReturnsError):
    """Some inputs have no returned worker at all (replication, uncoded).

    Attributes
    ----------
    missing : ndarray of int
        Indices of the inputs that no returned worker computed.
    partial : ndarray, shape (K, *out_shape)
        The decoded outputs, with the rows of ``missing`` set to NaN. The NaN
        rows are never returned silently: they only travel inside this error.
    info : dict
        What the scheme knows about the returned set (e.g. ``copies_returned``).
    """

    def __init__(self, message, *, missing, partial, n_returned, n_required, info=None):
        super().__init__(message, n_returned=n_returned, n_required=n_required)
        self.missing = missing
        self.partial = partial
        self.info = dict(info or {})


class IllConditionedWarning(RuntimeWarning):
    """A kernel system was too ill-conditioned and its ridge was raised."""


class BatchFailedError(RuntimeError):
    """A batch of the runtime could not be answered.

    Every input of the batch gets this error (with ``return_exceptions`` in
    :meth:`~gencc.runtime.CodedExecutor.map`) instead of an answer.

    Attributes
    ----------
    batch : int
        The batch index (submission order).
    failed : dict of int -> str
        Worker index -> why its result is missing.
    n_returned, n_required : int
        Usable results in hand, and how many the executor required.
    reason : str
    """

    def __init__(self, batch, failed, n_returned, n_required, reason):
        detail = ", ".join(f"{w}: {why}" for w, why in sorted(failed.items())) or "none"
        super().__init__(
            f"batch {batch} failed ({reason}): {n_returned} usable results, {n_required} needed; "
            f"failed workers: {detail}"
        )
        self.batch, self.failed = batch, dict(failed)
        self.n_returned, self.n_required = n_returned, n_required
        self.reason = reason


class ErrorBoundExceededError(RuntimeError):
    """One decoded input was refused: its error bound is above the executor's ``max_error``.

    The other inputs of its batch are answered; only this one gets the error.

    Attributes
    ----------
    batch : int
    input : int
        The input's row in its batch (``BatchResult.outputs``).
    rmse_p90 : float
        The decoder's bound on the input's root-mean-squared error
        (``Decoded.info["rmse_p90"]``).
    max_error : float
        The executor's ``max_error``, a mean squared error: the input is
        refused when ``rmse_p90 ** 2 > max_error``.
    """

    def __init__(self, batch: int, input: int, rmse_p90: float, max_error: float):
        super().__init__(f"batch {batch}: input {input} refused: its decoded error bound rmse_p90^2 = "
                         f"{rmse_p90 ** 2:.3g} is above max_error = {max_error:g}")
        self.batch, self.input, self.rmse_p90, self.max_error = batch, input, rmse_p90, max_error


class NotFittedError(ValueError, AttributeError):
    """An estimator was used before ``fit`` (as scikit-learn's: a ValueError and an AttributeError,
    so ``hasattr(est, "coef_")`` is False before fitting)."""


class InvalidInputError(ValueError):
    """One input of a stream cannot be computed (NaN, complex, wrong shape, ...).

    Only that input gets this error; the others of the stream are answered.

    Attributes
    ----------
    index : int
        Position of the input in the stream given to ``map``.
    """

    def __init__(self, message: str, *, index: int):
        super().__init__(message)
        self.index = index


class InjectedError(RuntimeError):
    """The error an injected ``"error"`` fault raises on a worker (experiments only)."""
