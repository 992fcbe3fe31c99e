"""The Open Inference Protocol's REST form (KServe v2), as pure functions: bytes in, arrays out.

No server here: :func:`parse_infer` turns an infer request (JSON, or JSON plus
the binary-data extension's raw tensors) into float64 arrays and the request's
options, raising :class:`ProtocolError` with the HTTP status and a message that
names what is wrong; :func:`infer_response` builds the answer in the form the
request asked for. The server (:mod:`gencc.serve.app`) only moves requests.

The protocol: https://kserve.github.io/website/latest/modelserving/data_plane/v2_protocol/
(the binary-data extension: Triton's ``binary_data`` parameters and the
``Inference-Header-Content-Length`` header).

Examples
--------
>>> import json
>>> from gencc.serve.oip import parse_infer
>>> body = json.dumps({"inputs": [{"name": "input", "shape": [2, 3], "datatype": "FP32",
...                                "data": [1, 2, 3, 4, 5, 6]}]}).encode()
>>> req = parse_infer(body, None, in_shape=(3,))
>>> req.x.shape, req.x.dtype
((2, 3), dtype('float64'))
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["ProtocolError", "InferRequest", "parse_infer", "infer_response", "DATATYPES", "HEADER_LENGTH"]

#: the binary-data extension's header: the length of the JSON part of the body
HEADER_LENGTH = "Inference-Header-Content-Length"

#: OIP datatype name -> NumPy dtype (little-endian, as the binary extension carries them)
DATATYPES = {"BOOL": np.dtype("bool"), "UINT8": np.dtype("<u1"), "UINT16": np.dtype("<u2"), "UINT32": np.dtype("<u4"),
             "UINT64": np.dtype("<u8"), "INT8": np.dtype("<i1"), "INT16": np.dtype("<i2"), "INT32": np.dtype("<i4"),
             "INT64": np.dtype("<i8"), "FP16": np.dtype("<f2"), "FP32": np.dtype("<f4"), "FP64": np.dtype("<f8")}
_NUMERIC = {k for k in DATATYPES if k != "BOOL"}


class ProtocolError(Exception):
    """A request the protocol or the model cannot take: ``status`` (HTTP) and a message naming why."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


@dataclass
class InferRequest:
    """One parsed infer request.

    Attributes
    ----------
    x : ndarray, shape (n, *in_shape), float64
        The n inputs of the request, finite.
    id : str or None
        The request's ``id``, echoed in the response.
    input_name : str
    exact_only : bool
        The request's parameter ``gencc_exact_only``: answer only with outputs computed by a
        worker on the input itself, never decoded ones.
    binary_outputs : set of str
        Outputs to send in the binary-data extension.
    outputs : list of str or None
        The outputs asked for (None: all).
    datatype : str
        The input's datatype; outputs are sent as FP32 when the input was FP32 or FP16, else FP64.
    """

    x: np.ndarray
    id: str | None = None
    input_name: str = "input"
    exact_only: bool = False
    binary_outputs: set = field(default_factory=set)
    outputs: list | None = None
    datatype: str = "FP64"


def _header_and_tail(body: bytes, header_length):
    if header_length is None:
        return body, b""
    try:
        n = int(header_length)
    except ValueError:
        raise ProtocolError(f"{HEADER_LENGTH} must be an integer, got {header_length!r}") from None
    if not 0 <= n <= len(body):
        raise ProtocolError(f"{HEADER_LENGTH} {n} is outside the body's {len(body)} bytes")
    return body[:n], body[n:]


def _parameters(obj, where):
    params = obj.get("parameters", {})
    if not isinstance(params, dict):
        raise ProtocolError(f"{where} 'parameters' must be an object, got {type(params).__name__}")
    return params


def parse_infer(body: bytes, header_length, *, in_shape=None, input_names=("input",)) -> InferRequest:
    """Parse an infer request's body.

    Parameters
    ----------
    body : bytes
        The request body: JSON, or (binary-data extension) JSON of ``header_length`` bytes
        followed by the raw tensors.
    header_length : str or None
        The ``Inference-Header-Content-Length`` header.
    in_shape : tuple of int, optional
        One input's shape: the tensor must be (n, *in_shape). None: any shape with a row axis.
    input_names : sequence of str
        Names the model's input answers to (the metadata's first is the one advertised).

    Returns
    -------
    InferRequest

    Raises
    ------
    ProtocolError
        Malformed JSON; not exactly one input; an unknown input name, datatype or output; a
        shape that is not (n, *in_shape) or does not match the data; NaN or Inf; a binary
        tensor of the wrong size.
    """
    head, tail = _header_and_tail(body, header_length)
    try:
        doc = json.loads(head)
    except RecursionError:
        raise ProtocolError("the request body nests too deeply") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"the request body is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ProtocolError(f"the request must be a JSON object, got {type(doc).__name__}")
    params = _parameters(doc, "the request's")
    inputs = doc.get("inputs")
    if not isinstance(inputs, list) or len(inputs) != 1 or not isinstance(inputs[0], dict):
        raise ProtocolError(f"'inputs' must be a list of exactly one tensor object (the model has one input, "
                            f"{input_names[0]!r}), got {json.dumps(inputs)[:120] if inputs is not None else 'none'}")
    spec = inputs[0]
    name = spec.get("name")
    if name not in input_names:
        raise ProtocolError(f"unknown input {name!r}: the model's input is {input_names[0]!r}")
    datatype = spec.get("datatype")
    if datatype not in DATATYPES:
        raise ProtocolError(f"input {name!r}: datatype must be one of {sorted(DATATYPES)}, got {datatype!r}")
    if datatype not in _NUMERIC:
        raise ProtocolError(f"input {name!r}: datatype {datatype} is not numeric; the model takes real numbers")
    shape = spec.get("shape")
    if not isinstance(shape, list) or not shape or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                           for d in shape):
        raise ProtocolError(f"input {name!r}: shape must be a non-empty list of non-negative integers, got {shape!r}")
    size = math.prod(shape)
    if size * DATATYPES[datatype].itemsize > len(body) * 8 + 64:  # more values than any body of this size holds
        raise ProtocolError(f"input {name!r}: shape {shape} holds {size} values, more than the request carries")
    iparams = _parameters(spec, f"input {name!r}:")
    dtype = DATATYPES[datatype]
    if "binary_data_size" in iparams:
        nbytes = iparams["binary_data_size"]
        if not isinstance(nbytes, int) or nbytes != size * dtype.itemsize or nbytes > len(tail):
            raise ProtocolError(f"input {name!r}: binary_data_size {nbytes!r} does not match shape {shape} of "
                                f"{datatype} ({size * dtype.itemsize} bytes; {len(tail)} bytes follow the header)")
        flat = np.frombuffer(tail[:nbytes], dtype=dtype)
    else:
        data = spec.get("data")
        if data is None:
            raise ProtocolError(f"input {name!r} has no 'data' (and no binary_data_size)")
        try:
            flat = np.asarray(data, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError, OverflowError, RecursionError):
            raise ProtocolError(f"input {name!r}: 'data' must be numbers (flat or nested lists)") from None
        if flat.size != size:
            raise ProtocolError(f"input {name!r}: {flat.size} values in 'data' do not fill shape {shape} "
                                f"({size} values)")
    x = np.asarray(flat, dtype=np.float64).reshape(shape)
    if in_shape is not None and tuple(shape[1:]) != tuple(in_shape):
        raise ProtocolError(f"input {name!r}: shape must be [n, {', '.join(map(str, in_shape))}] (n inputs of "
                            f"shape {list(in_shape)}), got {shape}")
    if x.ndim < 1 or x.shape[0] == 0:
        raise ProtocolError(f"input {name!r}: the first axis counts the inputs and must be at least 1, got {shape}")
    bad = ~np.isfinite(x.reshape(x.shape[0], -1)).all(axis=1)
    if bad.any():
        raise ProtocolError(f"input {name!r}: rows {np.flatnonzero(bad).tolist()[:10]} contain NaN or Inf")
    outputs, binary = None, set()
    if params.get("binary_data_output"):
        binary = {"output", "exact", "rmse"}
    if "outputs" in doc:
        req = doc["outputs"]
        if not isinstance(req, list) or not all(isinstance(o, dict) and isinstance(o.get("name"), str) for o in req):
            raise ProtocolError("'outputs' must be a list of objects with a 'name'")
        outputs = [o["name"] for o in req]
        unknown = [o for o in outputs if o not in OUTPUTS]
        if unknown:
            raise ProtocolError(f"unknown outputs {unknown}: the model's outputs are {list(OUTPUTS)}")
        default = bool(params.get("binary_data_output"))  # Triton: the default of an output that names none
        binary = {o["name"] for o in req if _parameters(o, f"output {o['name']!r}:").get("binary_data", default)}
    exact_only = params.get("gencc_exact_only", False)
    if not isinstance(exact_only, bool):
        raise ProtocolError(f"parameter gencc_exact_only must be true or false, got {exact_only!r}")
    rid = doc.get("id")
    return InferRequest(x, None if rid is None else str(rid), name, exact_only, binary, outputs, datatype)


#: the outputs every served model answers with: f's output, whether each row is exact, and its error estimate
OUTPUTS = {"output": "f of each input (FP64, or FP32 for an FP32 or FP16 input)",
           "exact": "BOOL per input: computed by a worker on the input itself, not decoded",
           "rmse": "FP64 per input: the decoder's estimate of the row's root-mean-squared error "
                   "(0 for an exact answer, -1 where the scheme has none)"}


def infer_response(req: InferRequest, model_name: str, y: np.ndarray, exact: np.ndarray, rmse: np.ndarray,
                   parameters: dict | None = None) -> tuple[bytes, dict]:
    """The response body and its extra headers.

    Parameters
    ----------
    req : InferRequest
    model_name : str
    y : ndarray, shape (n, *out_shape)
    exact : ndarray of bool, shape (n,)
    rmse : ndarray, shape (n,)
        NaN (or -1) where there is no estimate: sent as -1.
    parameters : dict, optional
        Response-level parameters (strings, numbers, booleans).

    Returns
    -------
    body : bytes
    headers : dict
        ``Inference-Header-Content-Length`` when some output is binary.
    """
    out_type = "FP32" if req.datatype in ("FP32", "FP16") else "FP64"
    with np.errstate(over="ignore"):
        y32 = np.asarray(y, dtype=DATATYPES[out_type])
    if out_type == "FP32" and not np.all(np.isfinite(y32)):  # beyond FP32's range: sent as FP64
        out_type, y32 = "FP64", np.asarray(y, dtype=np.float64)
    rmse = np.where(np.isfinite(rmse), rmse, -1.0)  # no estimate: -1, as documented (JSON has no NaN)
    tensors = {"output": (y32, out_type),
               "exact": (np.asarray(exact, dtype=bool), "BOOL"),
               "rmse": (np.asarray(rmse, dtype=np.float64), "FP64")}
    names = list(OUTPUTS) if req.outputs is None else req.outputs
    outputs, blobs = [], []
    for name in names:
        arr, datatype = tensors[name]
        entry = {"name": name, "datatype": datatype, "shape": list(arr.shape)}
        if name in req.binary_outputs:
            raw = np.ascontiguousarray(arr).tobytes()
            entry["parameters"] = {"binary_data_size": len(raw)}
            blobs.append(raw)
        else:
            entry["data"] = arr.reshape(-1).tolist()
        outputs.append(entry)
    doc = {"model_name": model_name, "model_version": "1", "outputs": outputs}
    if req.id is not None:
        doc["id"] = req.id
    if parameters:
        doc["parameters"] = parameters
    head = json.dumps(doc, allow_nan=False).encode()
    if not blobs:
        return head, {}
    return head + b"".join(blobs), {HEADER_LENGTH: str(len(head))}


def model_metadata(model_name: str, in_shape, out_shape, platform: str) -> dict:
    """The model metadata response (``GET /v2/models/{name}``); -1 marks the batch axis. Any
    numeric input datatype is taken; the output is FP32 for an FP32 or FP16 input, FP64 (as
    advertised) otherwise."""
    out_type = "FP64"
    return {"name": model_name, "versions": ["1"], "platform": platform,
            "inputs": [{"name": "input", "datatype": "FP32", "shape": [-1, *in_shape]}],
            "outputs": [{"name": "output", "datatype": out_type, "shape": [-1, *out_shape]},
                        {"name": "exact", "datatype": "BOOL", "shape": [-1]},
                        {"name": "rmse", "datatype": "FP64", "shape": [-1]}]}
