"""``gencc serve``: a model server that speaks the Open Inference Protocol (KServe v2, REST).

``oip`` is the protocol as pure functions (parse a request, build a response);
``app`` is the ASGI application in front of one executor; ``metrics`` the
Prometheus metrics; ``server`` builds the executor for a scheme and runs the
app on uvicorn. Install with ``pip install gencc[serve]``.
"""

from .oip import ProtocolError, parse_infer

__all__ = ["create_app", "Server", "build_executor", "ProtocolError", "parse_infer"]


def __getattr__(name):  # the ASGI stack loads only when a server is built
    if name == "create_app":
        from .app import create_app

        return create_app
    if name in ("Server", "build_executor"):
        from . import server

        return getattr(server, name)
    raise AttributeError(name)
