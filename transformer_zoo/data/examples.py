"""The shapes of training examples, one per model family (plain records), and the text
stream a language model may read instead of lines.

`category` groups examples for per-category reports (the built-in task's
"dates", "numbers", "times"); user data leaves it empty.
"""

from __future__ import annotations

from dataclasses import dataclass


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
    90%"`; empty for all of it), for messages."""

    text: str
    category: str = ""
    path: str = ""
    part: str = ""
