"""The OpenAI API's requests as pydantic models, and its error shape.

Fields follow OpenAI's `/v1/completions` and `/v1/embeddings` (with vLLM's `top_k`).
Unknown fields are refused rather than ignored, and fields of the API that this server
does not implement are accepted only at their neutral values, so that no request is
silently answered as if it had asked for something else. Types are strict (`STRICT`): a
string, a bool or a float where the API takes an integer (`"3"`, `true`, `3.0`) is
refused rather than read as one; a number field takes an integer (JSON's `1` for 1.0).
"""

from __future__ import annotations

from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from transformer_zoo.serving.http.completions import INT64, prompt_count
from transformer_zoo.serving.http.handling import check_count
from transformer_zoo.serving.stops import MAX_STOPS  # shared with ServedModel's `stop`

# pydantic's lax mode read `"max_tokens": "3"` as 3, `true` as 1 and `"echo": "yes"` as
# true; strict mode takes JSON's own types (an int for a float too).
STRICT = ConfigDict(extra="forbid", strict=True)

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    408: "timeout",
    413: "invalid_request_error",
    415: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    500: "internal_error",
    503: "service_unavailable",
    504: "timeout",
}


def error_body(status: int, message: str, param: str | None = None) -> dict:
    """`{"error": {"message", "type", "param", "code"}}`, as OpenAI and vLLM answer."""
    return {
        "error": {
            "message": message,
            "type": ERROR_TYPES.get(status, "invalid_request_error"),
            "param": param,
            "code": status,
        }
    }


class FieldError(ValueError):
    """A refusal of a check that spans fields (a model validator, which pydantic places
    at no field), naming the field at fault as `param` for the error's `param`."""

    def __init__(self, message: str, param: str):
        super().__init__(message)
        self.param = param


def _is_id(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _one_of(value, name: str, kinds: str, *fits) -> object:
    """`value` when one of `fits` holds, else a refusal naming the shapes it may take, so
    that a union field is refused at its own name (pydantic's error names one of the
    union's members, as `prompt.str`)."""
    if any(fit(value) for fit in fits):
        return value
    raise ValueError(f"`{name}` must be {kinds}")


def _none(value) -> bool:
    return value is None


def _text(value) -> bool:
    return isinstance(value, str)


def _texts(value) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _ids(value) -> bool:
    return isinstance(value, list) and all(_is_id(v) for v in value)


def _id_lists(value) -> bool:
    return isinstance(value, list) and all(_ids(v) for v in value)


class StreamOptions(BaseModel):
    model_config = STRICT
    include_usage: bool = False


class CompletionRequest(BaseModel):
    """`POST /v1/completions`. `temperature` 0 is greedy search (as in vLLM); the default
    1 samples, as OpenAI's API does. `max_tokens` 0 scores the prompt alone, with `echo`
    (as lm-evaluation-harness asks vLLM); None is the server's default (16, cut to what
    the server and the context allow: `completions.new_tokens`). `null` reads as the
    default where OpenAI's spec lets a field be null."""

    model_config = STRICT

    model: str
    prompt: str | list[str] | list[int] | list[list[int]]
    max_tokens: int | None = Field(None, ge=0)
    temperature: float | None = Field(1.0, ge=0.0)
    top_p: float | None = Field(1.0, gt=0.0, le=1.0)
    top_k: int | None = Field(None, ge=-1)
    seed: int | None = Field(None, ge=-INT64, lt=INT64)
    n: int = Field(1, ge=1, le=16)
    stop: str | list[str] | None = Field(None, validate_default=True)
    logprobs: int | None = Field(None, ge=0, le=5)
    echo: bool = False
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = None
    # Part of the API, not implemented: accepted only at their neutral values.
    best_of: int | None = None
    presence_penalty: float | None = 0.0
    frequency_penalty: float | None = 0.0
    logit_bias: dict[str, float] | None = None
    suffix: str | None = None

    @field_validator("n", "echo", "stream", mode="before")
    @classmethod
    def _null_is_default(cls, value, info: ValidationInfo):
        return cls.model_fields[info.field_name].default if value is None else value

    @field_validator("prompt", mode="before")
    @classmethod
    def _prompt_shape(cls, prompt):
        # Counted first (400 past `MAX_REQUEST`, as the route counts prompts × n): checking
        # the shape of 260,000 one-id prompts, then pydantic's union, held the loop 2 s.
        if isinstance(prompt, list):
            check_count(prompt_count(prompt), "sequences", "prompt")
        kinds = "a string, a list of strings, a list of token ids or a list of such lists"
        return _one_of(prompt, "prompt", kinds, _text, _texts, _ids, _id_lists)

    @field_validator("stop", mode="before")
    @classmethod
    def _stop_shape(cls, stop):
        return _one_of(stop, "stop", "a string or a list of strings", _none, _text, _texts)

    @field_validator("stop")
    @classmethod
    def _stops(cls, stop):
        stops = [stop] if isinstance(stop, str) else list(stop or [])
        if len(stops) > MAX_STOPS or any(not s for s in stops):
            raise ValueError(f"`stop` takes up to {MAX_STOPS} non-empty strings")
        return stops

    @model_validator(mode="after")
    def _neutral(self):
        unsupported = {
            "best_of": self.best_of not in (None, self.n),
            "presence_penalty": bool(self.presence_penalty),
            "frequency_penalty": bool(self.frequency_penalty),
            "logit_bias": bool(self.logit_bias),
            "suffix": bool(self.suffix),
        }
        named = [name for name, used in unsupported.items() if used]
        if named:
            raise FieldError(f"this server does not implement {', '.join(named)}", named[0])
        if self.stream_options is not None and not self.stream:
            raise FieldError("`stream_options` needs `stream: true`", "stream_options")
        if self.max_tokens == 0 and not self.echo:
            raise FieldError(
                "max_tokens 0 (scoring the prompt alone) needs `echo: true`", "max_tokens"
            )
        return self


class EmbeddingRequest(BaseModel):
    """`POST /v1/embeddings`: mean-pooled, L2-normalised sentence embeddings."""

    model_config = STRICT

    model: str
    input: str | list[str]
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = None
    user: str | None = None

    @field_validator("input", mode="before")
    @classmethod
    def _text_only(cls, value):
        items = value if isinstance(value, list) else [value]
        if any(isinstance(i, (int, list)) and not isinstance(i, bool) for i in items):
            raise ValueError(
                "token ids are not supported for embeddings: send text (a string or a list "
                "of strings)"
            )
        return _one_of(value, "input", "a string or a list of strings", _text, _texts)

    @field_validator("dimensions")
    @classmethod
    def _positive(cls, dimensions):
        if dimensions is not None and dimensions < 1:
            raise ValueError("`dimensions` must be a positive integer")
        return dimensions
