"""Coding B batches at once: the stacking behind ``CodedExecutor(micro_batch=B)``.

A scheme's encoder and decoder are linear per coordinate, so B batches of K
inputs are coded in one call by stacking them along the feature axis.
Request ``i`` of a micro-batch of ``B*K`` requests is input ``k = i % K`` of
batch ``b = i // K``:

* encode: X (B*K, *in) -> (B, K, d) -> (K, B*d) -> ``scheme.encode`` ->
  (N, B*d) -> (N, B, *in): worker n gets B coded inputs and runs f on a
  batch of B;
* decode: outputs (|F|, B, *out) -> (|F|, B*p) -> ``scheme.decode_with_info``
  -> (K, B*p) -> (B*K, *out).

For a fixed linear decoder (BACC, LCC, LeTCC, a calibrated GCC, replication)
this equals decoding each of the B batches on its own. The adaptive GCC
decoder chooses its kernel and ridge once, jointly over the B batches (its
leave-one-out error is then the mean over all B*p output coordinates), so its
answers can differ slightly from B separate decodes.
"""

from __future__ import annotations

import numpy as np

from ..errors import MissingOutputsError

__all__ = ["encode_stacked", "decode_stacked", "requests_of_inputs"]


def encode_stacked(scheme, X, B: int) -> np.ndarray:
    """Encode B batches of K inputs in one call.

    Parameters
    ----------
    scheme : CodingScheme
    X : ndarray, shape (B*K, *in_shape)
        Request ``b*K + k`` is input k of batch b.
    B : int

    Returns
    -------
    coded : ndarray, shape (N, B, *in_shape)
        ``coded[n]`` is worker n's task: B coded inputs.
    """
    X = np.asarray(X, dtype=np.float64)
    coded = scheme.encode_many(X.reshape((B, scheme.n_inputs, *X.shape[1:])))  # (B, N, *in_shape)
    return np.ascontiguousarray(coded.swapaxes(0, 1))


def requests_of_inputs(inputs, K: int, B: int) -> tuple[int, ...]:
    """The requests ``b*K + k`` (b < B) of the scheme's inputs k, sorted."""
    return tuple(sorted(b * K + int(k) for b in range(B) for k in inputs))


def decode_stacked(scheme, Y, returned, B: int):
    """Decode B stacked batches from the returned workers' outputs.

    Parameters
    ----------
    scheme : CodingScheme
    Y : ndarray, shape (len(returned), B, *out_shape)
        ``Y[j]`` is the output of worker ``returned[j]`` on its B coded inputs.
    returned : sequence of int
    B : int

    Returns
    -------
    outputs : ndarray, shape (B*K, *out_shape)
        Rows of ``missing`` are NaN.
    missing : tuple of int
        Requests no returned worker answered (replication and uncoded only).
    info : dict
        The scheme's decode info; a systematic scheme's ``"exact"`` mask and
        the per-input ``"rmse"`` and ``"rmse_p90"`` are expanded to the B*K
        requests.
    error_estimate : float or None

    Raises
    ------
    InsufficientReturnsError, ValueError, LinAlgError
        As ``scheme.decode_with_info``.
    """
    K = scheme.n_inputs
    Y = np.asarray(Y, dtype=np.float64)
    out_shape = Y.shape[2:]
    p = int(np.prod(out_shape, dtype=np.int64))
    Yf = Y.reshape(Y.shape[0], B * p)
    missing: tuple = ()
    try:
        dec = scheme.decode_with_info(Yf, returned)
        est, info, err = dec.estimate, dict(dec.info), dec.error_estimate
    except MissingOutputsError as exc:
        est, info = exc.partial, dict(exc.info)
        err = info.get("error_estimate")
        missing = requests_of_inputs(np.asarray(exc.missing).ravel(), K, B)
    outputs = np.asarray(est, dtype=np.float64).reshape(K, B, p).transpose(1, 0, 2).reshape((B * K, *out_shape))
    if "exact" in info:
        info["exact"] = np.tile(np.asarray(info["exact"], dtype=bool), B)
    for key in ("rmse", "rmse_p90"):  # one estimate per input position, pooled over the B batches
        if key in info:
            info[key] = np.tile(np.asarray(info[key], dtype=np.float64), B)
    return outputs, missing, info, err
