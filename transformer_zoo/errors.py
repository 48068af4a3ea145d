"""The project's error types and its one way of shortening an error to one line.

Each is a `ValueError` whose message is one line, so that the command line can print it
as `transformer-zoo COMMAND: error: MESSAGE` (exit code 2) without a traceback.
"""

from __future__ import annotations

import math
import numbers
import re


class RunError(ValueError):
    """A run or exported directory is missing, incomplete or malformed."""


class ModelDirectoryError(RunError):
    """An exported directory is missing a file, or holds an unreadable or corrupted one."""


class InputError(ValueError):
    """An input has the wrong type, dtype, rank or values, or does not fit the model.

    Attributes:
        index: the position (from 0) of the offending input in a batch of texts, when one
            input is at fault; the command line turns it into a line number.
    """

    def __init__(self, message: str, index: int | None = None):
        super().__init__(message)
        self.index = index


def count(number: int, noun: str, plural: str | None = None) -> str:
    """`number` and `noun`, plural unless it is one: "1 step", "10 steps"."""
    return f"{number} {noun if number == 1 else plural or noun + 's'}"


def with_article(noun: str) -> str:
    """`noun` with its indefinite article: "an encoder-only", "a decoder-only"."""
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


# Keras re-raises an error from inside a layer's `call` as "Exception encountered when
# calling X.call().", a blank line, the error's own message in ANSI bold, then the
# arguments the call received.
_KERAS_WRAPPER = "Exception encountered when calling "
_KERAS_ARGUMENTS = "Arguments received by "
# Keras' load of a file whose weights do not fit: "A total of N objects could not be loaded.
# Example error message for object <X>:", a blank line, then the cause.
_KERAS_LOAD_EXAMPLE = re.compile(r"Example error message for object .*:$")
# TensorFlow's error from inside a traced function: "in user code:", the frames, and the
# error itself ("ValueError: ...") on the last line.
_TF_USER_CODE = "in user code:"
_ANSI_CODE = re.compile(r"\x1b\[[0-9;]*m")


def first_line(error: BaseException) -> str:
    """The first line of `error`'s message, or its type's name when it has none: what the
    command line should print. Where that line only introduces the cause, the cause: for
    an error Keras wrapped on its way out of a layer's call, the first line of the message
    it wraps (without Keras' ANSI bold); for Keras' "... could not be loaded. Example error
    message for object <X>:", that line and the cause after it; for TensorFlow's "in user
    code:", the error on its last line."""
    lines = _ANSI_CODE.sub("", str(error)).splitlines()
    text = [line.strip() for line in lines if line.strip()]  # the non-blank lines
    if not text:
        return type(error).__name__
    if text[0].startswith(_KERAS_WRAPPER) and len(text) > 1:
        if not text[1].startswith(_KERAS_ARGUMENTS):
            return text[1]
    if _KERAS_LOAD_EXAMPLE.search(text[0]) and len(text) > 1:
        return f"{text[0]} {text[1]}"
    if text[0] == _TF_USER_CODE and len(text) > 1:
        return text[-1]
    return text[0]


def is_integer(value) -> bool:
    """An integer, numpy's too (`np.int64(2)`), and not a bool: what an argument that
    counts something (a size, a seed, a number of steps) takes."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_flag(value) -> bool:
    """True or False, numpy's too (`np.bool_`, recognised by its type: this module imports
    no numpy), and not a string or a number: what a switch takes (any non-empty string is
    truthy, so `"no"` would switch it on)."""
    kind = type(value)
    return kind is bool or (kind.__module__ == "numpy" and kind.__name__ in ("bool", "bool_"))


def check_flag(name: str, value) -> bool:
    """`value` as a bool if it is one (Python's or numpy's: `is_flag`), else ValueError
    naming `name`: any non-empty string is truthy, so `norm_first="post"` would build a
    Pre-LN block and `evaluate="no"` would evaluate."""
    if not is_flag(value):
        raise ValueError(f"`{name}` must be True or False. Received: {name}={value!r}")
    return bool(value)


def check_size(name: str, value, minimum: int = 1) -> int:
    """`value` as an int if it is an integer (numpy's too, not a bool) ≥ `minimum`, else
    ValueError naming `name`: `True` would otherwise build one layer, `2.0` a float width."""
    if not is_integer(value) or value < minimum:
        kind = {0: "a non-negative integer", 1: "a positive integer"}.get(
            minimum, f"an integer ≥ {minimum}"
        )
        raise ValueError(f"`{name}` must be {kind}. Received: {name}={value!r}")
    return int(value)


def is_number(value) -> bool:
    """A finite real number, numpy's too (`np.float32(1e-3)`, `np.int64(2)`), and not a
    bool: what an argument that measures something (a rate, a duration) takes."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
