"""`gencc serve`: the Open Inference Protocol in front of an executor, tested as users meet it.

An unmodified client of the protocol (tritonclient's HTTP client) talks to the
server on loopback; bad requests go through plain HTTP (urllib) so that each
error's status and message are seen as a client sees them.
"""

import json
import socket
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client")
httpclient = pytest.importorskip("tritonclient.http")

import gencc  # noqa: E402
from gencc.runtime import CodedExecutor, Faults  # noqa: E402
from gencc.serve.app import create_app  # noqa: E402
from gencc.serve.oip import HEADER_LENGTH, ProtocolError, infer_response, parse_infer  # noqa: E402
from gencc.serve.server import SCHEMES, Server, build_executor  # noqa: E402

from test_gather import FakeBackend  # noqa: E402
from test_runtime import MODEL, f  # noqa: E402

IN_SHAPE = (3,)
RNG = np.random.default_rng(7)


def _request(url, body: bytes, headers=None, method="POST", timeout=30):
    """Plain HTTP: (status, parsed JSON body or raw bytes, headers)."""
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw, status, hdrs = resp.read(), resp.status, dict(resp.headers)
    except urllib.error.HTTPError as err:
        raw, status, hdrs = err.read(), err.code, dict(err.headers)
    try:
        return status, json.loads(raw), hdrs
    except ValueError:
        return status, raw, hdrs


def _infer_body(x, datatype="FP64", name="input", **extra):
    x = np.asarray(x)
    return json.dumps({"inputs": [{"name": name, "shape": list(x.shape), "datatype": datatype,
                                   "data": x.reshape(-1).tolist()}], **extra}).encode()


# -- the protocol, as pure functions -------------------------------------------------------------------
def test_parse_infer_reads_json_and_names_every_problem():
    req = parse_infer(_infer_body(np.ones((2, 3)), "FP32", id="r1"), None, in_shape=IN_SHAPE)
    assert req.x.shape == (2, 3) and req.x.dtype == np.float64 and req.id == "r1" and req.datatype == "FP32"
    nested = json.dumps({"inputs": [{"name": "input", "shape": [1, 3], "datatype": "INT32", "data": [[1, 2, 3]]}]})
    assert parse_infer(nested.encode(), None, in_shape=IN_SHAPE).x.tolist() == [[1.0, 2.0, 3.0]]
    cases = [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (json.dumps({"inputs": []}).encode(), "exactly one tensor"),
        (_infer_body(np.ones((1, 3)), name="x"), "unknown input 'x'"),
        (_infer_body(np.ones((1, 3)), datatype="FLOAT"), "datatype must be one of"),
        (_infer_body(np.ones((1, 3)), datatype="BOOL"), "not numeric"),
        (_infer_body(np.ones((2, 4))), "shape must be [n, 3]"),
        (_infer_body(np.ones((0, 3))), "at least 1"),
        (json.dumps({"inputs": [{"name": "input", "shape": [2, 3], "datatype": "FP64", "data": [1, 2]}]}).encode(),
         "do not fill shape"),
        (json.dumps({"inputs": [{"name": "input", "shape": [1, 3], "datatype": "FP64",
                                 "data": ["a", "b", "c"]}]}).encode(), "must be numbers"),
        (json.dumps({"inputs": [{"name": "input", "shape": "1x3", "datatype": "FP64", "data": [1]}]}).encode(),
         "non-negative integers"),
        (_infer_body(np.ones((1, 3)), outputs=[{"name": "logits"}]), "unknown outputs"),
        (_infer_body(np.ones((1, 3)), parameters={"gencc_exact_only": "yes"}), "true or false"),
    ]
    for body, message in cases:
        with pytest.raises(ProtocolError, match=message.replace("[", r"\[")) as err:
            parse_infer(body, None, in_shape=IN_SHAPE)
        assert err.value.status == 400
    with pytest.raises(ProtocolError, match=r"rows \[1\] contain NaN or Inf"):
        parse_infer(b'{"inputs": [{"name": "input", "shape": [2, 3], "datatype": "FP64", '
                    b'"data": [1, 2, 3, 4, NaN, 6]}]}', None, in_shape=IN_SHAPE)


def test_oversized_shapes_deep_nesting_and_missing_estimates_are_handled():
    huge = json.dumps({"inputs": [{"name": "input", "shape": [2**62, 3], "datatype": "FP64", "data": []}]})
    with pytest.raises(ProtocolError, match="more than the request carries"):
        parse_infer(huge.encode(), None, in_shape=IN_SHAPE)
    deep = b'{"inputs": [{"name": "input", "shape": [1, 3], "datatype": "FP64", "data": ' + b"[" * 100000 + b"]" * 100000 + b"}]}"
    with pytest.raises(ProtocolError):
        parse_infer(deep, None, in_shape=IN_SHAPE)
    big = b'{"inputs": [{"name": "input", "shape": [1, 3], "datatype": "FP64", "data": [1, 2, 1' + b"0" * 400 + b"]}]}"
    with pytest.raises(ProtocolError, match="NaN or Inf|must be numbers"):
        parse_infer(big, None, in_shape=IN_SHAPE)
    req = parse_infer(_infer_body(np.ones((2, 3)), "FP32", parameters={"binary_data_output": True},
                              outputs=[{"name": "output"}, {"name": "rmse", "parameters": {"binary_data": False}}]),
                      None, in_shape=IN_SHAPE)
    assert req.binary_outputs == {"output"}  # binary_data_output: the default of outputs that name none
    req = parse_infer(_infer_body(np.ones((2, 3)), "FP32"), None, in_shape=IN_SHAPE)
    body, _ = infer_response(req, "m", np.array([[1e39] * 3, [1.0] * 3]), np.array([False, False]),
                             np.array([np.nan, 0.1]))
    doc = json.loads(body)
    assert doc["outputs"][0]["datatype"] == "FP64" and doc["outputs"][2]["data"] == [-1.0, 0.1]  # no NaN in JSON


def test_the_binary_extension_round_trips():
    x = RNG.uniform(-1, 1, size=(2, 3)).astype(np.float32)
    head = json.dumps({"inputs": [{"name": "input", "shape": [2, 3], "datatype": "FP32",
                                   "parameters": {"binary_data_size": x.nbytes}}],
                       "outputs": [{"name": "output", "parameters": {"binary_data": True}}, {"name": "exact"}]})
    body = head.encode() + x.tobytes()
    req = parse_infer(body, str(len(head)), in_shape=IN_SHAPE)
    np.testing.assert_array_equal(req.x, x.astype(np.float64))
    assert req.outputs == ["output", "exact"] and req.binary_outputs == {"output"}
    out, headers = infer_response(req, "m", 2 * req.x, np.array([True, False]), np.array([0.0, 0.1]))
    n = int(headers[HEADER_LENGTH])
    doc = json.loads(out[:n])
    assert [o["name"] for o in doc["outputs"]] == ["output", "exact"] and doc["outputs"][1]["data"] == [True, False]
    y = np.frombuffer(out[n:], dtype="<f4").reshape(2, 3)  # FP32 in, FP32 out
    np.testing.assert_array_equal(y, (2 * x.astype(np.float64)).astype(np.float32))
    with pytest.raises(ProtocolError, match="binary_data_size"):
        parse_infer(body[:-4], str(len(head)), in_shape=IN_SHAPE)  # a tensor cut short
    with pytest.raises(ProtocolError, match="outside the body"):
        parse_infer(body, str(len(body) + 1), in_shape=IN_SHAPE)


def test_the_protocol_modules_example_runs():
    import doctest

    from gencc.serve import oip

    assert doctest.testmod(oip, raise_on_error=False).failed == 0


# -- the server, with an unmodified client ------------------------------------------------------------
@pytest.mark.parametrize("scheme", SCHEMES)
def test_an_unmodified_oip_client_gets_correct_answers_from_every_scheme(scheme):
    ex = build_executor(scheme, MODEL, 2, 4, backend="threads", batch_window=0.002, timeout=30)
    app = create_app(ex, "xsinx", IN_SHAPE, IN_SHAPE, scheme=scheme)
    X = RNG.uniform(-1, 1, size=(5, 3))
    with Server(app) as server:
        client = httpclient.InferenceServerClient(url=f"{server.host}:{server.port}")
        assert client.is_server_live() and client.is_server_ready() and client.is_model_ready("xsinx")
        meta = client.get_model_metadata("xsinx")
        assert meta["inputs"][0]["shape"] == [-1, 3] and [o["name"] for o in meta["outputs"]] == [
            "output", "exact", "rmse"]
        for binary in (True, False):  # the client's default (the binary extension), and JSON
            inp = httpclient.InferInput("input", list(X.shape), "FP64")
            inp.set_data_from_numpy(X, binary_data=binary)
            outs = [httpclient.InferRequestedOutput(n, binary_data=binary) for n in ("output", "exact", "rmse")]
            res = client.infer("xsinx", [inp], outputs=outs, request_id="42")
            y, exact, rmse = res.as_numpy("output"), res.as_numpy("exact"), res.as_numpy("rmse")
            assert y.shape == (5, 3) and exact.shape == rmse.shape == (5,) and res.get_response()["id"] == "42"
            np.testing.assert_array_equal(y[exact], f(X[exact]))  # an answer called exact is f's own output
            np.testing.assert_allclose(y, f(X), atol=0.3)  # x sin x on [-1, 1]: decoded answers are close
            assert np.all(rmse[exact] == 0.0) and np.all((rmse[~exact] > 0) | (rmse[~exact] == -1))
            if scheme in ("replication", "uncoded", "hedged"):
                assert exact.all()
        with pytest.raises(Exception, match="unknown model 'nope'"):
            client.infer("nope", [inp])
        client.close()


def _slow_app(max_pending=4, request_timeout=None, slow=0.0):
    """An executor whose workers answer after ``slow`` seconds (threads), or never (slow=None)."""
    if slow is None:
        ex = CodedExecutor("unused", gencc.Replication(2, 4), FakeBackend(4), timeout=2.5, batch_window=0.001)
    else:
        faults = Faults(workers={w: "slow" for w in range(4)}, slow_delay=slow) if slow else None
        ex = CodedExecutor(MODEL, gencc.Replication(2, 4), "threads", timeout=60, batch_window=0.001, faults=faults)
    return ex, create_app(ex, "xsinx", IN_SHAPE, IN_SHAPE, scheme="replication", max_pending=max_pending,
                          max_body_bytes=4096, request_timeout=request_timeout)


def test_every_bad_request_gets_a_protocol_error_and_the_server_keeps_serving():
    ex, app = _slow_app(max_pending=3)
    with Server(app) as server:
        url = f"{server.url}/v2/models/xsinx/infer"
        cases = [
            (b"{oops", {}, 400, "not valid JSON"),
            (_infer_body(np.ones((1, 4))), {}, 400, "shape must be [n, 3]"),
            (_infer_body(np.ones((1, 3)), datatype="STRING"), {}, 400, "datatype must be one of"),
            (b'{"inputs": [{"name": "input", "shape": [1, 3], "datatype": "FP64", "data": [1, NaN, 3]}]}', {}, 400,
             "NaN or Inf"),
            (_infer_body(np.ones((400, 3))), {}, 413, "over the limit of 4096"),
            (_infer_body(np.ones((1, 3))), {HEADER_LENGTH: "x"}, 400, "must be an integer"),
        ]
        for body, headers, status, message in cases:
            got, doc, _ = _request(url, body, {"Content-Type": "application/json", **headers})
            assert got == status and message in doc["error"], (message, got, doc)
        got, doc, _ = _request(f"{server.url}/v2/models/other/infer", _infer_body(np.ones((1, 3))))
        assert got == 404 and "unknown model 'other'" in doc["error"]
        got, doc, _ = _request(url, _infer_body(np.ones((4, 3))))  # more rows than max_pending in one request
        assert got == 413 and "max_pending = 3" in doc["error"]
        got, doc, _ = _request(url, _infer_body(np.full((2, 3), 0.5)))  # and a good one is still answered
        assert got == 200 and np.allclose(doc["outputs"][0]["data"], f(np.full(6, 0.5)))
        got, text, _ = _request(f"{server.url}/metrics", None, method="GET")
        text = text.decode() if isinstance(text, bytes) else str(text)
        assert 'gencc_requests_refused_total{reason="bad_request"} 5.0' in text
        assert 'gencc_requests_refused_total{reason="too_large"} 2.0' in text
        assert 'gencc_requests_refused_total{reason="unknown_model"} 1.0' in text
        assert 'gencc_answers_total{kind="exact"} 2.0' in text and "gencc_request_seconds_bucket" in text
        assert 'gencc_executor_events_total{kind="batches"}' in text and "gencc_worker_restarts_total 0.0" in text


def test_overload_is_shed_with_503_a_stuck_request_times_out_and_a_disconnect_leaks_nothing():
    ex, app = _slow_app(max_pending=2, request_timeout=1.5, slow=None)  # the workers never answer
    with Server(app) as server:
        url = f"{server.url}/v2/models/xsinx/infer"
        first = {}
        t = threading.Thread(target=lambda: first.update(r=_request(url, _infer_body(np.ones((2, 3))))), daemon=True)
        t.start()
        time.sleep(0.3)  # the first request's two rows fill the queue
        got, doc, headers = _request(url, _infer_body(np.ones((1, 3))))
        assert got == 503 and "overloaded" in doc["error"] and headers.get("retry-after") == "1"
        t.join(timeout=30)
        assert first["r"][0] == 504 and "no answer within 1.5 s" in first["r"][1]["error"]
        _, text, _ = _request(f"{server.url}/metrics", None, method="GET")
        assert b"gencc_queue_depth 2.0" in text  # timed out, still computed: still counted against the queue
        for _ in range(100):  # until the executor fails that batch (its timeout, 2.5 s; bounded: 5 s)
            _, text, _ = _request(f"{server.url}/metrics", None, method="GET")
            if b"gencc_queue_depth 0.0" in text:
                break
            time.sleep(0.05)
        assert b"gencc_queue_depth 0.0" in text
        # a client that sends a request and goes away: the server stays up, the queue empties
        with socket.create_connection((server.host, server.port), timeout=5) as sock:
            body = _infer_body(np.ones((1, 3)))
            sock.sendall(b"POST /v2/models/xsinx/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        for depth in (b"gencc_queue_depth 1.0", b"gencc_queue_depth 0.0"):  # accepted, then given up on
            for _ in range(100):  # bounded: 5 s
                _, text, _ = _request(f"{server.url}/metrics", None, method="GET")
                if depth in text:
                    break
                time.sleep(0.05)
            assert depth in text
        got, _, _ = _request(f"{server.url}/v2/health/live", None, method="GET")
        assert got == 200
        assert b'gencc_requests_refused_total{reason="overloaded"} 1.0' in text
        failed = [float(line.rsplit(b" ", 1)[1]) for line in text.splitlines()
                  if line.startswith(b"gencc_requests_failed_total{")]
        assert sum(failed) == 2.0  # the stuck request (timeout) and the one whose client left (timeout or failed)


def test_exact_only_requests_refuse_decoded_answers():
    ex = build_executor("gcc", MODEL, 2, 4, backend="threads", batch_window=0.002)  # non-systematic: all decoded
    app = create_app(ex, "xsinx", IN_SHAPE, IN_SHAPE, scheme="gcc")
    with Server(app) as server:
        url = f"{server.url}/v2/models/xsinx/infer"
        got, doc, _ = _request(url, _infer_body(np.ones((2, 3)), parameters={"gencc_exact_only": True}))
        assert got == 503 and "gencc_exact_only" in doc["error"]
        got, doc, _ = _request(url, _infer_body(np.ones((2, 3))))
        assert got == 200 and doc["outputs"][1]["data"] == [False, False] and doc["parameters"]["gencc_trusted"]


def test_a_graceful_stop_answers_the_requests_it_accepted_and_then_refuses():
    ex, app = _slow_app(max_pending=64, slow=0.5)
    server = Server(app).start()
    url = f"{server.url}/v2/models/xsinx/infer"
    got = []
    threads = [threading.Thread(target=lambda: got.append(_request(url, _infer_body(np.ones((1, 3))))), daemon=True)
               for _ in range(3)]
    for t in threads:
        t.start()
    time.sleep(0.2)  # accepted, the workers still computing
    server.stop()
    for t in threads:
        t.join(timeout=30)
    assert len(got) == 3 and all(status == 200 for status, _, _ in got)
    with pytest.raises(RuntimeError, match="shut down"):
        ex.submit_one(np.ones(3))  # the lifespan's end shut the executor down
