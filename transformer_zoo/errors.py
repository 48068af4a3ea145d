"""The project's error types and its one way of shortening an error to one line.

Each is a `ValueError` whose message is one line, so that the command line can print it
as `transformer-zoo COMMAND: error: MESSAGE` (exit code 2) without a traceback.
"""

from __future__ import annotations


class RunError(ValueError):
    """A run or exported directory is missing, incomplete or malformed."""


class ModelDirectoryError(RunError):
    """An exported directory is missing a file, or holds an unreadable or corrupted one."""


class InputError(ValueError):
    """An input has the wrong type, dtype, rank or values, or does not fit the model."""


def first_line(error: BaseException) -> str:
    """The first line of `error`'s message, or its type's name when it has none."""
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__
