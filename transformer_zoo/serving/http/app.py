"""The FastAPI app: OpenAI's `/v1` API, the Open Inference Protocol's `/v2`, `/health`
and `/metrics`, over the models of a `ModelRegistry`.

Every refusal is answered in the protocol's error shape (OpenAI's `{"error": {...}}` on
`/v1`, `{"error": "..."}` on `/v2`) before any work starts; a failure inside the engine
fails only the requests it touched, and an unexpected one is a logged 500 (`Gate`), or in
a stream an error event and `[DONE]`, on a connection that serves on.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import time
import uuid
import zlib

import numpy as np
import orjson
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from transformer_zoo import __version__
from transformer_zoo.serving.http import inference_protocol as oip
from transformer_zoo.serving.http.completions import (
    Choice,
    Generation,
    RequestError,
    check_max_tokens,
    prompt_rows,
    strategy,
)
from transformer_zoo.serving.http.metrics import Metrics
from transformer_zoo.serving.http.models import ModelRegistry, ServerSettings
from transformer_zoo.serving.http.openai_protocol import (
    CompletionRequest,
    EmbeddingRequest,
    error_body,
)
from transformer_zoo.serving.http.scheduler import Closed, QueueFull, TooLarge

log = logging.getLogger(__name__)
POLL = 0.25  # seconds between checks that a waiting client is still there
ENCODINGS = ("identity", "gzip", "deflate")  # request bodies' Content-Encoding
VERSION = "1"  # a v2 model's one version


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

    app = FastAPI(title="transformer-zoo", version=__version__, lifespan=lifespan)
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
        return _error(request.url.path, RequestError(error.status_code, str(error.detail)))

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

    # --- OpenAI ------------------------------------------------------------------------
    @app.get("/v1/models")
    async def list_models():
        created = int(time.time())
        return {
            "object": "list",
            "data": [
                {"id": name, "object": "model", "created": created, "owned_by": "transformer-zoo"}
                for name in _ready(registry).entries
            ],
        }

    @app.post("/v1/completions")
    async def completions(request: Request):
        body = await _parse(request, CompletionRequest, settings)
        entry = _model(registry, body.model, "generate", ("decoder-only", "encoder-decoder"))
        served = entry.served
        rows = prompt_rows(served, body.prompt)
        max_tokens = 16 if body.max_tokens is None else body.max_tokens
        check_max_tokens(served, rows, max_tokens, settings.max_tokens)
        if body.echo and served.family != "decoder-only":
            raise RequestError(400, "`echo` needs a decoder-only model.", "echo")
        strategy(body.temperature, body.top_p, body.top_k, body.seed)  # checked now

        def make_strategy(j):
            seed = None if body.seed is None else body.seed + j
            return strategy(body.temperature, body.top_p, body.top_k, seed)

        generation = Generation(
            entry.worker, [row.ids for row in rows], max_tokens, make_strategy, body.n,
            body.stop, body.logprobs, settings.request_timeout,
            prompt_logprobs=body.echo and body.logprobs is not None,
        )  # fmt: skip
        choices = [
            Choice(served, body.stop, row.ids, row.echo_from if body.echo else None)
            for row in rows
            for _ in range(body.n)
        ]
        _submit(generation)
        usage_prompt = sum(len(row.ids) for row in rows)
        meta = {
            "id": f"cmpl-{uuid.uuid4().hex}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": body.model,
        }
        ttft = metrics.time_to_first_token.labels(body.model)
        if body.stream:
            include_usage = bool(body.stream_options and body.stream_options.include_usage)
            stream = _stream(request, generation, choices, meta, body, usage_prompt, include_usage)
            return StreamingResponse(stream(ttft), media_type="text/event-stream")
        await _wait(request, generation, choices)
        if generation.first_token_at is not None:
            ttft.observe(generation.first_token_at - generation.arrived)
        _raise_failure(choices)
        completion_tokens = sum(len(c.tokens) for c in choices)
        return _json(
            {
                **meta,
                "choices": [
                    {
                        "index": i,
                        "text": c.prefix + c.text,
                        "logprobs": c.logprobs(body.logprobs),
                        "finish_reason": c.finish_reason,
                    }
                    for i, c in enumerate(choices)
                ],
                "usage": _usage(usage_prompt, completion_tokens),
            }
        )

    @app.post("/v1/embeddings")
    async def embeddings(request: Request):
        body = await _parse(request, EmbeddingRequest, settings)
        entry = _model(registry, body.model, "embed", ("encoder-only",))
        texts = [body.input] if isinstance(body.input, str) else body.input
        if not texts or any(not text.strip() for text in texts):
            raise RequestError(400, "The input is empty.", "input")
        vectors, counts = await _encoder_run(request, entry, "embed", texts, settings)
        data = []
        for i, vector in enumerate(vectors):
            if body.encoding_format == "base64":
                embedding = base64.b64encode(vector.astype("<f4").tobytes()).decode()
            else:
                embedding = vector  # float32 numbers, written by orjson (`_json`)
            data.append({"object": "embedding", "index": i, "embedding": embedding})
        tokens = sum(counts)
        return _json(
            {
                "object": "list",
                "data": data,
                "model": body.model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    # --- Open Inference Protocol v2 ------------------------------------------------------
    @app.get("/v2")
    async def server_metadata():
        return {
            "name": "transformer-zoo",
            "version": __version__,
            "extensions": ["binary_tensor_data"],
        }

    @app.get("/v2/health/live")
    async def live():
        return {"live": True}

    @app.get("/v2/health/ready")
    async def ready():
        is_ready = registry.ready.is_set()
        return JSONResponse({"ready": is_ready}, 200 if is_ready else 503)

    @app.get("/v2/models/{name}")
    @app.get("/v2/models/{name}/versions/{version}")
    async def model_metadata(name: str, request: Request):
        entry = _v2_model(registry, name, request)
        return {
            "name": name,
            "versions": [VERSION],
            "platform": "onnxruntime_onnx",
            "inputs": [{"name": "text", "datatype": "BYTES", "shape": [-1]}],
            "outputs": [
                {"name": output, "datatype": datatype, "shape": shape}
                for output, (datatype, shape) in _v2_outputs(entry).items()
            ],
        }

    @app.get("/v2/models/{name}/ready")
    @app.get("/v2/models/{name}/versions/{version}/ready")
    async def model_ready(name: str, request: Request):
        _v2_model(registry, name, request)
        return {"name": name, "ready": True}

    @app.post("/v2/models/{name}/infer")
    @app.post("/v2/models/{name}/versions/{version}/infer")
    async def infer(name: str, request: Request):
        raw = await _body(request, settings)
        try:
            parsed, tensors = oip.parse_request(raw, request.headers.get(oip.HEADER))
            entry = _v2_model(registry, name, request)
            names, binary = oip.binary_outputs(parsed, list(_v2_outputs(entry)))
        except oip.ProtocolError as error:
            raise RequestError(400, str(error)) from None
        if set(tensors) != {"text"}:
            raise RequestError(
                400, f"The model takes one BYTES input, `text`; got {sorted(tensors)}."
            )
        texts = tensors["text"]
        if not isinstance(texts, list):
            raise RequestError(400, "The input `text` must be BYTES (strings).")
        if not texts or (entry.family == "encoder-only" and any(not t.strip() for t in texts)):
            raise RequestError(400, "The input `text` is empty.")
        parameters = parsed.get("parameters") or {}
        outputs = await _v2_run(request, entry, texts, names, parameters, settings)
        body, header_length = oip.encode_response(
            {
                "model_name": name,
                "model_version": VERSION,
                **({"id": parsed["id"]} if "id" in parsed else {}),
            },
            {k: outputs[k] for k in names},
            binary,
        )
        headers = {} if header_length is None else {oip.HEADER: str(header_length)}
        media = "application/json" if header_length is None else "application/octet-stream"
        return Response(body, media_type=media, headers=headers)

    return app


class Gate:
    """Counts responses by route and status, refuses `/v1` and `/v2` requests without
    the API key (when there is one), and answers an unexpected failure with a logged 500
    in the protocol's error shape; plain ASGI, so responses pass untouched.

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
        key = self.settings.api_key
        protected = path.startswith(("/v1", "/v2")) and not path.startswith("/v2/health")
        if key and protected:
            given = dict(scope["headers"]).get(b"authorization", b"")
            if given != f"Bearer {key}".encode():
                self.metrics.requests.labels("auth", "401").inc()
                error = RequestError(401, "A valid API key is needed.")
                return await _error(path, error)(scope, receive, send)
        status = []

        async def send_and_count(message):
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_and_count)
        except Exception as error:
            log.exception("request failed")
            if status:  # the response has begun: only closing the connection ends it
                raise
            error = RequestError(500, f"Internal error: {error}")
            await _error(path, error)(scope, receive, send_and_count)
        finally:
            route = getattr(scope.get("route"), "path", "other")
            self.metrics.requests.labels(route, str(status[0] if status else 500)).inc()


# --- helpers -------------------------------------------------------------------------------
def _dumps(data: dict) -> bytes:
    """JSON of plain data and numpy arrays (float32 numbers in their shortest form, as
    OpenAI writes them), by orjson: an embedding's 384 floats took 0.18 ms with `json`,
    7 us with orjson."""
    return orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY)


def _json(data: dict) -> Response:
    """A JSON response (`_dumps`), without FastAPI's per-value encoder."""
    return Response(_dumps(data), media_type="application/json")


def _error(path: str, error: RequestError) -> JSONResponse:
    if path.startswith("/v2"):
        body = {"error": error.message}
    else:
        body = error_body(error.status, error.message, error.param)
    return JSONResponse(body, error.status, headers=error.headers)


async def _body(request: Request, settings: ServerSettings) -> bytes:
    """The request's body, refused with 413 past `max_body_bytes` (before reading it when
    the client says its length), decoded when it is compressed (`Content-Encoding: gzip`
    or `deflate`, as tritonclient's `request_compression_algorithm` sends it): the limit
    holds for the decoded body too, so that a small body cannot unpack into a huge one.
    Another encoding is refused with 415."""
    limit = settings.max_body_bytes
    encoding = request.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ENCODINGS:
        raise RequestError(
            415, f"Content-Encoding {encoding!r} is not supported: send {', '.join(ENCODINGS)}."
        )
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise RequestError(413, f"The body is {declared} bytes; the most is {limit}.")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise RequestError(413, f"The body is over {limit} bytes.")
        chunks.append(chunk)
    body = b"".join(chunks)
    if encoding == "identity":
        return body
    decoder = zlib.decompressobj(zlib.MAX_WBITS | 32)  # a gzip or a zlib header, either
    try:
        decoded = decoder.decompress(body, limit + 1)
    except zlib.error as error:
        raise RequestError(400, f"The body is not valid {encoding} data: {error}") from None
    if len(decoded) > limit:
        raise RequestError(413, f"The body decodes to over {limit} bytes.")
    if not decoder.eof:
        raise RequestError(400, f"The {encoding} body is cut short.")
    return decoded


async def _parse(request: Request, model: type[BaseModel], settings: ServerSettings):
    raw = await _body(request, settings)
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise RequestError(400, f"The body is not valid JSON: {error}") from None
    try:
        return model.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or None
        message = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            message = f"Unknown field `{where}`."
        raise RequestError(
            422, f"{message}" + (f" (at `{where}`)" if where else ""), where
        ) from None


def _ready(registry: ModelRegistry) -> ModelRegistry:
    if registry.error is not None:
        raise RequestError(503, f"The models failed to load: {registry.error}")
    if not registry.ready.is_set():
        raise RequestError(503, "The models are still loading.", headers={"Retry-After": "1"})
    return registry


def _model(registry: ModelRegistry, name: str, what: str | None = None, families=()):
    entries = _ready(registry).entries
    if name not in entries:
        raise RequestError(
            404, f"No model {name!r}; this server has {', '.join(entries)}.", "model"
        )
    entry = entries[name]
    if families and entry.family not in families:
        raise RequestError(
            400,
            f"Model {name!r} is {entry.family}; `{what}` needs {' or '.join(families)}.",
            "model",
        )
    return entry


def _v2_model(registry: ModelRegistry, name: str, request: Request):
    """`_model` for a v2 route, whose path may name the version: each model has one."""
    entry = _model(registry, name)
    version = request.path_params.get("version", VERSION)
    if version != VERSION:
        raise RequestError(404, f"Model {name!r} has no version {version!r}; it has {VERSION!r}.")
    return entry


def _queue(submit, *args):
    """`submit(*args)` on a model's worker, its refusals as the server's answers: a full
    queue 429 (retry in a second), a request past `MAX_REQUEST` 400, shutting down 503."""
    try:
        return submit(*args)
    except QueueFull as error:
        raise RequestError(429, str(error), headers={"Retry-After": "1"}) from None
    except TooLarge as error:
        raise RequestError(400, str(error)) from None
    except Closed as error:
        raise RequestError(503, str(error)) from None


def _submit(generation: Generation) -> None:
    _queue(generation.submit)


async def _wait(request: Request, generation: Generation, choices: list[Choice]) -> None:
    """Until every row has ended; a client that has gone cancels its rows."""
    while generation.open:
        if await generation.next(choices, POLL) is None and await request.is_disconnected():
            generation.cancel()
            return


def _raise_failure(choices: list[Choice]) -> None:
    for choice in choices:
        if isinstance(choice.error, TimeoutError):
            raise RequestError(504, "The request took longer than the server's timeout.")
        if choice.error is not None:
            raise RequestError(500, f"Generation failed: {choice.error}")


def _usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def _stream(request, generation: Generation, choices, meta, body, usage_prompt, include_usage):
    """Server-sent events: a chunk per released piece of text, a last chunk per choice
    with its finish_reason, the usage chunk if asked, then `[DONE]`."""

    def event(data) -> str:
        return f"data: {_dumps(data).decode()}\n\n"

    def chunk(index, text, logprobs=None, finish=None) -> str:
        choice = {"index": index, "text": text, "logprobs": logprobs, "finish_reason": finish}
        return event({**meta, "choices": [choice], **({"usage": None} if include_usage else {})})

    async def events(ttft):
        logged = [0] * len(choices)  # tokens whose logprobs were sent, per choice
        started = [False] * len(choices)  # its first chunk (the echoed prompt) was sent
        try:
            while generation.open:
                got = await generation.next(choices, POLL)
                if got is None:
                    if await request.is_disconnected():
                        return
                    continue
                index, _ = got
                if generation.first_token_at is not None and ttft is not None:
                    ttft.observe(generation.first_token_at - generation.arrived)
                    ttft = None
                choice = choices[index]
                if choice.error is not None:
                    kind = 504 if isinstance(choice.error, TimeoutError) else 500
                    message = "The request timed out." if kind == 504 else str(choice.error)
                    generation.cancel()
                    yield event(error_body(kind, message))
                    yield "data: [DONE]\n\n"
                    return
                first = not started[index]
                text = (choice.prefix if first else "") + choice.delta()
                logprobs = choice.logprobs(body.logprobs, logged[index], with_prompt=first)
                if text or (logprobs and logprobs["tokens"]):
                    started[index] = True
                    logged[index] = len(choice.tokens)
                    yield chunk(index, text, logprobs)
                if choice.finish_reason is not None and not choice.closed:
                    choice.closed = True
                    reason = (
                        choice.finish_reason
                        if choice.finish_reason in ("stop", "length")
                        else "stop"
                    )
                    yield chunk(index, "", None, reason)
            if include_usage:
                tokens = sum(len(c.tokens) for c in choices)
                yield event({**meta, "choices": [], "usage": _usage(usage_prompt, tokens)})
            yield "data: [DONE]\n\n"
        except Exception as error:  # past the status line: the stream tells the client
            log.exception("streaming failed")
            yield event(error_body(500, f"Internal error: {error}"))
            yield "data: [DONE]\n\n"
        finally:
            generation.cancel()  # a client that went away frees its rows at the next step

    return events


async def _encoder_run(request, entry, kind: str, texts: list[str], settings) -> list | np.ndarray:
    future = _queue(entry.worker.submit, kind, texts)
    waiting = asyncio.wrap_future(future)
    deadline = time.monotonic() + settings.request_timeout
    while True:
        done, _ = await asyncio.wait({waiting}, timeout=POLL)
        if done:
            return waiting.result()
        if await request.is_disconnected():
            future.cancel()
            raise RequestError(499, "The client went away.")
        if time.monotonic() > deadline:
            future.cancel()
            raise RequestError(504, "The request took longer than the server's timeout.")


def _v2_outputs(entry) -> dict[str, tuple[str, list[int]]]:
    """The v2 outputs of a model: name -> (datatype, shape)."""
    if entry.family != "encoder-only":
        return {"text": ("BYTES", [-1]), "finish_reason": ("BYTES", [-1])}
    outputs = {"embedding": ("FP32", [-1, entry.served.dims.hidden_dim])}
    if entry.task == "classification":
        classes = len(entry.served.config.label_names)
        outputs = {"label": ("BYTES", [-1]), "probabilities": ("FP32", [-1, classes]), **outputs}
    return outputs


# The request parameters of the protocol and of tritonclient (`infer(sequence_id=...,
# priority=..., timeout=...)`): accepted by every model and ignored, since they order or
# route requests of stateful or prioritised models and these models are neither.
V2_STANDARD = (
    "sequence_id", "sequence_start", "sequence_end", "priority", "timeout", "headers",
    "binary_data_output",
)  # fmt: skip
V2_GENERATION = {"max_tokens": int, "temperature": float, "top_p": float, "top_k": int, "seed": int}


def _v2_parameters(entry, parameters) -> dict:
    """The generation parameters of a v2 request, checked: the standard ones are
    accepted everywhere, the generation ones by generative models, any other is refused
    (400), as is a value of the wrong type (an integer one takes integers only)."""
    if not isinstance(parameters, dict):
        raise RequestError(400, "`parameters` must be an object.")
    known = V2_GENERATION if entry.family != "encoder-only" else {}
    unknown = sorted(set(parameters) - set(known) - set(V2_STANDARD))
    if unknown:
        takes = ", ".join(known) or "none but the protocol's own"
        raise RequestError(
            400, f"Unknown parameter {unknown[0]!r}; model {entry.name!r} takes {takes}."
        )
    chosen = {key: parameters[key] for key in known if parameters.get(key) is not None}
    for key, value in chosen.items():
        kinds = (int,) if known[key] is int else (int, float)
        if isinstance(value, bool) or not isinstance(value, kinds):
            kind = "an integer" if known[key] is int else "a number"
            raise RequestError(400, f"{key} must be {kind}. Received: {value!r}")
    return chosen


async def _v2_run(request, entry, texts, names, parameters, settings) -> dict:
    served = entry.served
    parameters = _v2_parameters(entry, parameters)
    if entry.family == "encoder-only":
        outputs = {}
        if "embedding" in names:
            vectors, _ = await _encoder_run(request, entry, "embed", texts, settings)
            outputs["embedding"] = np.asarray(vectors, np.float32)
        if {"label", "probabilities"} & set(names):
            results = await _encoder_run(request, entry, "classify", texts, settings)
            labels = served.config.label_names
            outputs["label"] = [r["label"] for r in results]
            outputs["probabilities"] = np.asarray(
                [[r["probabilities"][label] for label in labels] for r in results], np.float32
            )
        return outputs
    default = 16 if served.family == "decoder-only" else served.default_new_tokens()
    max_tokens = parameters.get("max_tokens", default)
    if max_tokens < 1:
        raise RequestError(400, f"max_tokens must be a positive integer. Received: {max_tokens!r}")
    rows = prompt_rows(served, texts, "text")
    if served.family == "encoder-decoder":
        max_tokens = min(max_tokens, served.room(1))
    check_max_tokens(served, rows, max_tokens, settings.max_tokens)
    temperature = parameters.get("temperature", 0.0)  # v2 decodes greedily by default

    def make_strategy(j):
        get = parameters.get
        return strategy(temperature, get("top_p"), get("top_k"), get("seed"))

    make_strategy(0)
    generation = Generation(
        entry.worker, [row.ids for row in rows], max_tokens, make_strategy, 1, [], None,
        settings.request_timeout,
    )  # fmt: skip
    choices = [Choice(served, [], row.ids) for row in rows]
    _submit(generation)
    await _wait(request, generation, choices)
    _raise_failure(choices)
    return {
        "text": [c.text for c in choices],
        "finish_reason": [c.finish_reason or "stop" for c in choices],
    }
