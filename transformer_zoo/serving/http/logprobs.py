"""A completion's `logprobs`: OpenAI's object as tokens are added (`Logprobs`), a token's
alternatives as text (`alternatives`), and an echoed prompt worked out once for the
`n` choices of the prompt (`Echo`)."""

from __future__ import annotations

import time

from transformer_zoo.serving.detokenize import token_text
from transformer_zoo.serving.http.generation_row import Prompt, Token

FIELDS = ("tokens", "token_logprobs", "top_logprobs", "text_offset")


class Logprobs:
    """OpenAI's completion `logprobs` object as its tokens are added: each token is the
    text it adds, at `text_offset` in the text (`at`: where the next one begins)."""

    def __init__(self, at: int = 0):
        self.at = at
        self.tokens: list[str] = []
        self.token_logprobs: list[float | None] = []
        self.top_logprobs: list[dict[str, float] | None] = []
        self.text_offset: list[int] = []

    def add(self, text: str, logprob: float | None, top: dict[str, float] | None) -> None:
        self.tokens.append(text)
        self.token_logprobs.append(logprob)
        self.top_logprobs.append(top)
        self.text_offset.append(self.at)
        self.at += len(text)

    def after(self, first: Logprobs | None, start: int = 0, end: int | None = None) -> dict:
        """The object, `first`'s tokens[start:end] (an echoed prompt's) before these."""
        if first is None:
            return {name: getattr(self, name) for name in FIELDS}
        return {name: getattr(first, name)[start:end] + getattr(self, name) for name in FIELDS}

    def but_last(self) -> Logprobs:
        """A copy without the last token, which is added next (`add`) where it began."""
        copy = Logprobs(self.text_offset[-1])
        for name in FIELDS:
            setattr(copy, name, getattr(self, name)[:-1])
        return copy


def alternatives(tokenizer, before: list[int], token: Token, text: str) -> dict[str, float]:
    """A token's `top` alternatives as OpenAI's `{text: log-probability}` (each the text
    it would add after `before`), the token itself too, under its `text`."""
    found: dict[str, float] = {}
    for token_id, logprob in token.top:  # likeliest first: a shared text keeps its best
        known = token_id == token.token_id
        found.setdefault(text if known else token_text(tokenizer, before, token_id), logprob)
    found.setdefault(text, token.logprob)
    return found


class Echo:
    """A prompt as `echo` shows it, worked out once for the `n` choices of the prompt
    (`work_out`, which the routes run off the event loop): the text each shown id adds,
    in one pass over the prompt, and with `logprobs` the prompt's own scores (`Prompt`,
    which only the prompt's first row asks the scheduler for: `Generation`) as entries
    of the `logprobs` object. A prompt's first id has no context, hence `None`.

    Args:
        tokenizer: the model's output tokenizer.
        row: the prompt (`PromptRow`: its ids, the first id shown).
        scored: the request asks for the prompt's log-probabilities (`logprobs`).
    """

    def __init__(self, tokenizer, row, scored: bool):
        self.tokenizer, self.scored = tokenizer, scored
        self.ids, self.start = row.ids, row.echo_from
        self.scores: Prompt | None = None  # from the prompt's first row, when `scored`
        self.prefix = ""  # the echoed text, once worked out
        self.entries: Logprobs | None = None  # its `logprobs` entries, when `scored`
        self.done = False

    @property
    def ready(self) -> bool:
        """Whether it can be worked out: its scores have come, or none were asked for."""
        return not self.scored or self.scores is not None

    def work_out(self, deadline: float) -> None:
        """The prefix and entries (once: later calls return at once); TimeoutError past
        `deadline` (`time.monotonic()`)."""
        if self.done:
            return
        before, texts = self.ids[: self.start], []
        entries = Logprobs() if self.scored else None
        for j in range(self.start, len(self.ids)):
            if time.monotonic() > deadline:
                raise TimeoutError("The request timed out.")
            text = token_text(self.tokenizer, before, self.ids[j])
            texts.append(text)
            if entries is not None:
                self._enter(entries, j, before, text)
            before.append(self.ids[j])
        self.prefix, self.entries, self.done = "".join(texts), entries, True

    def ended(self, context_end: str) -> Logprobs | None:
        """The entries as a row that ended with `context_end` (`StopText.context_end`:
        U+FFFD, a character the prompt left incomplete and no generated token
        completed) shows them: in the last token's text, as a generated row's last
        token holds it (`StopText.finish`), so that the tokens join to the text. The
        shared `entries` themselves where it is "" (most rows)."""
        entries = self.entries
        if not context_end or entries is None or not entries.tokens:
            return entries
        ended, last = entries.but_last(), len(self.ids) - 1
        self._enter(ended, last, self.ids[:last], entries.tokens[-1] + context_end)
        return ended

    def _enter(self, entries: Logprobs, j: int, before: list[int], text: str) -> None:
        """Adds the prompt's id `j`, which adds `text` after the ids `before` it, with its
        score (`Prompt`; the first id has none)."""
        if j == 0:
            entries.add(text, None, None)
            return
        token = self.scores.tokens[j - 1]
        entries.add(text, token.logprob, alternatives(self.tokenizer, before, token, text))
