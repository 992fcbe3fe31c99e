"""The HTTP server: the Open Inference Protocol's REST endpoints in front of one executor.

:func:`create_app` returns an ASGI application (Starlette) that serves one
model through a :class:`~gencc.runtime.CodedExecutor` or
:class:`~gencc.runtime.HedgedExecutor` (the scheme is the executor's):
every input row of a request goes to ``submit_one``, so concurrent requests
share coded batches. Endpoints:

=====================================  ===============================================================
``GET /v2/health/live``                200 while the process serves
``GET /v2/health/ready``               200 while the executor takes requests, 503 once it is closing
``GET /v2``                            server metadata
``GET /v2/models/{name}``              model metadata (input ``input``; outputs ``output``, ``exact``, ``rmse``)
``GET /v2/models/{name}/ready``        200, or 404 for another model
``POST /v2/models/{name}/infer``       infer (JSON, or the binary-data extension)
``GET /metrics``                       Prometheus text format
=====================================  ===============================================================

Every request gets an answer or a protocol error, never a hang: a malformed
body, a wrong shape or datatype, NaN or an unknown model is a 4xx naming what
is wrong; a body over ``max_body_bytes`` is 413; more input rows in flight
than ``max_pending`` is 503 with ``Retry-After`` (load shedding, a bounded
queue, in which a row whose request timed out counts until the executor ends it); a batch the workers could not answer (every worker lost, the
timeout) is 503 with the executor's reason; a request with no answer within
``request_timeout`` is 504. Shutting down (the ASGI lifespan's end) refuses
new requests with 503 and lets the executor answer or fail every accepted
one (``shutdown(wait=True)``).
"""

from __future__ import annotations

import asyncio
import logging
import time

import numpy as np

from ..errors import BatchFailedError, ErrorBoundExceededError, MissingOutputsError
from .metrics import ServerMetrics
from .oip import HEADER_LENGTH, ProtocolError, infer_response, model_metadata, parse_infer

__all__ = ["create_app"]

log = logging.getLogger("gencc.serve")


def _error(message: str, status: int, headers=None):
    from starlette.responses import JSONResponse

    return JSONResponse({"error": message}, status_code=status, headers=headers)


def _call_soon(loop, fn, *args):
    """``fn(*args)`` on the event loop, from any thread; nothing once the loop has closed."""
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:
        pass


def _exception(fut):
    """A done future's exception (a cancelled one's CancelledError), or None."""
    return fut.exception() if not fut.cancelled() else asyncio.CancelledError("cancelled")


def create_app(executor, model_name: str, in_shape, out_shape, *, scheme: str = "", max_pending: int = 4096,
               max_body_bytes: int = 64 << 20, request_timeout: float | None = None, registry=None,
               shutdown_executor: bool = True):
    """An ASGI app serving ``executor``'s model as ``model_name``.

    Parameters
    ----------
    executor : CodedExecutor or HedgedExecutor
        Already started; ``submit_one`` takes one input of shape ``in_shape``.
    model_name : str
    in_shape, out_shape : tuple of int
        One input's and one output's shape (the metadata; requests are checked against ``in_shape``).
    scheme : str
        Named in the server metadata (``platform``).
    max_pending : int
        Input rows accepted and not yet answered, at most: past it, 503.
    max_body_bytes : int
        Largest request body: past it, 413.
    request_timeout : float, optional
        Seconds a request waits for its answers (default: the executor's ``timeout`` + 5 s).
    registry : prometheus_client.CollectorRegistry, optional
        Where the metrics live (default: a new one, served at ``/metrics``).
    shutdown_executor : bool
        Shut the executor down when the app's lifespan ends.

    Returns
    -------
    starlette.applications.Starlette
    """
    from contextlib import asynccontextmanager

    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    in_shape, out_shape = tuple(in_shape), tuple(out_shape)
    wait_s = request_timeout if request_timeout is not None else executor.timeout + 5.0
    metrics = ServerMetrics(executor, registry)
    state = {"pending": 0, "closing": False}

    def release(rows):
        state["pending"] -= rows
        metrics.queue_depth.set(state["pending"])

    @asynccontextmanager
    async def lifespan(app):
        yield
        state["closing"] = True
        if shutdown_executor:
            await asyncio.to_thread(executor.shutdown)

    async def live(request):
        return JSONResponse({"live": True})

    async def ready(request):
        if state["closing"]:
            return _error("shutting down", 503)
        return JSONResponse({"ready": True})

    async def server_metadata(request):
        from .. import __version__

        return JSONResponse({"name": "gencc", "version": __version__, "extensions": ["binary_tensor_data"]})

    def known(request):
        name = request.path_params["name"]
        if name != model_name:
            return _error(f"unknown model {name!r}: this server serves {model_name!r}", 404)
        return None

    async def metadata(request):
        return known(request) or JSONResponse(model_metadata(model_name, in_shape, out_shape, f"gencc-{scheme}"))

    async def model_ready(request):
        return known(request) or (_error("shutting down", 503) if state["closing"] else JSONResponse({"ready": True}))

    async def metrics_endpoint(request):
        body, content_type = metrics.exposition()
        return Response(body, media_type=content_type)

    async def infer(request):
        t0 = time.perf_counter()
        refused = known(request)
        if refused is not None:
            metrics.refused("unknown_model")
            return refused
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_body_bytes:
            metrics.refused("too_large")
            return _error(f"request body of {declared} bytes is over the limit of {max_body_bytes}", 413)
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > max_body_bytes:
                metrics.refused("too_large")
                return _error(f"request body is over the limit of {max_body_bytes} bytes", 413)
        try:
            req = parse_infer(bytes(body), request.headers.get(HEADER_LENGTH), in_shape=in_shape)
        except ProtocolError as exc:
            metrics.refused("bad_request")
            return _error(str(exc), exc.status)
        except Exception as exc:  # a parse this module did not foresee: still a protocol error, counted
            log.exception("parsing a request failed")
            metrics.refused("bad_request")
            return _error(f"the request could not be read: {type(exc).__name__}: {exc}", 400)
        n = len(req.x)
        if state["closing"]:
            metrics.refused("shutting_down")
            return _error("shutting down: no new requests", 503)
        if n > max_pending:
            metrics.refused("too_large")
            return _error(f"{n} inputs in one request are more than the server's max_pending = {max_pending}", 413)
        if state["pending"] + n > max_pending:
            metrics.refused("overloaded")
            return _error(f"overloaded: {state['pending']} inputs in flight, the limit is {max_pending}; retry later",
                          503, headers={"Retry-After": "1"})
        state["pending"] += n
        metrics.queue_depth.set(state["pending"])
        futs = []
        try:
            try:
                futs = [executor.submit_one(row) for row in req.x]
            except RuntimeError as exc:  # shut down between the check and the submit
                metrics.refused("shutting_down")
                return _error(f"not accepted: {exc}", 503)
            done, late = await asyncio.wait([asyncio.wrap_future(f) for f in futs], timeout=wait_s)
            for w in done:  # read here (each row's own future is read below): never "exception never retrieved"
                w.cancelled() or w.exception()
            for w in late:  # given up on: a row still in the batching window is dropped, not computed
                w.cancel()
        finally:  # a row the executor still computes (its request timed out) stays counted until it ends
            running = [f for f in futs if not f.done()]
            release(n - len(running))
            loop = asyncio.get_running_loop()
            for f in running:
                f.add_done_callback(lambda _f: _call_soon(loop, release, 1))
        if late:
            metrics.failed("timeout")
            return _error(f"no answer within {wait_s:g} s for {len(late)} of {n} inputs", 504)
        errors = [(i, exc) for i, fut in enumerate(futs) if (exc := _exception(fut)) is not None]
        if errors:
            i, exc = errors[0]
            metrics.failed(type(exc).__name__)
            status = 503 if isinstance(exc, (BatchFailedError, MissingOutputsError, ErrorBoundExceededError,
                                             asyncio.CancelledError)) else 500
            return _error(f"input {i} (and {len(errors) - 1} more) could not be answered: "
                          f"{type(exc).__name__}: {exc}", status)
        infos = [f.info for f in futs]
        exact = np.array([bool(info is not None and info.exact) for info in infos])
        if req.exact_only and not exact.all():
            metrics.failed("not_exact")
            return _error(f"inputs {np.flatnonzero(~exact).tolist()[:10]} were answered only by decoding, and the "
                          f"request asked for exact answers (gencc_exact_only)", 503)
        rmse = np.array([0.0 if e else (np.nan if info is None or info.rmse is None else float(info.rmse))
                         for e, info in zip(exact, infos)])  # NaN: no estimate (sent as -1)
        y = np.stack([f.result() for f in futs])
        body, headers = infer_response(req, model_name, y, exact, rmse,
                                       {"gencc_trusted": all(info is None or info.trusted for info in infos)})
        metrics.answered(exact, time.perf_counter() - t0)
        media = "application/octet-stream" if headers else "application/json"
        return Response(body, media_type=media, headers=headers)

    routes = [Route("/v2/health/live", live), Route("/v2/health/ready", ready), Route("/v2", server_metadata),
              Route("/v2/models/{name}", metadata), Route("/v2/models/{name}/ready", model_ready),
              Route("/v2/models/{name}/infer", infer, methods=["POST"]), Route("/metrics", metrics_endpoint)]
    return Starlette(routes=routes, lifespan=lifespan)
