"""Building and running a server: the executor for a scheme, its app, and uvicorn on loopback.

:func:`build_executor` starts the executor a scheme name asks for (the same
construction as the load benchmark's, :func:`gencc.experiments.load.make_executor`,
so the in-process figures and the served ones compare like for like);
:class:`Server` runs the app on uvicorn in a background thread, bound to
127.0.0.1 unless told otherwise, and stops it gracefully.
"""

from __future__ import annotations

import socket
import threading
import time

import numpy as np

__all__ = ["Server", "build_executor", "SCHEMES"]

SCHEMES = ("gcc", "gcc-sys", "bacc", "replication", "uncoded", "hedged")


def build_executor(scheme: str, model, K: int, N: int, *, backend: str = "threads", micro_batch: int = 1,
                   batch_window: float = 0.005, base: float = 0.05, timeout: float = 30.0, backend_options=None,
                   faults=None):
    """The executor serving ``scheme`` (one of :data:`SCHEMES`) on N workers (uncoded: on K).

    ``base`` is the task latency the adaptive deadline is clipped around (0.5 to 10 times it),
    as in the load benchmark; ``faults``: injected stragglers (e.g. a
    :class:`~gencc.runtime.WorkerStragglers`), for experiments.
    """
    from ..experiments.load import make_executor

    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
    return make_executor(scheme, model, K, N, micro_batch, base, batch_window, faults, backend=backend,
                         backend_options=backend_options, timeout=timeout)


def output_shape(model, in_shape) -> tuple:
    """One output's shape: f (built here once) on one input of zeros."""
    from ..runtime.backends.worker import build_model

    y = np.asarray(build_model(model)(np.zeros((1, *in_shape))))
    return tuple(y.shape[1:])


class Server:
    """An ASGI app on uvicorn in a background thread.

    Parameters
    ----------
    app : ASGI application
    host : str
        Default 127.0.0.1 (loopback only).
    port : int
        0: a free port, read from :attr:`port` once started.

    Examples
    --------
    ``with Server(app) as s: ...`` serves at ``s.url`` until the block ends.
    """

    def __init__(self, app, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning"):
        import uvicorn

        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, port))
        self.host, self.port = host, self._sock.getsockname()[1]
        self._server = uvicorn.Server(uvicorn.Config(app, log_level=log_level, lifespan="on"))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]},
                                        name="gencc-serve", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> "Server":
        self._thread.start()
        end = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > end:
                raise RuntimeError(f"the server did not start on {self.url} within {timeout:g} s")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 60.0):
        """Stop accepting, answer what was accepted (the app's lifespan shuts the executor down)."""
        self._server.should_exit = True
        self._thread.join(timeout=timeout)
        self._sock.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
