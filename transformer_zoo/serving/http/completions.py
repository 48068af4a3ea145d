"""From a completion request to generated text: the rows a request becomes, their text
as tokens arrive (stop strings, held-back partial characters), logprobs and usage. Shared
by the OpenAI and the Open Inference Protocol routes."""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field
from typing import NamedTuple

from transformer_zoo.errors import InputError
from transformer_zoo.generation.engine import check_fits
from transformer_zoo.generation.engine import new_tokens as default_new_tokens
from transformer_zoo.generation.greedy import Greedy
from transformer_zoo.generation.sampling import Sampling
from transformer_zoo.serving.http.generation_row import (
    Failed,
    Finished,
    GenerationRow,
    Prompt,
    Token,
)
from transformer_zoo.serving.http.logprobs import Echo, Logprobs, alternatives
from transformer_zoo.serving.stops import StopText

INT64 = 2**63  # OpenAI's `seed` is an int64: -INT64 <= seed < INT64
SEEDS = 2**64  # a request's int64 seed, negative too, maps to a generator seed mod 2**64
DEFAULT_MAX_TOKENS = 16  # OpenAI's; a decoder-only model's on /v2 too (`new_tokens` cuts it)
MAX_ECHOED = 2**18  # prompt tokens `echo` with `logprobs` lists in one answer (`check_echoed`)


class RequestError(Exception):
    """A request the server refuses: HTTP `status`, `message`, the `param` at fault."""

    def __init__(self, status: int, message: str, param: str | None = None, headers=None):
        super().__init__(message)
        self.status, self.message, self.param = status, message, param
        self.headers = headers or {}


def strategy(temperature, top_p, top_k, seed) -> Greedy | Sampling:
    """vLLM's reading of the sampling fields: temperature 0 is greedy; top_p 1 and top_k
    -1 (or None) keep every token. Any integer seed, negative too, names one generator
    (numpy's take none below 0): the seed modulo 2**64, so each int64 seed its own. A
    negative or non-finite temperature is refused (400, naming it), not read as greedy."""
    if temperature is not None and not (math.isfinite(temperature) and temperature >= 0):
        raise RequestError(
            400,
            f"`temperature` must be a finite number >= 0 (0: greedy). Received: {temperature!r}",
            "temperature",
        )
    sampled = temperature is None or temperature > 0
    try:  # checked under greedy decoding too, where they are not read: never ignored
        sampling = Sampling(
            temperature=float(temperature) if sampled and temperature is not None else 1.0,
            top_k=None if top_k is None else int(top_k),  # 0 and -1: all, as vLLM
            top_p=None if top_p in (None, 1, 1.0) else float(top_p),
            seed=None if seed is None else seed % SEEDS,
        )
    except ValueError as error:  # its message names the field first: "`top_p` must ..."
        param = next((f for f in ("top_p", "top_k", "seed") if f"`{f}`" in str(error)), None)
        raise RequestError(400, str(error), param) from None
    return sampling if sampled else Greedy()


class PromptRow(NamedTuple):
    """One prompt's ids, and the first of them that `echo` shows: a text prompt's begin
    token is the server's, so it is not echoed (1); every id a client sent is (0)."""

    ids: list[int]
    echo_from: int


def prompt_count(prompt) -> int:
    """How many prompts an OpenAI `prompt` holds (`prompt_rows`), without reading them."""
    if isinstance(prompt, str) or all(isinstance(p, int) for p in prompt):
        return 1
    return len(prompt)


def prompt_rows(served, prompt, param: str = "prompt") -> list[PromptRow]:
    """The rows of an OpenAI `prompt`: a string, a list of strings, a list of token ids
    or a list of such lists. A decoder-only model continues any text, "" too (its prompt
    starts with the begin token); a translation needs a source. A prompt of ids is held
    to the limit a text's ids are (`ServedModel.check_prompt_lengths`), in the same words: a
    decoder-only prompt may fill the context (`echo` with `max_tokens: 0` scores it,
    `new_tokens` refuses what leaves too little room), a source the encoder's length."""
    if isinstance(prompt, str):
        prompt = [prompt]
    if not prompt:
        raise RequestError(400, "The prompt is empty.", param)
    if all(isinstance(p, int) for p in prompt):
        prompt = [prompt]
    rows = []
    for index, item in enumerate(prompt):
        if isinstance(item, str):
            try:  # a blank translation source is refused here too
                ids = served.prompt_ids(item)[0]
            except InputError as error:
                raise RequestError(400, f"Prompt {index + 1}: {error}", param) from None
            bos = served.config.special_ids.get("bos")
            rows.append(PromptRow(ids, int(served.family == "decoder-only" and ids[0] == bos)))
        else:
            if not item:
                raise RequestError(400, f"Prompt {index + 1} is empty.", param)
            size = served.dims.vocabulary_size
            bad = [t for t in item if not 0 <= t < size]  # masked by its length: 0 is a token
            if bad:
                raise RequestError(
                    400, f"Prompt {index + 1} has token id {bad[0]}, outside [0, {size}).", param
                )
            try:
                served.check_prompt_lengths([list(item)])
            except InputError as error:
                raise RequestError(400, f"Prompt {index + 1}: {error}", param) from None
            rows.append(PromptRow(list(item), 0))
    return rows


def new_tokens(
    served, rows: list[PromptRow], sent: int | None, default: int, limit: int | None
) -> list[int]:
    """Each row's `max_tokens`, as vLLM reads it: the value the client `sent`, refused
    (400, naming it) past the server's `limit` (`--max-tokens`) or the room a prompt
    leaves (`check_max_tokens`); else `default` cut to `limit` and to the room each
    prompt leaves (`engine.new_tokens`, as `ServedModel.generate`'s default), so that a
    value the client never sent is never refused. Only a decoder-only prompt that fills
    the context leaves no room for a default (400)."""
    if sent is not None:
        check_max_tokens(served, rows, sent, limit)
        return [sent] * len(rows)
    default = default if limit is None else min(default, limit)
    context, budgets = served.dims.max_length, []
    for index, (ids, _) in enumerate(rows):
        used = context - served.room(len(ids))  # an encoder-decoder's start token
        try:
            budgets.append(default_new_tokens(used, None, context, default))
        except InputError as error:
            raise RequestError(400, f"Prompt {index + 1}: {error}", "prompt") from None
    return budgets


def check_max_tokens(served, rows: list[PromptRow], max_tokens: int, limit: int | None) -> None:
    """Refuses a `max_tokens` past the server's limit or the room the context leaves."""
    if limit is not None and max_tokens > limit:
        raise RequestError(
            400, f"max_tokens={max_tokens} is more than this server's {limit}.", "max_tokens"
        )
    context = served.dims.max_length
    if served.family == "encoder-decoder":  # the target starts from one BOS, any source
        try:
            check_fits(1, max_tokens, context, "target start", "max_tokens")
        except InputError as error:
            raise RequestError(400, f"A translation: {error}", "max_tokens") from None
        return
    for index, (ids, _) in enumerate(rows):
        try:
            check_fits(len(ids), max_tokens, context, "prompt", "max_tokens")
        except InputError as error:
            raise RequestError(400, f"Prompt {index + 1}: {error}", "max_tokens") from None


def check_echoed(rows: list[PromptRow], n: int) -> None:
    """Refuses (400) `echo` with `logprobs` that would list more than `MAX_ECHOED`
    prompt tokens, counted over the choices (each lists its prompt's): an answer lists
    each token with its alternatives, about 170 bytes with `logprobs: 5` (128 choices of
    a 1,023-token prompt made 23 MB)."""
    echoed = n * sum(len(row.ids) - row.echo_from for row in rows)
    if echoed > MAX_ECHOED:
        raise RequestError(
            400,
            f"`echo` with `logprobs` would list {echoed} prompt tokens (each choice lists "
            f"its prompt's); the most is {MAX_ECHOED}.",
            "echo",
        )


@dataclass
class Choice:
    """One row's output so far, as text (`stops.StopText`: what each token adds, ended
    before the first stop string). Text is released only when no stop string can still
    begin in it.

    Attributes:
        prompt_ids: the row's prompt (or source) ids.
        echo: with `echo`, the prompt as shown (`Echo`, shared with the prompt's other
            choices); None without.
    """

    served: object
    stops: list[str]
    prompt_ids: list[int] = field(default_factory=list)
    echo: Echo | None = None
    tokens: list[Token] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)  # where each token's text begins
    sent: int = 0  # characters of `text` already streamed
    finish_reason: str | None = None
    error: BaseException | None = None
    closed: bool = False  # its last stream chunk has been sent

    def __post_init__(self):
        continues = self.served.family == "decoder-only"
        context = list(self.prompt_ids) if continues else []  # the ids `text` follows
        tokenizer, shown = self.served.target_tokenizer, self.echo is not None
        self.row = StopText(tokenizer, context, self.stops, context_shown=shown)
        self.context = self.row.context

    @property
    def ready(self) -> bool:
        """Whether its text can be sent: its echoed prompt's scores have come."""
        return self.echo is None or self.echo.ready

    @property
    def prefix(self) -> str:  # `echo`: the prompt's text (`Echo.work_out` first)
        return "" if self.echo is None else self.echo.prefix

    @property
    def text(self) -> str:
        return self.row.text

    @property
    def texts(self) -> list[str]:  # what each token added to `text`
        return self.row.texts

    @property
    def sequence(self) -> list[int]:  # the context, then the generated ids
        return self.row.sequence

    def add(self, token: Token) -> bool:
        """Adds a token; True when it completed a stop string (the row should end)."""
        self.tokens.append(token)
        stopped = self.row.add(token.token_id)
        self.offsets.append(self.offsets[-1] + len(self.texts[-2]) if self.offsets else 0)
        if stopped:
            self.finish_reason = "stop"
        return stopped

    def releasable(self) -> int:
        """How many characters of `text` can be sent now."""
        return max(self.row.releasable(self.finish_reason is not None), self.sent)

    def delta(self) -> str:
        end = self.releasable()
        piece, self.sent = self.text[self.sent : end], end
        return piece

    def logprobs(self, top: int | None, start: int = 0, end: int | None = None) -> dict | None:
        """OpenAI's completion `logprobs` object for its entries[start:end]: the echoed
        prompt's tokens first when the request scores them (`Echo.entries`), then the
        generated ones. Each token is the text it adds, so the tokens join to the
        returned text and `text_offset` indexes it (the prompt's from 0, the
        completion's from the end of the echoed text); a character still incomplete
        when the row ended (U+FFFD) is in its last token's text, the echoed prompt's
        last where none was generated (`StopText.context_end`). `top_logprobs` holds the
        `top` likeliest tokens and the token itself (up to top + 1, as OpenAI's)."""
        if top is None:
            return None
        prompt = None if self.echo is None else self.echo.ended(self.row.context_end)
        shown = 0 if prompt is None else len(prompt.tokens)
        end = shown + len(self.tokens) if end is None else end
        first, last = max(start - shown, 0), max(end - shown, 0)  # the generated tokens'
        at = self.offsets[first] if first < len(self.offsets) else 0
        own = Logprobs(len(self.prefix) + at)
        tokenizer, before = self.row.tokenizer, self.sequence[: len(self.context) + first]
        for token, text in zip(self.tokens[first:last], self.texts[first:last], strict=True):
            own.add(text, token.logprob, alternatives(tokenizer, before, token, text))
            before.append(token.token_id)
        return own.after(prompt, min(start, shown), min(end, shown))

    def loggable(self) -> int:
        """How many of its `logprobs` entries (`logprobs`) a stream can send now: all but
        a last token whose character is still incomplete (`StopText.pending`; the echoed
        prompt's last before any token was generated), logged once the row goes on or
        ends: an ended row's U+FFFD is that token's text."""
        echoed = self.echo is not None and self.echo.entries is not None
        shown = len(self.echo.entries.tokens) if echoed else 0
        return max(shown + len(self.tokens) - self.row.pending, 0)


class Generation:
    """The rows of one request on a `GenerationScheduler`, with their events on an
    asyncio queue of the request's loop. With `prompt_logprobs`, the first row of each
    prompt scores it (the prompt's `n` choices share it, `Echo`): the scheduler scores
    a prompt on its own, and scoring each copy again cost `n` times the work. `budgets`
    holds each prompt's `max_tokens` (`new_tokens`), `rows_ids` its ids."""

    def __init__(
        self, scheduler, rows_ids, budgets, make_strategy, n, stops, top, timeout,
        prompt_logprobs=False,
    ):  # fmt: skip
        loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue = asyncio.Queue()
        self.arrived = time.monotonic()
        self.first_token_at: float | None = None
        self.deadline = deadline = self.arrived + timeout
        self.rows: list[GenerationRow] = []
        for ids, max_tokens in zip(rows_ids, budgets, strict=True):
            for j in range(n):
                index = len(self.rows)

                def emit(event, index=index):
                    loop.call_soon_threadsafe(self.queue.put_nowait, (index, event))

                row = GenerationRow(
                    ids, max_tokens, make_strategy(j), emit, top_logprobs=top or 0,
                    deadline=deadline, prompt_logprobs=prompt_logprobs and j == 0,
                )  # fmt: skip
                self.rows.append(row)
        self.stops = stops
        self.scheduler = scheduler
        self.open = len(self.rows)

    @property
    def time_to_first_token(self) -> float | None:
        """Seconds from arrival to the first token, None before it."""
        return None if self.first_token_at is None else self.first_token_at - self.arrived

    def submit(self) -> None:
        self.scheduler.submit(self.rows)

    def cancel(self) -> None:
        for row in self.rows:
            row.cancel()

    async def next(self, choices: list[Choice], wait: float):
        """The next `(index, event)`, applied to `choices`; None after `wait` seconds
        without one. A stop string ends its row here. Each token a choice takes is
        counted for `/metrics` (the scheduler's `observe("tokens", 1)`), so the count
        is the sum of the usages' `completion_tokens`."""
        try:
            index, event = await asyncio.wait_for(self.queue.get(), wait)
        except TimeoutError:
            return None
        choice = choices[index]
        if isinstance(event, Prompt):
            choice.echo.scores = event
        elif isinstance(event, Token):
            if self.first_token_at is None:
                self.first_token_at = time.monotonic()
            if choice.finish_reason is None:
                # Counted here, as the usage counts it: the scheduler decodes on until
                # the cancel of a row that met a stop string reaches it.
                self.scheduler.observe("tokens", 1)
                if choice.add(event):
                    self.rows[index].cancel()
        elif isinstance(event, Finished):
            self.open -= 1
            if choice.finish_reason is None:
                choice.row.finish()  # a character whose bytes never all came, as U+FFFD
                if event.reason in ("cancelled", "timeout"):
                    choice.error = (
                        TimeoutError("The request timed out.")
                        if event.reason == "timeout"
                        else None
                    )
                    choice.finish_reason = "cancelled" if event.reason == "cancelled" else "timeout"
                else:  # a stop string that `finish`'s U+FFFD completed is one met
                    choice.finish_reason = "stop" if choice.row.stopped else event.reason
        elif isinstance(event, Failed):
            self.open -= 1
            choice.error = event.error
            choice.finish_reason = choice.finish_reason or "error"
        return index, event
