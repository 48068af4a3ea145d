"""The request plumbing both protocols share: reading and parsing bodies, finding a
model, queueing work on its worker and waiting for it while the client is there."""

from __future__ import annotations

import asyncio
import time
import zlib

import numpy as np
import orjson
from fastapi import Request
from fastapi.responses import Response
from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect

from transformer_zoo.serving.http.completions import Choice, Generation, RequestError
from transformer_zoo.serving.http.models import ModelRegistry, ServerSettings
from transformer_zoo.serving.http.scheduler import MAX_REQUEST, Closed, QueueFull, TooLarge
from transformer_zoo.text.formats import is_blank

POLL = 0.25  # seconds between checks that a waiting client is still there
ENCODINGS = ("identity", "gzip", "deflate")  # request bodies' Content-Encoding
JSON, BINARY = "application/json", "application/octet-stream"  # request bodies' Content-Type
GZIP_MAGIC = b"\x1f\x8b"  # the first bytes of a gzip member (RFC 1952 §2.3.1)
FEED = 16384  # compressed bytes per call of the decoder (`decompress`)


def dumps(data: dict) -> bytes:
    """JSON of plain data and numpy arrays (float32 numbers in their shortest form, as
    OpenAI writes them), by orjson: an embedding's 384 floats took 0.18 ms with `json`,
    7 us with orjson."""
    return orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY)


def loads(raw: bytes):
    """A body's JSON, read as RFC 8259 defines it (orjson): `NaN`, `Infinity` and a lone
    surrogate escape (`"\\ud800"`, which no UTF-8 text holds and the tokenizers failed
    on, a 500), all of which Python's `json` takes, are malformed JSON. Raises
    `orjson.JSONDecodeError` (a `ValueError`)."""
    return orjson.loads(raw)


def json_response(data: dict) -> Response:
    """A JSON response (`_dumps`), without FastAPI's per-value encoder."""
    return Response(dumps(data), media_type="application/json")


def deadline(request: Request, settings: ServerSettings) -> float:
    """The `time.monotonic()` at which the request's `request_timeout` ends, counted from
    when its body began to be read (`read_body`): reading the body and the work share one
    limit, so that every request in flight when SIGTERM comes ends within it (`serve`
    bounds the graceful shutdown by it)."""
    if getattr(request.state, "deadline", None) is None:
        request.state.deadline = time.monotonic() + settings.request_timeout
    return request.state.deadline


def time_left(request: Request, settings: ServerSettings) -> float:
    """Seconds left before the request's `deadline`."""
    return deadline(request, settings) - time.monotonic()


def record_outcome(request: Request, status: int) -> None:
    """The status a response ended with when it is not the one it opened with (a stream
    opens with 200): `app.Gate` counts this one."""
    request.state.outcome = status


async def read_body(request: Request, settings: ServerSettings) -> bytes:
    """The request's body, refused with 413 past `max_body_bytes` (before reading it when
    the client says its length), decoded when it is compressed (`Content-Encoding: gzip`
    or `deflate`, as tritonclient's `request_compression_algorithm` sends it;
    `content_coding`): the limit holds for the decoded body too, so that a small body
    cannot unpack into a huge one. A body not received within the request's timeout
    (`time_left`) is 408, and the connection closes: a client that sent part of one and
    stalled held its connection (and the shutdown) for as long as it stayed. A client that
    goes away meanwhile is 499, as one that leaves a running request."""
    limit = settings.max_body_bytes
    encoding = content_coding(request)
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise RequestError(413, f"The body is {declared} bytes; the most is {limit}.")

    async def read() -> list[bytes]:
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise RequestError(413, f"The body is over {limit} bytes.")
            chunks.append(chunk)
        return chunks

    try:
        chunks = await asyncio.wait_for(read(), time_left(request, settings))
    except TimeoutError:
        raise RequestError(
            408,
            f"The body did not arrive within the server's timeout of "
            f"{settings.request_timeout:g} s.",
            headers={"Connection": "close"},  # the rest of the body may never come
        ) from None
    except ClientDisconnect:
        raise RequestError(499, "The client went away.") from None
    body = b"".join(chunks)
    return body if encoding == "identity" else decompress(body, encoding, limit)


def content_coding(request: Request) -> str:
    """The one compression of the body, read from every Content-Encoding header (RFC
    9110 §5.3: two headers are one list, `identity, gzip`): `identity` (none), `gzip` or
    `deflate`. Another coding, or two stacked, is refused with 415: no client stacks
    them, and each would be decoded up to the body limit again."""
    codings = [
        coding.strip().lower()
        for header in request.headers.getlist("content-encoding")
        for coding in header.split(",")
    ]
    applied = [coding for coding in codings if coding not in ("", "identity")]
    unknown = [coding for coding in applied if coding not in ENCODINGS]
    if unknown or len(applied) > 1:
        given = unknown[0] if unknown else ", ".join(applied)
        raise RequestError(
            415, f"Content-Encoding {given!r} is not supported: send one of {', '.join(ENCODINGS)}."
        )
    return applied[0] if applied else "identity"


def decompress(body: bytes, encoding: str, limit: int) -> bytes:
    """`body` decoded from `gzip` or `deflate` (zlib's format, as HTTP's `deflate` is):
    400 for a body that is not such data, is cut short or has bytes after its end, 413
    past `limit` bytes decoded. A gzip body may be several members one after another, as
    RFC 1952 §2.2 allows (`cat a.gz b.gz`); they decode to their data joined, as gunzip
    reads them. The body is fed in `FEED`-byte pieces, so that the bytes after each
    member (`unused_data`, a copy) are few: a 1 MiB body of 50,000 empty members took
    1.2 s in `gzip.decompress`, which copies the rest after each, and 45 ms here."""
    view, offset, decoded, size = memoryview(body), 0, [], 0
    decoder = zlib.decompressobj(zlib.MAX_WBITS | 32)  # a gzip or a zlib header, either
    while offset < len(body):
        piece = view[offset : offset + FEED]
        offset += len(piece)
        try:
            decoded.append(decoder.decompress(piece, limit + 1 - size))
        except zlib.error as error:
            raise RequestError(400, f"The body is not valid {encoding} data: {error}") from None
        size += len(decoded[-1])
        if size > limit:  # else the piece was read whole
            raise RequestError(413, f"The body decodes to over {limit} bytes.")
        if decoder.eof:
            offset -= len(decoder.unused_data)
            if offset == len(body):
                break
            if encoding != "gzip" or not body.startswith(GZIP_MAGIC, offset):
                raise RequestError(
                    400,
                    f"The {encoding} body has {len(body) - offset} bytes after the end of "
                    "its data.",
                )
            decoder = zlib.decompressobj(zlib.MAX_WBITS | 32)  # the next member
    if not decoder.eof:
        raise RequestError(400, f"The {encoding} body is cut short.")
    return b"".join(decoded)


def check_content_type(request: Request, *accepted: str) -> None:
    """Refuses (415) a body whose Content-Type is none of `accepted` (a `+json` type
    counts as `JSON`; none is taken for what the route reads), as FastAPI's own JSON
    bodies do: a browser sends `text/plain`, form and multipart bodies cross-origin
    without asking first (the Fetch standard's CORS-safelisted types, no preflight), so
    reading those let any web page start generations on a server without a key."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind and kind not in accepted and not (JSON in accepted and kind.endswith("+json")):
        raise RequestError(
            415, f"Content-Type {kind!r} is not accepted here: send {' or '.join(accepted)}."
        )


async def parse_body(request: Request, model: type[BaseModel], settings: ServerSettings):
    """The body as `model`: 415 for another Content-Type, 400 for malformed JSON, 422 for
    a body the model refuses, naming the field at fault (a validator's `ValueError` may
    name it as its `param`, where the check spans fields)."""
    check_content_type(request, JSON)
    raw = await read_body(request, settings)
    try:
        data = loads(raw)
    except orjson.JSONDecodeError as error:
        raise RequestError(400, f"The body is not valid JSON: {error}") from None
    try:
        return model.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        cause = (first.get("ctx") or {}).get("error")
        where = ".".join(str(part) for part in first["loc"]) or getattr(cause, "param", None)
        message = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            message = f"Unknown field `{where}`."
        raise RequestError(
            422, f"{message}" + (f" (at `{where}`)" if where else ""), where
        ) from None


def loaded(registry: ModelRegistry) -> ModelRegistry:
    if registry.error is not None:
        raise RequestError(503, f"The models failed to load: {registry.error}")
    if not registry.ready.is_set():
        raise RequestError(503, "The models are still loading.", headers={"Retry-After": "1"})
    return registry


def find_model(registry: ModelRegistry, name: str, what: str | None = None, families=()):
    entries = loaded(registry).entries
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


def queue_on(enqueue, *args):
    """`enqueue(*args)` on a model's worker, its refusals as the server's answers: a full
    queue 429 (retry in a second), a request past `MAX_REQUEST` 400, shutting down 503."""
    try:
        return enqueue(*args)
    except QueueFull as error:
        raise RequestError(429, str(error), headers={"Retry-After": "1"}) from None
    except TooLarge as error:
        raise RequestError(400, str(error)) from None
    except Closed as error:
        raise RequestError(503, str(error)) from None


def submit(generation: Generation) -> None:
    queue_on(generation.submit)


def check_count(count: int, unit: str, param: str | None = None) -> None:
    """Refuses a request of more than `MAX_REQUEST` sequences or texts (400) by their
    count, before any is tokenized: 200,000 one-character prompts fit in a 1 MB body, and
    tokenizing them held the event loop for 10 s before the scheduler refused them."""
    if count > MAX_REQUEST:
        raise RequestError(
            400, f"The request has {count} {unit}; the most is {MAX_REQUEST}.", param
        )


def check_texts(texts: list[str], name: str) -> None:
    """Refuses (400, naming `name`) no texts, or a blank one (`is_blank`: only whitespace,
    zero-width and control characters, which tokenize to nothing; the data loader's
    rule), named by its index: an encoder-only model would read such a text as nothing
    at all, and OpenAI refuses an empty one."""
    if not texts:
        raise RequestError(400, f"`{name}` holds no text.", name)
    for index, text in enumerate(texts):
        if is_blank(text):
            raise RequestError(
                400,
                f"{name}[{index}] is empty or blank (only whitespace, zero-width or "
                "control characters): send some text.",
                name,
            )


async def wait_for(request: Request, generation: Generation, choices: list[Choice]) -> None:
    """Until every row has ended. Whether the client is still there is asked every `POLL`
    seconds, however often tokens arrive (a running row emits one every step, so the
    queue is never quiet for long): a client that has gone cancels the rows, and the
    request ends as 499."""
    asked = time.monotonic()
    try:
        while generation.open:
            await generation.next(choices, POLL)
            if time.monotonic() - asked < POLL:
                continue
            asked = time.monotonic()
            if await request.is_disconnected():
                generation.cancel()
                raise RequestError(499, "The client went away.")
    except asyncio.CancelledError:  # a shutdown past its bound (`serve`) frees the rows
        generation.cancel()
        raise


def raise_failure(choices: list[Choice]) -> None:
    for choice in choices:
        if isinstance(choice.error, TimeoutError):
            raise RequestError(504, "The request took longer than the server's timeout.")
        if choice.error is not None:
            raise RequestError(500, f"Generation failed: {choice.error}")


async def encoder_run(
    request, entry, kind: str, texts: list[str], settings, pairs: list[str] | None = None
) -> list | np.ndarray:
    """`kind` ("embed" or "classify") of `texts` (and their second texts `pairs`, for
    "classify") on the model's `EncoderBatcher`, while the client is there."""
    future = queue_on(entry.worker.submit, kind, texts, pairs)
    waiting = asyncio.wrap_future(future)
    ends = deadline(request, settings)
    while True:
        done, _ = await asyncio.wait({waiting}, timeout=POLL)
        if done:
            return waiting.result()
        if await request.is_disconnected():
            future.cancel()
            raise RequestError(499, "The client went away.")
        if time.monotonic() > ends:
            future.cancel()
            raise RequestError(504, "The request took longer than the server's timeout.")
