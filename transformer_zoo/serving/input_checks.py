"""The checks of what a `ServedModel` is given (its texts, their lengths in tokens, a
batch size), each failing with one `InputError`, and the warning of the encoder inputs
cut to the model's length."""

from __future__ import annotations

import logging

import numpy as np

from transformer_zoo.errors import InputError, count

log = logging.getLogger(__name__)  # truncation warnings; the command line shows them


def text_list(texts, name: str = "texts") -> list[str]:
    """`texts` (a string is one text) as a list of strings, each valid Unicode.

    Raises:
        InputError: no text, a text that is not a string (named by its index), or one
            that holds a lone surrogate: what Python makes of a command-line argument's
            bytes that are not UTF-8, which no tokenizer can read.
    """
    if isinstance(texts, str):
        texts = [texts]
    texts = list(texts)
    if not texts:
        raise InputError("No input text was given.")
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise InputError(
                f"`{name}` must hold strings. Received: {type(text).__name__} {text!r:.40}",
                index,
            )
        if not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as error:
                character = text[error.start]
                raise InputError(
                    f"the text is not valid UTF-8: it holds {character!r} at character "
                    f"{error.start + 1}, a lone surrogate (an undecodable byte)",
                    index,
                ) from None
    return texts


def check_sources(rows: list[list[int]], max_length: int) -> None:
    """Raises `InputError` naming the first source (encoder ids) longer than the model's
    `max_length`: `translate`'s check, which the attention pictures make too."""
    check_lengths(rows, max_length, "source", f"is longer than the model's {max_length}")


def check_lengths(rows: list[list[int]], limit: int, what: str, problem: str) -> None:
    """Raises `InputError` naming the first input whose ids are longer than `limit`."""
    for index, row in enumerate(rows):
        if len(row) > limit:
            raise InputError(f"the {what} is {count(len(row), 'token')} long and {problem}", index)


def warn_truncated(lengths: list[int], limit: int) -> None:
    """Logs one warning (on `log`) for the inputs longer than `limit` tokens, which were
    cut, numbered from 1 in `lengths`."""
    cut = [i for i, n in enumerate(lengths) if n > limit]
    if cut:
        shown = ", ".join(str(i + 1) for i in cut[:5]) + (", ..." if len(cut) > 5 else "")
        log.warning(
            "%d of %d inputs were longer than the model's %d tokens and were cut to it (inputs %s)",
            len(cut),
            len(lengths),
            limit,
            shown,
        )


def check_batch_size(batch_size) -> None:
    """Raises `InputError` unless `batch_size` is a positive integer (numpy's too, not a
    bool)."""
    if (
        not isinstance(batch_size, (int, np.integer))
        or isinstance(batch_size, bool)
        or batch_size < 1
    ):
        raise InputError(f"`batch_size` must be a positive integer. Received: {batch_size!r}")
