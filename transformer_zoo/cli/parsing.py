"""The command line's one error path and its argument types.

Every misuse ends the same way, for every subcommand: one `transformer-zoo COMMAND:
error: MESSAGE` line on stderr, exit code 2, no traceback. argparse reports its own errors
(a missing or ill-typed argument, an unknown command or flag) so, after its usage line,
on every parser alike (none of them changes `error`); errors found after parsing (an
unreadable file, a bad value for the model) are raised as `UsageError` and printed by
`transformer_zoo.cli.main` in the same form.
"""

from __future__ import annotations

import argparse

from transformer_zoo.errors import first_line


class UsageError(Exception):
    """Bad user input, found after parsing: one line, exit code 2."""

    @classmethod
    def from_error(cls, error: BaseException) -> UsageError:
        """The first line of `error`'s message as a usage error."""
        return cls(first_line(error))


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number ≥ 0, got {text!r}")
    return value


def fraction_or_none(text: str) -> float | None:
    if text.lower() == "none":
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1] or 'none', got {text!r}")
    return value
