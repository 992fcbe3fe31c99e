"""Batch latency of a scheme on real workers: the shared loop of the demo and
the latency benchmark."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..runtime import BatchFailedError, CodedExecutor

__all__ = ["LatencyRun", "run_batches", "latency_summary"]


@dataclass
class LatencyRun:
    """What :func:`run_batches` measured.

    Attributes
    ----------
    outputs : ndarray, shape (B * K, *out_shape)
        Decoded outputs in input order (NaN rows for failed batches or
        missing inputs). If no batch succeeded the output shape is unknown
        and this has shape (B * K, 0).
    walls, encode, decode : ndarray, shape (B,)
        Seconds per batch: end to end (encode, dispatch, gather, decode), and
        the encode and decode parts. A failed batch counts in ``walls`` with
        the time it took to fail (so tails are not flattered by dropping
        it) and is left out of ``encode`` and ``decode``.
    answered : ndarray of bool, shape (B * K,)
        Inputs that got an output.
    exact : ndarray of bool, shape (B * K,)
        Inputs answered with f's own output (``decode_info["exact"]``: a
        returned copy or systematic worker), not an approximation.
    startup_s : float
        Seconds to start the workers (each builds the model once).
    failed : int
        Batches that raised :class:`~gencc.runtime.BatchFailedError`.
    """

    outputs: np.ndarray
    walls: np.ndarray
    encode: np.ndarray
    decode: np.ndarray
    answered: np.ndarray
    startup_s: float
    failed: int
    exact: np.ndarray | None = None


def run_batches(model, scheme, X, *, faults=None, n_wait=None, timeout=30.0, progress=False, desc=None,
                backend="local", backend_options=None) -> LatencyRun:
    """Submit X in batches of K, one batch at a time, and time each.

    One batch at a time keeps queueing out of the measurement: each wall time
    is the latency of a batch on an idle pool.

    Parameters
    ----------
    model : factory, torch module or "module:attr"
        See :class:`~gencc.runtime.CodedExecutor`.
    scheme : CodingScheme
    X : ndarray, shape (B * K, *in_shape)
    faults : Faults, optional
    n_wait : int, optional
    timeout : float
        Per batch.
    progress : bool
        Show a progress bar over batches.
    desc : str, optional
        Label of the progress bar.
    backend, backend_options
        Passed to :class:`~gencc.runtime.CodedExecutor`.

    Returns
    -------
    LatencyRun
    """
    K = scheme.n_inputs
    X = np.asarray(X, dtype=np.float64)
    if X.shape[0] % K:
        raise ValueError(f"X must hold a multiple of K = {K} inputs, got {X.shape[0]}")
    B = X.shape[0] // K
    t0 = time.monotonic()
    outs, walls, enc, dec, answered, exact, failed = [], [], [], [], [], [], 0
    kw = {} if n_wait is None else {"n_wait": n_wait}
    with CodedExecutor(model, scheme, backend, timeout=timeout, faults=faults, backend_options=backend_options,
                       **kw) as ex:
        startup = time.monotonic() - t0
        batches = range(B)
        if progress:
            from tqdm.auto import tqdm

            batches = tqdm(batches, desc=desc or type(scheme).__name__, leave=False, unit="batch")
        for b in batches:
            t_submit = time.monotonic()
            try:
                r = ex.submit(X[b * K:(b + 1) * K]).result(timeout=timeout + 30)
            except BatchFailedError:
                failed += 1
                walls.append(time.monotonic() - t_submit)
                outs.append(None)
                answered.append(np.zeros(K, dtype=bool))
                exact.append(np.zeros(K, dtype=bool))
                continue
            outs.append(r.outputs)
            ok = np.ones(K, dtype=bool)
            ok[list(r.missing)] = False
            answered.append(ok)
            exact.append(ok & np.asarray(r.decode_info.get("exact", np.zeros(K, dtype=bool)), dtype=bool))
            walls.append(r.wall_time)
            enc.append(r.encode_time)
            dec.append(r.decode_time)
    shape = next((o.shape[1:] for o in outs if o is not None), (0,))
    outputs = np.concatenate([np.full((K, *shape), np.nan) if o is None else o for o in outs])
    return LatencyRun(outputs, np.array(walls), np.array(enc), np.array(dec), np.concatenate(answered),
                      startup, failed, np.concatenate(exact))


def latency_summary(walls) -> dict:
    """Mean and the 50th, 95th, 99th and 99.9th percentiles of batch latency, seconds."""
    w = np.asarray(walls, dtype=np.float64)
    if w.size == 0:
        return {k: float("nan") for k in ("mean_s", "p50_s", "p95_s", "p99_s", "p999_s")}
    return {"mean_s": float(w.mean()), "p50_s": float(np.percentile(w, 50)), "p95_s": float(np.percentile(w, 95)),
            "p99_s": float(np.percentile(w, 99)), "p999_s": float(np.percentile(w, 99.9))}
