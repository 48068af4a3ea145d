"""From a completion request to generated text: the rows a request becomes, their text
as tokens arrive (stop strings, held-back partial characters), logprobs and usage. Shared
by the OpenAI and the Open Inference Protocol routes."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from transformer_zoo.errors import InputError
from transformer_zoo.generation.search import Greedy, Sampling
from transformer_zoo.serving.http.scheduler import Failed, Finished, GenerationRow, Prompt, Token


class RequestError(Exception):
    """A request the server refuses: HTTP `status`, `message`, the `param` at fault."""

    def __init__(self, status: int, message: str, param: str | None = None, headers=None):
        super().__init__(message)
        self.status, self.message, self.param = status, message, param
        self.headers = headers or {}


def strategy(temperature, top_p, top_k, seed) -> Greedy | Sampling:
    """vLLM's reading of the sampling fields: temperature 0 is greedy; top_p 1 and top_k
    -1 (or None) keep every token."""
    if temperature is None or temperature > 0:
        try:
            return Sampling(
                temperature=1.0 if temperature is None else float(temperature),
                top_k=None if top_k in (None, -1, 0) else int(top_k),
                top_p=None if top_p in (None, 1, 1.0) else float(top_p),
                seed=seed,
            )
        except ValueError as error:
            raise RequestError(400, str(error)) from None
    return Greedy()


def prompt_rows(served, prompt, param: str = "prompt") -> list[list[int]]:
    """The id rows of an OpenAI `prompt`: a string, a list of strings, a list of token
    ids or a list of such lists."""
    if isinstance(prompt, str):
        prompt = [prompt]
    if not prompt:
        raise RequestError(400, "The prompt is empty.", param)
    if all(isinstance(p, int) for p in prompt):
        prompt = [prompt]
    rows = []
    for index, item in enumerate(prompt):
        if isinstance(item, str):
            if not item.strip():
                raise RequestError(400, f"Prompt {index + 1} is empty.", param)
            try:
                rows.append(served.prompt_ids(item)[0])
            except InputError as error:
                raise RequestError(400, f"Prompt {index + 1}: {error}", param) from None
        else:
            if not item:
                raise RequestError(400, f"Prompt {index + 1} is empty.", param)
            size = served.dims.vocabulary_size
            bad = [t for t in item if not 0 < t < size]
            if bad:
                raise RequestError(
                    400, f"Prompt {index + 1} has token id {bad[0]}, outside [1, {size}).", param
                )
            limit = (
                served.dims.max_length - 1 if served.family == "decoder-only" else served.max_length
            )
            if len(item) > limit:
                raise RequestError(
                    400, f"Prompt {index + 1} is {len(item)} tokens; the most is {limit}.", param
                )
            rows.append(list(item))
    return rows


def echoed(served, ids: list[int]) -> list[int]:
    """The prompt ids `echo` shows (as text, and with `logprobs` as scored tokens): all
    but a leading begin token."""
    return ids[1:] if ids and ids[0] == served.config.special_ids.get("bos") else ids


def check_max_tokens(served, rows, max_tokens: int, limit: int | None) -> None:
    """Refuses a `max_tokens` past the server's limit or the room the context leaves."""
    if limit is not None and max_tokens > limit:
        raise RequestError(
            400, f"max_tokens={max_tokens} is more than this server's {limit}.", "max_tokens"
        )
    for index, ids in enumerate(rows):
        room = served.room(len(ids))
        if max_tokens > room:
            raise RequestError(
                400,
                f"Prompt {index + 1} ({len(ids)} tokens) leaves room for {room} new tokens in "
                f"the model's context of {served.dims.max_length}; max_tokens={max_tokens}.",
                "max_tokens",
            )


@dataclass
class Choice:
    """One row's output so far, as text. Text is released only when no stop string can
    still begin in it and it does not end in half a character."""

    served: object
    stops: list[str]
    prefix: str = ""  # `echo`: the prompt's text
    prompt: Prompt | None = None  # `echo` with `logprobs`: the prompt's own log-probabilities
    ids: list[int] = field(default_factory=list)
    tokens: list[Token] = field(default_factory=list)
    text: str = ""
    sent: int = 0  # characters of `text` already streamed
    finish_reason: str | None = None
    error: BaseException | None = None
    closed: bool = False  # its last stream chunk has been sent

    def add(self, token: Token) -> bool:
        """Adds a token; True when it completed a stop string (the row should end)."""
        self.ids.append(token.token_id)
        self.tokens.append(token)
        self.text = self.served.output_text(self.ids)
        for stop in self.stops:
            at = self.text.find(stop)
            if at >= 0:
                self.text = self.text[:at]
                self.finish_reason = "stop"
                return True
        return False

    def releasable(self) -> int:
        """How many characters of `text` can be sent now."""
        if self.finish_reason is not None:
            return len(self.text)
        end = len(self.text)
        while end and self.text[end - 1] == "\ufffd":
            end -= 1
        for stop in self.stops:  # a stop string that may still be completing
            for size in range(min(len(stop) - 1, end), 0, -1):
                if self.text[:end].endswith(stop[:size]):
                    end -= size
                    break
        return max(end, self.sent)

    def delta(self) -> str:
        end = self.releasable()
        piece, self.sent = self.text[self.sent : end], end
        return piece

    def logprobs(self, top: int | None, start: int = 0, with_prompt: bool = True) -> dict | None:
        """OpenAI's completion `logprobs` object for tokens[start:], after the prompt's
        tokens when the request echoes them with their log-probabilities (`prompt`, and
        `with_prompt`): the prompt's text offsets count from 0, the completion's from the
        end of the echoed text. A prompt's first token has no context, hence `None` (with
        the begin token, which `echo` leaves out, every shown token has one)."""
        if top is None:
            return None
        tokenizer = self.served.target_tokenizer
        entries: list[tuple[str, float | None, dict | None, int]] = []
        if self.prompt is not None and with_prompt:
            at = 0
            if echoed(self.served, [self.prompt.first_id]):  # not the begin token
                piece = _piece(tokenizer, self.prompt.first_id)
                entries.append((piece, None, None, at))
                at += len(piece)
            for token in self.prompt.tokens:
                piece = _piece(tokenizer, token.token_id)
                entries.append((piece, token.logprob, _top(tokenizer, token.top), at))
                at += len(piece)
        at = len(self.prefix) + sum(len(_piece(tokenizer, t.token_id)) for t in self.tokens[:start])
        for token in self.tokens[start:]:
            piece = _piece(tokenizer, token.token_id)
            entries.append((piece, token.logprob, _top(tokenizer, token.top), at))
            at += len(piece)
        return {
            "tokens": [e[0] for e in entries],
            "token_logprobs": [e[1] for e in entries],
            "top_logprobs": [e[2] for e in entries] if top else None,
            "text_offset": [e[3] for e in entries],
        }


def _top(tokenizer, top: list[tuple[int, float]]) -> dict:
    """A token's alternatives as OpenAI's `{piece: log-probability}`."""
    return {_piece(tokenizer, i): lp for i, lp in top}


def _piece(tokenizer, token_id: int) -> str:
    return tokenizer.id_to_piece(token_id).replace("\u2581", " ")


class Generation:
    """The rows of one request on a `GenerationScheduler`, with their events on an
    asyncio queue of the request's loop."""

    def __init__(
        self, scheduler, rows_ids, max_tokens, make_strategy, n, stops, top, timeout,
        prompt_logprobs=False,
    ):  # fmt: skip
        loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue = asyncio.Queue()
        self.arrived = time.monotonic()
        self.first_token_at: float | None = None
        deadline = self.arrived + timeout
        self.rows: list[GenerationRow] = []
        for ids in rows_ids:
            for j in range(n):
                index = len(self.rows)

                def emit(event, index=index):
                    loop.call_soon_threadsafe(self.queue.put_nowait, (index, event))

                row = GenerationRow(
                    ids, max_tokens, make_strategy(j), emit, top_logprobs=top or 0,
                    deadline=deadline, prompt_logprobs=prompt_logprobs,
                )  # fmt: skip
                self.rows.append(row)
        self.stops = stops
        self.scheduler = scheduler
        self.open = len(self.rows)

    def submit(self) -> None:
        self.scheduler.submit(self.rows)

    def cancel(self) -> None:
        for row in self.rows:
            row.cancel()

    async def next(self, choices: list[Choice], wait: float):
        """The next `(index, event)`, applied to `choices`; None after `wait` seconds
        without one. A stop string ends its row here."""
        try:
            index, event = await asyncio.wait_for(self.queue.get(), wait)
        except TimeoutError:
            return None
        choice = choices[index]
        if isinstance(event, Prompt):
            choice.prompt = event
        elif isinstance(event, Token):
            if self.first_token_at is None:
                self.first_token_at = time.monotonic()
            if choice.finish_reason is None and choice.add(event):
                self.rows[index].cancel()
        elif isinstance(event, Finished):
            self.open -= 1
            if choice.finish_reason is None:
                if event.reason in ("cancelled", "timeout"):
                    choice.error = (
                        TimeoutError("The request timed out.")
                        if event.reason == "timeout"
                        else None
                    )
                    choice.finish_reason = "cancelled" if event.reason == "cancelled" else "timeout"
                else:
                    choice.finish_reason = event.reason
        elif isinstance(event, Failed):
            self.open -= 1
            choice.error = event.error
            choice.finish_reason = choice.finish_reason or "error"
        return index, event
