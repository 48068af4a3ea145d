"""The shapes of training examples, one per model family (plain records), and the text
stream a language model may read instead of lines.

`category` groups examples for per-category reports (the built-in task's
"dates", "numbers", "times"); user data leaves it empty.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

STREAM_PIECE = 4096  # characters of a token stream encoded as one text (`encode_stream`)
STREAM_BATCH = 1024  # pieces per call: SentencePiece encodes a list on all cores
_BOUNDARY = re.compile(r"(?<=\S) (?=\S)")  # where a piece of a stream may end


@dataclass(frozen=True)
class TranslationPair:
    """A source sentence and its translation, for `EncoderDecoder`."""

    source: str
    target: str
    category: str = ""


@dataclass(frozen=True)
class PromptCompletion:
    """Text for `DecoderOnly`: the model reads `prompt` and learns to write `completion`.

    Plain-text language modelling has an empty prompt. `text` is the two joined by a
    space, as a person would read the example.
    """

    prompt: str
    completion: str
    category: str = ""

    @property
    def text(self) -> str:
        return f"{self.prompt} {self.completion}" if self.prompt else self.completion


@dataclass(frozen=True)
class ClassificationExample:
    """A labelled text or text pair, for `EncoderOnly`."""

    label: str
    text: str
    text2: str | None = None
    category: str = ""


@dataclass(frozen=True)
class TextStream:
    """A whole text for `DecoderOnly`, read as one token stream cut into windows of the
    model's context (`data.pipelines.stream_dataset`) rather than line by line.

    `path` names the file it was read from and `part` which part of it (`"its first
    90%"`; empty for all of it), for messages. `token_ids(tokenizer)` encodes the text
    once: the window check and the pipeline read the same array."""

    text: str
    category: str = ""
    path: str = ""
    part: str = ""
    # [tokenizer, its ids of the text]: the last encoding, kept for the next caller.
    _encoded: list = field(default_factory=list, init=False, repr=False, compare=False)

    def token_ids(self, tokenizer) -> np.ndarray:
        """The text's ids by `tokenizer` (int32, no special token added), encoded on the
        first call for that tokenizer (`encode_stream`)."""
        if not self._encoded or self._encoded[0] is not tokenizer:
            self._encoded[:] = [tokenizer, encode_stream(tokenizer, self.text)]
        return self._encoded[1]


def encode_stream(tokenizer, text: str) -> np.ndarray:
    """`tokenizer.encode(text)` as an int32 array, made from pieces of about
    `STREAM_PIECE` characters encoded `STREAM_BATCH` at a time. The 30.6 M ids of a 100 MB
    text as one Python list took 1.1 GB (36 bytes an id, not 4); and SentencePiece's
    unigram lattice over a text that long loses float precision and breaks ties its own
    way (`▁ st uck` for `▁stu ck`: 65 ids more than the text's lines encoded one by one,
    which 4,096-character pieces match exactly).

    A piece ends before a space that stands between two characters that are not
    whitespace: every tokenizer a stream is read with starts a word there, whatever its
    normalization (SentencePiece's "▁" of the space then begins the next piece's first
    word, as it begins that word in the whole text), and so does GPT-2's byte-level
    pre-tokenizer (` ?\\p{L}+`). A newline is no such place: SentencePiece's word model
    joins it to the next word. A text without such a space is encoded whole."""
    pieces = []
    start = 0
    while start < len(text):
        boundary = _BOUNDARY.search(text, start + STREAM_PIECE)
        end = boundary.start() if boundary else len(text)
        pieces.append(text[start:end])
        start = end
    arrays = [np.zeros(0, np.int32)]
    for first in range(0, len(pieces), STREAM_BATCH):
        batch = tokenizer.encode(pieces[first : first + STREAM_BATCH])
        arrays.extend(np.asarray(ids, np.int32) for ids in batch)
    return np.concatenate(arrays)
