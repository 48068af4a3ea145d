"""Stop strings: a row's text ends before the first of them, and its generation ends as
soon as one is complete (OpenAI's and vLLM's `stop`, transformers' `stop_strings`).

One implementation for every caller: `ServedModel.generate` and `translate` (and so the
command line's `--stop`) and the HTTP server's completions. Numpy-free and TensorFlow-free.

- `stop_strings(stop)`: a `stop` argument checked and as a list (at most `MAX_STOPS`).
- `first_stop(text, stops)`: where the text ends, if a stop string occurs in it.
- `held_back(text, stops, start)`: how many characters at the end may still begin one
  (what a stream holds back).
- `StopText`: one row's text as its tokens arrive (`token_text`), cut at the first stop
  string; `add(token_id)` says when the row should end, `finish()` ends it.
"""

from __future__ import annotations

from collections.abc import Sequence

from transformer_zoo.errors import InputError
from transformer_zoo.serving.detokenize import end_text, holds_back, token_text

# OpenAI takes 4 stop strings, vLLM any number; evaluation harnesses send a task's
# stop sequences and the end-of-text string, often more than 4.
MAX_STOPS = 16


def stop_strings(stop, name: str = "stop") -> list[str]:
    """`stop` (None, a string, or a list of strings) as a list of stop strings.

    Raises:
        InputError: not a string or a list of strings, an empty string, one that holds a
            lone surrogate (an undecodable command-line byte: no generated text holds
            it), or more than `MAX_STOPS` of them.
    """
    if stop is None:
        return []
    stops = [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, (list, tuple)) or not all(isinstance(s, str) for s in stops):
        raise InputError(f"`{name}` must be a string or a list of strings. Received: {stop!r:.60}")
    limit = f"`{name}` takes up to {MAX_STOPS} non-empty strings"
    if len(stops) > MAX_STOPS:
        raise InputError(f"{limit}. Received: {len(stops)}")
    if not all(stops):
        raise InputError(f"{limit}. Received: an empty string (number {stops.index('') + 1})")
    for s in stops:
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:
            raise InputError(f"`{name}` holds {s!r}, not valid UTF-8 (a lone surrogate)") from None
    return list(stops)


def first_stop(text: str, stops: Sequence[str], start: int = 0) -> int | None:
    """Where `text` ends at its first stop string (the earliest that begins at or after
    `start`): the index the stop string begins at, or None where none occurs."""
    found = [at for at in (text.find(stop, start) for stop in stops) if at >= 0]
    return min(found) if found else None


def held_back(text: str, stops: Sequence[str], start: int = 0) -> int:
    """How many characters at the end of `text` may still begin a stop string: the
    longest end of `text` that is a proper beginning of one (0: all of it can be sent).

    Only the ends that begin at or after `start` are looked at, and only the last
    `len(stop) - 1` characters can begin a `stop`: a caller that held back the end from
    `start` on before more text came (`StopText`) passes it, since an end that begins
    earlier would have been held back then. So a stream looks at what it held back and
    the new text: trying every end of the last 4,000 characters at each token made a
    16-row stream with 16 stop strings that long take 10-15x as long (1.6 s now, 1.4 s
    without them)."""
    if not stops:
        return 0
    start = max(start, len(text) - max(map(len, stops)) + 1, 0)
    firsts = {stop[0] for stop in stops}
    for at in range(start, len(text)):  # the longest end first
        if text[at] in firsts:
            end = text[at:]
            if any(len(stop) > len(end) and stop.startswith(end) for stop in stops):
                return len(text) - at
    return 0


class StopText:
    """One row's generated text as its tokens arrive, ended by its first stop string.

    Each token's text is what it adds to the text before it (`token_text`): a
    decoder-only completion continues its prompt (a first token `▁March` adds " March"),
    a translation starts afresh (`context` empty). A stop string is looked for only in
    the generated text, not in the prompt; it may span tokens. A character whose bytes
    have not all come is held back until they do, or until the row ends (`finish`).

    Args:
        tokenizer: the model's output tokenizer.
        context: the ids the generated text follows (a decoder-only model's prompt; none
            for a translation).
        stops: the stop strings (`stop_strings`).
        context_shown: the answer shows the context before `text` (an echoed prompt).
            Without it, a row that generated no token has no text: a character the
            context left incomplete is the context's (`context_end`), not `text`'s, as
            decoding the generated ids alone gives "" (transformers, vLLM).

    Attributes:
        texts: what each token added (the text of the token that completed a stop
            string whole, so that they still join to what was generated; the last one's
            with what `finish` added).
        text: the generated text, ended before the first stop string once one is
            complete (with `context_shown`, `context_end` first when no token was
            generated, so that a stop string may end there too).
        sequence: `context`, then the generated ids (up to and including the token that
            completed a stop string).
        context_end: what `finish` added when no token had been generated (U+FFFD: a
            character the context left incomplete), else "": it counts as the text of
            the context's last token, as it counts as the last generated token's where
            there is one (an echoed prompt shows it: `logprobs.Echo.ended`).
        stopped: a stop string is complete: the row should end.
        finished: `finish` has ended the row.
    """

    def __init__(
        self, tokenizer, context: Sequence[int], stops: Sequence[str], context_shown: bool = False
    ):
        self.tokenizer = tokenizer
        self.context_shown = context_shown
        self.context = [int(i) for i in context]
        self.stops = list(stops)
        self.sequence = list(self.context)
        self.texts: list[str] = []
        self.text = ""
        self.context_end = ""
        self.stopped = False
        self.finished = False
        self._held_from = 0  # where the end last held back began (`held_back`'s `start`)

    def piece(self, before: Sequence[int], token_id: int) -> str:
        """The text `token_id` adds after the ids `before` it (`token_text`)."""
        return token_text(self.tokenizer, before, token_id)

    def add(self, token_id: int) -> bool:
        """Adds a token; True when it completed a stop string (the row should end)."""
        piece = self.piece(self.sequence, token_id)
        self.sequence.append(int(token_id))
        self.texts.append(piece)
        return self._extend(piece)

    @property
    def pending(self) -> bool:
        """Whether the row runs with a character still incomplete at its end: `finish`
        would add it to the last token's text, the context's last before any token was
        generated (a stream logs that token only after)."""
        return not (self.finished or self.stopped) and holds_back(self.tokenizer, self.sequence)

    def finish(self) -> None:
        """Ends a row that no stop string ended (at EOS, at its token budget): a
        character still incomplete at its end, whose bytes never all came, is added as
        decoding the whole sequence shows it (U+FFFD, `end_text`), so that `text` is
        what that decoding adds; it counts as the last token's text (the context's
        last, `context_end`, when none was generated: in `text` only where the context
        is shown). A stop string it completes ends the row as one a token completes
        (`stopped`). Later calls do nothing."""
        if self.finished or self.stopped:
            return
        self.finished = True
        piece = end_text(self.tokenizer, self.sequence)
        if self.texts:
            self.texts[-1] += piece
        else:
            self.context_end = piece
            if not self.context_shown:
                return
        self._extend(piece)

    def _extend(self, piece: str) -> bool:
        # A stop string complete only now ends within the new piece.
        start = max(len(self.text) - max(map(len, self.stops), default=0) + 1, 0)
        self.text += piece
        at = first_stop(self.text, self.stops, start)
        if at is not None:
            self.text = self.text[:at]
            self.stopped = True
        return self.stopped

    def releasable(self, finished: bool = False) -> int:
        """How many characters of `text` can be shown now: all of it once the row has
        ended (`finished`, or a stop string), else all but what may begin a stop string."""
        if finished or self.stopped:
            return len(self.text)
        self._held_from = len(self.text) - held_back(self.text, self.stops, self._held_from)
        return self._held_from
