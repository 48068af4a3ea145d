"""The Open Inference Protocol v2 (KServe, Triton; `tritonclient.http`): server and model
metadata, health, and `infer` with JSON or binary tensors; each model's routes also under
`/versions/1/`."""

from __future__ import annotations

import numpy as np
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.convertors import Convertor, register_url_convertor

from transformer_zoo import __version__
from transformer_zoo.errors import count
from transformer_zoo.serving.http import inference_protocol as oip
from transformer_zoo.serving.http.completions import (
    DEFAULT_MAX_TOKENS,
    INT64,
    Choice,
    Generation,
    RequestError,
    new_tokens,
    prompt_rows,
    strategy,
)
from transformer_zoo.serving.http.handling import (
    BINARY,
    JSON,
    check_content_type,
    check_count,
    check_texts,
    encoder_run,
    find_model,
    raise_failure,
    read_body,
    submit,
    time_left,
    wait_for,
)
from transformer_zoo.serving.http.metrics import Metrics
from transformer_zoo.serving.http.models import ROUTE_WORDS, ModelRegistry, ServerSettings

VERSION = "1"  # a v2 model's one version


class ModelName(Convertor):
    """A model's name in a /v2 path: parts between slashes (`org/model`, as vLLM's names
    have), none but the first of them one of the routes' own words (`ROUTE_WORDS`, which
    `model_names` refuses there). So a path matches one route only, in whatever order
    they were added: with `{name:path}`, `GET .../infer` read as the metadata of a model
    `NAME/infer` (404, not 405), and `PUT .../versions/1/infer` was 405 with the
    metadata route's `Allow: GET`."""

    regex = "[^/]+(?:/(?!(?:{})(?:/|$))[^/]+)*".format("|".join(ROUTE_WORDS))

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("model", ModelName())


def add_inference_routes(
    app: FastAPI, registry: ModelRegistry, settings: ServerSettings, metrics: Metrics
) -> None:
    """Adds the `/v2` routes over `registry`'s models."""

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

    @app.get("/v2/models/{name:model}/ready")
    @app.get("/v2/models/{name:model}/versions/{version}/ready")
    async def model_ready(name: str, request: Request):
        _v2_model(registry, name, request)
        return {"name": name, "ready": True}

    @app.get("/v2/models/{name:model}")
    @app.get("/v2/models/{name:model}/versions/{version}")
    async def model_metadata(name: str, request: Request):
        entry = _v2_model(registry, name, request)
        return {
            "name": name,
            "versions": [VERSION],
            "platform": "onnxruntime_onnx",
            "inputs": [
                {"name": input_name, "datatype": "BYTES", "shape": [-1]}
                for input_name in _v2_inputs(entry)
            ],
            "outputs": [
                {"name": output, "datatype": datatype, "shape": shape}
                for output, (datatype, shape) in _v2_outputs(entry).items()
            ],
        }

    @app.post("/v2/models/{name:model}/infer")
    @app.post("/v2/models/{name:model}/versions/{version}/infer")
    async def infer(name: str, request: Request):
        # JSON, or JSON and binary tensors (tritonclient's C++ client and perf_analyzer
        # send `application/octet-stream` for both; the Python one sends none)
        check_content_type(request, JSON, BINARY)
        raw = await read_body(request, settings)
        try:
            parsed, tensors = oip.parse_request(raw, request.headers.get(oip.HEADER))
            entry = _v2_model(registry, name, request)
        except oip.ProtocolError as error:
            raise RequestError(400, str(error)) from None
        texts, pairs = _v2_texts(entry, parsed, tensors)
        try:  # a pair's outputs: `ServedModel.embed` embeds single texts only
            available = [o for o in _v2_outputs(entry) if pairs is None or o != "embedding"]
            names, binary = oip.binary_outputs(parsed, available)
        except oip.ProtocolError as error:
            raise RequestError(400, str(error)) from None
        parameters = parsed.get("parameters") or {}
        outputs = await _v2_run(request, entry, texts, pairs, names, parameters, settings, metrics)
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


def _v2_model(registry: ModelRegistry, name: str, request: Request):
    """`_model` for a v2 route, whose path may name the version: each model has one."""
    entry = find_model(registry, name)
    version = request.path_params.get("version", VERSION)
    if version != VERSION:
        raise RequestError(404, f"Model {name!r} has no version {version!r}; it has {VERSION!r}.")
    return entry


def _v2_inputs(entry) -> list[str]:
    """The v2 inputs of a model, each a BYTES tensor of shape [N]: `text`, and for a
    classifier that may read text pairs each pair's second text, `text_pair` (needed
    where the run was trained on pairs, optional where its config does not say:
    `ServedModel.reads_pairs`)."""
    return ["text"] if entry.reads_pairs is False else ["text", "text_pair"]


def _v2_texts(entry, parsed: dict, tensors: dict) -> tuple[list[str], list[str] | None]:
    """`(texts, second texts or None)` of an infer request, as the model's inputs
    (`_v2_inputs`) take them: each 1-D BYTES (the metadata's [-1], as Triton checks),
    one second text per text, and for an encoder-only model none blank (`check_texts`)."""
    inputs = _v2_inputs(entry)
    needed = set(inputs) if entry.reads_pairs else {"text"}
    if not needed <= set(tensors) <= set(inputs):
        if entry.reads_pairs:
            raise RequestError(
                400,
                f"Model {entry.name!r} reads text pairs: send the first texts as the BYTES "
                f"input `text` and the second ones as `text_pair` (shape [N] each); got "
                f"{sorted(tensors)}.",
            )
        if entry.reads_pairs is None:
            raise RequestError(
                400,
                "The model takes the BYTES input `text`, and for text pairs `text_pair`; got "
                f"{sorted(tensors)}.",
            )
        raise RequestError(400, f"The model takes one BYTES input, `text`; got {sorted(tensors)}.")
    present, columns = [n for n in inputs if n in tensors], []
    for name in present:
        column = tensors[name]
        if not isinstance(column, list):
            raise RequestError(400, f"The input `{name}` must be BYTES (strings).")
        shape = next(i["shape"] for i in parsed["inputs"] if i["name"] == name)
        if len(shape) != 1:
            raise RequestError(400, f"The input `{name}` has shape {shape}; it takes [N] texts.")
        columns.append(column)
    texts, pairs = columns[0], (columns[1] if len(columns) > 1 else None)
    if pairs is not None and len(pairs) != len(texts):
        raise RequestError(
            400,
            f"The input `text_pair` has {count(len(pairs), 'text')} for the {len(texts)} of "
            "`text`; it takes one per text.",
        )
    check_count(len(texts), "texts" if entry.family == "encoder-only" else "sequences")
    if entry.family == "encoder-only":
        for name, column in zip(present, columns, strict=True):
            check_texts(column, name)
    elif not texts:
        raise RequestError(400, "The input `text` holds no text.")
    return texts, pairs


def _v2_outputs(entry) -> dict[str, tuple[str, list[int]]]:
    """The v2 outputs of a model: name -> (datatype, shape). A classifier of text pairs
    gives each pair's `label` and `probabilities`; `ServedModel.embed` embeds single
    texts (`/v1/embeddings` does), not pairs, so it gives no `embedding` here (nor for
    a request with `text_pair`)."""
    if entry.family != "encoder-only":
        return {"text": ("BYTES", [-1]), "finish_reason": ("BYTES", [-1])}
    outputs = {}
    if entry.reads_pairs is not True:
        outputs["embedding"] = ("FP32", [-1, entry.served.dims.hidden_dim])
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
    seed = chosen.get("seed")
    if seed is not None and not -INT64 <= seed < INT64:
        raise RequestError(400, f"seed must be an int64, as OpenAI's. Received: {seed!r}")
    return chosen


async def _v2_run(request, entry, texts, pairs, names, parameters, settings, metrics) -> dict:
    served = entry.served
    parameters = _v2_parameters(entry, parameters)
    if entry.family == "encoder-only":
        outputs = {}
        if "embedding" in names:
            vectors, _ = await encoder_run(request, entry, "embed", texts, settings)
            outputs["embedding"] = np.asarray(vectors, np.float32)
        if {"label", "probabilities"} & set(names):
            results = await encoder_run(request, entry, "classify", texts, settings, pairs)
            labels = served.config.label_names
            outputs["label"] = [r["label"] for r in results]
            outputs["probabilities"] = np.asarray(
                [[r["probabilities"][label] for label in labels] for r in results], np.float32
            )
        return outputs
    sent = parameters.get("max_tokens")
    if sent is not None and sent < 1:
        raise RequestError(400, f"max_tokens must be a positive integer. Received: {sent!r}")
    rows = prompt_rows(served, texts, "text")
    # A translation's default is its training target budget (`default_new_tokens`).
    default = DEFAULT_MAX_TOKENS if served.family == "decoder-only" else served.default_new_tokens()
    budgets = new_tokens(served, rows, sent, default, settings.max_tokens)
    temperature = parameters.get("temperature", 0.0)  # v2 decodes greedily by default

    def make_strategy(j):
        get = parameters.get
        return strategy(temperature, get("top_p"), get("top_k"), get("seed"))

    make_strategy(0)
    generation = Generation(
        entry.worker, [row.ids for row in rows], budgets, make_strategy, 1, [], None,
        time_left(request, settings),
    )  # fmt: skip
    choices = [Choice(served, [], row.ids) for row in rows]
    submit(generation)
    await wait_for(request, generation, choices)
    if generation.time_to_first_token is not None:
        metrics.time_to_first_token.labels(entry.name).observe(generation.time_to_first_token)
    raise_failure(choices)
    return {
        "text": [c.text for c in choices],
        "finish_reason": [c.finish_reason or "stop" for c in choices],
    }
