"""OpenAI's `/v1` API: `GET /v1/models`, `POST /v1/completions` (streamed as server-sent
events, or whole) and `POST /v1/embeddings`."""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import uuid

from fastapi import FastAPI, Request
from fastapi.responses import Response, StreamingResponse

from transformer_zoo.serving.http.completions import (
    DEFAULT_MAX_TOKENS,
    Choice,
    Echo,
    Generation,
    RequestError,
    check_echoed,
    new_tokens,
    prompt_count,
    prompt_rows,
    strategy,
)
from transformer_zoo.serving.http.generation_row import Prompt
from transformer_zoo.serving.http.handling import (
    POLL,
    check_count,
    check_texts,
    dumps,
    encoder_run,
    find_model,
    json_response,
    loaded,
    parse_body,
    raise_failure,
    record_outcome,
    submit,
    time_left,
    wait_for,
)
from transformer_zoo.serving.http.metrics import Metrics
from transformer_zoo.serving.http.models import ModelRegistry, ServerSettings
from transformer_zoo.serving.http.openai_protocol import (
    CompletionRequest,
    EmbeddingRequest,
    error_body,
)

log = logging.getLogger(__name__)


def add_openai_routes(
    app: FastAPI, registry: ModelRegistry, settings: ServerSettings, metrics: Metrics
) -> None:
    """Adds the `/v1` routes over `registry`'s models."""

    def model_object(name: str, created: int) -> dict:
        return {"id": name, "object": "model", "created": created, "owned_by": "transformer-zoo"}

    @app.get("/v1/models")
    async def list_models():
        created = int(time.time())
        return {
            "object": "list",
            "data": [model_object(name, created) for name in loaded(registry).entries],
        }

    @app.get("/v1/models/{name:path}")  # the client's `models.retrieve(name)`
    async def retrieve_model(name: str):
        if not name:  # `/v1/models/`: the list, as without the slash
            return await list_models()
        return model_object(find_model(registry, name).name, int(time.time()))

    @app.post("/v1/completions")
    async def completions(request: Request):
        body = await parse_body(request, CompletionRequest, settings)
        entry = find_model(registry, body.model, "generate", ("decoder-only", "encoder-decoder"))
        served = entry.served
        check_count(prompt_count(body.prompt) * body.n, "sequences", "prompt")
        rows = prompt_rows(served, body.prompt)
        budgets = new_tokens(served, rows, body.max_tokens, DEFAULT_MAX_TOKENS, settings.max_tokens)
        if body.echo and served.family != "decoder-only":
            raise RequestError(400, "`echo` needs a decoder-only model.", "echo")
        strategy(body.temperature, body.top_p, body.top_k, body.seed)  # checked now

        def make_strategy(j):
            seed = None if body.seed is None else body.seed + j
            return strategy(body.temperature, body.top_p, body.top_k, seed)

        scored = body.echo and body.logprobs is not None
        if scored:
            check_echoed(rows, body.n)
        generation = Generation(
            entry.worker, [row.ids for row in rows], budgets, make_strategy, body.n,
            body.stop, body.logprobs, time_left(request, settings), prompt_logprobs=scored,
        )  # fmt: skip
        tokenizer = served.target_tokenizer
        echoes = [Echo(tokenizer, row, scored) if body.echo else None for row in rows]
        choices = [
            Choice(served, body.stop, row.ids, echo)
            for row, echo in zip(rows, echoes, strict=True)
            for _ in range(body.n)
        ]
        submit(generation)
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
        await wait_for(request, generation, choices)
        if generation.time_to_first_token is not None:
            ttft.observe(generation.time_to_first_token)
        raise_failure(choices)

        def answer() -> bytes:  # on a worker thread: echoed prompts and logprobs take long
            for echo in {id(c.echo): c.echo for c in choices if c.echo is not None}.values():
                echo.work_out(generation.deadline)
            completion_tokens = sum(len(c.tokens) for c in choices)
            return dumps(
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

        try:
            return Response(await asyncio.to_thread(answer), media_type="application/json")
        except TimeoutError:
            raise RequestError(504, "The request took longer than the server's timeout.") from None

    @app.post("/v1/embeddings")
    async def embeddings(request: Request):
        body = await parse_body(request, EmbeddingRequest, settings)
        entry = find_model(registry, body.model, "embed", ("encoder-only",))
        width = entry.served.dims.hidden_dim
        if body.dimensions not in (None, width):
            raise RequestError(
                400,
                f"Model {body.model!r} gives {width} dimensions; `dimensions` (shortening "
                "the embeddings) is not implemented.",
                "dimensions",
            )
        texts = [body.input] if isinstance(body.input, str) else body.input
        check_count(len(texts), "texts", "input")
        check_texts(texts, "input")
        vectors, counts = await encoder_run(request, entry, "embed", texts, settings)
        data = []
        for i, vector in enumerate(vectors):
            if body.encoding_format == "base64":
                embedding = base64.b64encode(vector.astype("<f4").tobytes()).decode()
            else:
                embedding = vector  # float32 numbers, written by orjson (`_json`)
            data.append({"object": "embedding", "index": i, "embedding": embedding})
        tokens = sum(counts)
        return json_response(
            {
                "object": "list",
                "data": data,
                "model": body.model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )


def _usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def _stream(request, generation: Generation, choices, meta, body, usage_prompt, include_usage):
    """Server-sent events: a chunk per released piece of text, a last chunk per choice
    with its finish_reason, the usage chunk if asked, then `[DONE]`. The stream's outcome
    is recorded for `/metrics` (`record_outcome`): 200 once `[DONE]` has gone out, 504 or
    500 after an error event, and 499 when the client left before the end."""

    # 499 until the stream has ended otherwise: also when the client leaves before its
    # first event is asked for (then the events below never run).
    record_outcome(request, 499)

    def event(data) -> str:
        return f"data: {dumps(data).decode()}\n\n"

    def chunk(index, text, logprobs=None, finish=None) -> str:
        choice = {"index": index, "text": text, "logprobs": logprobs, "finish_reason": finish}
        return event({**meta, "choices": [choice], **({"usage": None} if include_usage else {})})

    async def events(ttft):
        logged = [0] * len(choices)  # `logprobs` entries sent, per choice
        started = [False] * len(choices)  # its first chunk (the echoed prompt) was sent
        try:
            while generation.open:
                got = await generation.next(choices, POLL)
                if got is None:
                    if await request.is_disconnected():
                        return
                    continue
                index, got_event = got
                if generation.time_to_first_token is not None and ttft is not None:
                    ttft.observe(generation.time_to_first_token)
                    ttft = None
                choice = choices[index]
                if choice.error is not None:
                    kind = 504 if isinstance(choice.error, TimeoutError) else 500
                    message = "The request timed out." if kind == 504 else str(choice.error)
                    generation.cancel()
                    yield event(error_body(kind, message))
                    yield "data: [DONE]\n\n"
                    record_outcome(request, kind)
                    return
                indices = [index]
                if isinstance(got_event, Prompt):  # with the prompt's first row: the
                    # prompt's `n` choices (rows in order) waited for it (`ready`).
                    indices = range(index, index + body.n)
                for k in indices:
                    choice = choices[k]
                    if not choice.ready:
                        continue
                    first = not started[k]
                    if first and choice.echo is not None and not choice.echo.done:
                        await asyncio.to_thread(choice.echo.work_out, generation.deadline)
                    text = (choice.prefix if first else "") + choice.delta()
                    # entries (the echoed prompt's, then the generated tokens') logged
                    upto = choice.loggable() if body.logprobs is not None else 0
                    logprobs = choice.logprobs(body.logprobs, logged[k], upto)
                    if text or (logprobs and logprobs["tokens"]):
                        started[k] = True
                        logged[k] = upto
                        yield chunk(k, text, logprobs)
                    if choice.finish_reason is not None and not choice.closed:
                        choice.closed = True
                        reason = (
                            choice.finish_reason
                            if choice.finish_reason in ("stop", "length")
                            else "stop"
                        )
                        yield chunk(k, "", None, reason)
            if include_usage:
                tokens = sum(len(c.tokens) for c in choices)
                yield event({**meta, "choices": [], "usage": _usage(usage_prompt, tokens)})
            yield "data: [DONE]\n\n"
            record_outcome(request, 200)
        except TimeoutError:  # an echoed prompt past the deadline (`Echo.work_out`)
            yield event(error_body(504, "The request timed out."))
            yield "data: [DONE]\n\n"
            record_outcome(request, 504)
        except Exception as error:  # past the status line: the stream tells the client
            log.exception("streaming failed")
            yield event(error_body(500, f"Internal error: {error}"))
            yield "data: [DONE]\n\n"
            record_outcome(request, 500)
        finally:
            generation.cancel()  # a client that went away frees its rows at the next step

    return events
