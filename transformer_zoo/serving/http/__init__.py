"""`transformer-zoo serve`: an HTTP server for exported models, TensorFlow-free.

- OpenAI's API (`/v1/models`, `/v1/completions`, `/v1/embeddings`), which the official
  `openai` client uses unchanged;
- the Open Inference Protocol v2 (`/v2/...`, KServe and Triton), which `tritonclient.http`
  uses unchanged, binary tensors included;
- `/health` (503 while loading) and `/metrics` (Prometheus).

Generation is continuously batched and encoder requests are micro-batched
(`scheduler`); the queue is bounded (429 past it) and SIGTERM finishes the requests in
flight before the process exits (uvicorn's graceful shutdown, bounded by the request
timeout plus `SHUTDOWN_MARGIN`, then the workers').

Example:
    from transformer_zoo.serving.http import serve
    serve({"dates": "exports/dates"}, port=8000)
"""

from __future__ import annotations

import signal
import socket
import threading

from transformer_zoo.serving.http.app import create_app
from transformer_zoo.serving.http.models import ServerSettings, model_names

__all__ = ["ServerSettings", "create_app", "listening_socket", "model_names", "serve"]

SHUTDOWN_MARGIN = 5.0  # seconds past `request_timeout` that SIGTERM waits for requests


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to `host:port` as uvicorn binds one (`SO_REUSEADDR`; IPv6 for a host
    with a colon), for `serve` to hand to uvicorn. Binding it before anything starts
    makes a port in use one `OSError` (`errno.EADDRINUSE`) rather than a failure after
    start-up, while the models load.

    Raises:
        OSError: the address is in use or not this machine's.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listening = socket.socket(family)
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind((host, port))
    except OSError:
        listening.close()
        raise
    return listening


def serve(
    directories: dict[str, str],
    host: str = "127.0.0.1",
    port: int = 8000,
    settings: ServerSettings | None = None,
    log_level: str = "warning",
    listening: socket.socket | None = None,
) -> int:
    """Serves `{model name: export directory}` until SIGTERM or Ctrl-C; returns 0, or 1
    when a model failed to load. `listening`: a socket bound to `host:port` already
    (`listening_socket`), which the server then owns."""
    import uvicorn

    listening = listening or listening_socket(host, port)

    failed = []
    server = None

    def on_load_error(error):
        failed.append(error)
        if server is not None:
            server.should_exit = True

    settings = settings or ServerSettings()
    app = create_app(directories, settings, on_load_error)
    # Every request in flight ends within `request_timeout` (its body read included:
    # `handling.time_left`), so the drain is bounded by it, plus a margin for answering;
    # what is still running then (nothing that should be) is cancelled.
    config = uvicorn.Config(
        app, host=host, port=port, log_level=log_level, access_log=False, lifespan="on",
        timeout_graceful_shutdown=settings.request_timeout + SHUTDOWN_MARGIN,
    )  # fmt: skip
    server = uvicorn.Server(config)
    # uvicorn drains on SIGTERM, then raises the signal again under the handler that was
    # there before it ran: this one, so that a drained server exits with status 0.
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: None) if main else None
    try:
        server.run(sockets=[listening])
    finally:
        listening.close()
        if main:
            signal.signal(signal.SIGTERM, previous)
    return 1 if failed else 0
