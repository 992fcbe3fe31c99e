"""Decoding a retired batch into its :class:`~gencc.runtime.batch.BatchResult` (no lock held).

The dispatcher runs :func:`decode_batch` on each
:class:`~gencc.runtime.coordinator.Decode` instruction after releasing its
lock, and hands the outcome to
:meth:`Coordinator.decoded <gencc.runtime.coordinator.Coordinator.decoded>`.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from ..errors import InsufficientReturnsError
from .batch import BatchResult
from .coordinator import Decode
from .microbatch import decode_stacked

__all__ = ["decode_batch"]

log = logging.getLogger("gencc.runtime")


def decode_batch(job: Decode, max_error: float | None = None, observe=None) -> BatchResult | str:
    """Decode one retired batch: its result, or why it failed (a str).

    Parameters
    ----------
    job : Decode
        The batch, its returned slots (sorted) and their outputs, each of shape (B, *out_shape).
    max_error : float, optional
        The quality floor, a mean squared error: an input whose own bound
        ``rmse_p90 ** 2`` exceeds it is refused (NaN row, listed in
        ``refused``); with only a batch estimate, the batch fails above it.
    observe : callable, optional
        ``observe(Y, slots)`` with the stacked outputs, shape (|F|, B, *out_shape), of a
        batch decoded with no worker flagged (self-calibration's sample).

    Returns
    -------
    BatchResult or str
        A scheme that raises (a bug) fails its batch with the reason, never the caller.
    """
    try:
        return _decode(job, max_error, observe)
    except Exception as exc:  # a scheme's bug fails this batch, not the dispatcher
        log.exception("decode failed", extra={"batch": job.batch.index})
        return f"internal error: {exc!r}"


def _decode(job, max_error, observe):
    b, slots = job.batch, job.slots
    t0 = time.monotonic()
    Y = np.stack(job.outputs)  # (|F|, B, *out_shape)
    try:
        outputs, missing, info, est = decode_stacked(job.decoder, Y, slots, b.size)
    except (InsufficientReturnsError, ValueError, np.linalg.LinAlgError) as exc:
        return f"decode failed: {exc}"
    rmse, p90 = info.get("rmse"), info.get("rmse_p90")
    refused = ()
    if max_error is not None:
        if p90 is not None:  # per input: refuse only those whose own bound is too high
            refused = tuple(int(k) for k in np.flatnonzero(~(np.asarray(p90) ** 2 <= max_error)))
            if refused:
                outputs = outputs.copy()
                outputs[list(refused)] = np.nan
        elif est is not None and not est <= max_error:
            return f"decoder's error estimate {est:.3g} above max_error {max_error:g}"
    flagged = tuple(int(s) for s in info.get("flagged", ()))
    res = BatchResult(
        batch=b.index, outputs=outputs, missing=missing, returned=tuple(int(s) for s in slots),
        failed=dict(b.failed), latencies={int(s): b.latencies[s] for s in slots},
        compute_seconds={int(s): b.compute_seconds[s] for s in slots}, micro_batch=b.size,
        wall_time=time.monotonic() - b.t0 + b.encode_time, encode_time=b.encode_time,
        decode_time=time.monotonic() - t0, error_estimate=None if est is None else float(est),
        decode_info=info, flagged=flagged, trusted=len(slots) - len(flagged) >= job.trusted_returns,
        rmse=None if rmse is None else np.asarray(rmse, dtype=np.float64),
        rmse_p90=None if p90 is None else np.asarray(p90, dtype=np.float64), refused=refused,
        max_error=max_error,
    )
    if observe is not None and not flagged:
        observe(Y, slots)
    return res
