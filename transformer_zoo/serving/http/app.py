"""The FastAPI app: OpenAI's `/v1` API (`openai_routes`), the Open Inference Protocol's `/v2`
(`inference_routes`), `/health` and `/metrics`, over the models of a `ModelRegistry`.

Every refusal is answered in the protocol's error shape (OpenAI's `{"error": {...}}` on
`/v1`, `{"error": "..."}` on `/v2`) before any work starts; a failure inside the engine
fails only the requests it touched, and an unexpected one is a logged 500 (`Gate`), or in
a stream an error event and `[DONE]`, on a connection that serves on.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import os

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from transformer_zoo import __version__
from transformer_zoo.serving.http.completions import RequestError
from transformer_zoo.serving.http.inference_routes import add_inference_routes
from transformer_zoo.serving.http.metrics import Metrics
from transformer_zoo.serving.http.models import ModelRegistry, ServerSettings
from transformer_zoo.serving.http.openai_protocol import error_body
from transformer_zoo.serving.http.openai_routes import add_openai_routes

log = logging.getLogger(__name__)


def create_app(
    directories: dict[str, str],
    settings: ServerSettings | None = None,
    on_load_error=None,
    load_in_background: bool = True,
) -> FastAPI:
    """The server's app for `{model name: export directory}`. The models load when the app
    starts: in the background (`/health` is 503 until they have), or, with
    `load_in_background=False`, before the start-up returns (as a Ray replica needs)."""
    settings = settings or ServerSettings()
    metrics = Metrics()
    registry = ModelRegistry(directories, settings, metrics)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        registry.start(on_load_error)
        if not load_in_background:
            await asyncio.to_thread(registry.wait)
        yield
        # uvicorn has answered the requests in flight; the workers have nothing left.
        await asyncio.to_thread(registry.close)

    # No /docs, /redoc or /openapi.json: they would answer without the key, the schema
    # FastAPI draws from these routes lacks the bodies they read themselves, and the
    # pages load their scripts from a CDN. The README documents the API.
    app = FastAPI(
        title="transformer-zoo",
        version=__version__,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.registry, app.state.settings, app.state.metrics = registry, settings, metrics
    app.add_middleware(Gate, settings=settings, metrics=metrics)
    if settings.cors_origins:  # outside the key check, so that preflights pass
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST"],
            allow_headers=["*"],
        )

    @app.exception_handler(RequestError)
    async def refused(request: Request, error: RequestError):
        return _error(request.url.path, error)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException):
        # its headers too: a 405's `Allow`, which RFC 9110 requires, names the methods (a
        # set's, in an order of its own: sorted here)
        headers = dict(error.headers or {})
        if "Allow" in headers:
            headers["Allow"] = ", ".join(sorted(headers["Allow"].split(", ")))
        error = RequestError(error.status_code, str(error.detail), headers=headers)
        return _error(request.url.path, error)

    # --- health and metrics -------------------------------------------------------------
    @app.get("/health")
    async def health():
        if registry.error is not None:
            return JSONResponse({"status": "failed", "error": str(registry.error)}, 503)
        if not registry.ready.is_set():
            return JSONResponse({"status": "loading"}, 503)
        return {"status": "ok", "models": list(registry.entries), "process": os.getpid()}

    @app.get("/metrics")
    async def prometheus():
        return Response(metrics.render(), media_type="text/plain; version=0.0.4")

    add_openai_routes(app, registry, settings, metrics)
    add_inference_routes(app, registry, settings, metrics)
    # HEAD wherever GET, as a general-purpose server must (RFC 9110 §9.1): Starlette's own
    # routes add it, FastAPI's do not; uvicorn leaves the body out.
    for route in app.routes:
        if isinstance(route, APIRoute) and "GET" in route.methods:
            route.methods.add("HEAD")
    return app


class Gate:
    """Counts responses by route and status (a stream's by how it ended: 499 when its
    client left, 504 when it timed out) and the requests in flight by route (from
    arrival until the response has ended, whatever ended it), refuses `/v1` and `/v2`
    requests without the API key (when there is one), and answers an unexpected failure
    with a logged 500 in the protocol's error shape; plain ASGI, so responses pass
    untouched.

    The failure is answered here rather than by an `Exception` handler, which Starlette
    calls from its outermost middleware and then raises again, so that uvicorn closed
    the connection and the client's next request on it failed. Here it ends with the
    response, and a kept-alive connection serves the next request."""

    def __init__(self, app, settings: ServerSettings, metrics: Metrics):
        self.app, self.settings, self.metrics = app, settings, metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope["path"]
        # `/v2/models/{name}/infer`, its `{name:model}` written as `{name}`: known on
        # arrival, so that a request is in flight under the label it is counted by
        route = _route_format(scope)
        status = []

        async def send_and_count(message):
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        in_flight = self.metrics.in_flight.labels(route)
        in_flight.inc()
        try:
            key = self.settings.api_key
            protected = path.startswith(("/v1", "/v2")) and not path.startswith("/v2/health")
            if key and protected and not _has_key(scope, key):
                error = RequestError(401, "A valid API key is needed.")
                return await _error(path, error)(scope, receive, send_and_count)
            await self.app(scope, receive, send_and_count)
        except Exception as error:
            log.exception("request failed")
            if status:  # the response has begun: only closing the connection ends it
                raise
            error = RequestError(500, f"Internal error: {error}")
            await _error(path, error)(scope, receive, send_and_count)
        finally:
            in_flight.dec()
            # a stream opens with 200 and says how it ended (`handling.record_outcome`)
            outcome = scope.get("state", {}).get("outcome") or (status[0] if status else 500)
            self.metrics.requests.labels(route, str(outcome)).inc()


def _has_key(scope, key: str) -> bool:
    """Whether the request carries `Authorization: Bearer KEY`: `Bearer` in any case
    (RFC 9110 §11.1), then one space or more (§11.4), the key compared in constant time."""
    scheme, _, given = dict(scope["headers"]).get(b"authorization", b"").partition(b" ")
    given = given.lstrip(b" ") if scheme.lower() == b"bearer" else b""
    return hmac.compare_digest(given, key.encode())


def _route_format(scope) -> str:
    """The route a request's path matches, as the router will find it
    (`/v2/models/{name}/infer`): the first that matches fully, else the first that
    matches the path with another method (a 405's); "other" where none matches."""
    partial = None
    for route in scope["app"].router.routes:
        match, _ = route.matches(scope)
        if match == Match.FULL:
            return route.path_format
        if match == Match.PARTIAL and partial is None:
            partial = route.path_format
    return partial or "other"


def _error(path: str, error: RequestError) -> JSONResponse:
    if path.startswith("/v2"):
        body = {"error": error.message}
    else:
        body = error_body(error.status, error.message, error.param)
    return JSONResponse(body, error.status, headers=error.headers)
