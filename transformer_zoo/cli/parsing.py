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


EARLY_STOPPING = {"true": True, "false": False, "never": "never"}


def _early_stopping(value: str) -> bool | str:
    if value.lower() not in EARLY_STOPPING:
        raise argparse.ArgumentTypeError(f"expected true, false or never, not {value!r}")
    return EARLY_STOPPING[value.lower()]


# The options of the search strategies, by their `generation.search` field names, with the
# type of their value (None: a switch).
SEARCH_FLAGS = {
    "num_beams": int,
    "length_penalty": float,
    "early_stopping": _early_stopping,
    "temperature": float,
    "top_k": int,
    "top_p": float,
    "seed": int,
    "forced_eos": None,
}


def add_moved_data_arguments(parser: argparse.ArgumentParser, when: str = "") -> None:
    """`--data FILE` and `--valid FILE`: where a run's data files are now, when they moved
    from the paths its config.json records (`data.run_task.relocate`); `when` prefixes
    their help ("with --quantize: ")."""
    parser.add_argument(
        "--data",
        metavar="FILE",
        help=f"{when}where the run's data file is now, if it moved from the path config.json "
        "records (checked against the SHA-256 the run recorded)",
    )
    parser.add_argument(
        "--valid", metavar="FILE", help=f"{when}where the run's --valid file is now, if it moved"
    )


def add_search_arguments(parser: argparse.ArgumentParser) -> None:
    """`--strategy` and the options of the strategies (`generate`, `translate`,
    `evaluate`)."""
    from transformer_zoo.generation import STRATEGIES

    parser.add_argument(
        "--strategy",
        choices=tuple(STRATEGIES),
        default="greedy",
        help="greedy (default); sample takes --temperature --top-k --top-p --seed; beam "
        "takes --num-beams --length-penalty --early-stopping true|false|never (a flag of "
        "another strategy is an error); each takes --forced-eos (a row still running at "
        "the length limit ends with EOS, transformers' forced_eos_token_id)",
    )
    for flag, kind in SEARCH_FLAGS.items():
        name = f"--{flag.replace('_', '-')}"
        if kind is None:  # absent: None, the strategy's own default
            parser.add_argument(name, action="store_true", default=None)
        else:
            parser.add_argument(name, type=kind)


def search_from_arguments(args: argparse.Namespace):
    """The search strategy value of the flags of `add_search_arguments`; a flag the
    strategy does not take is refused (`search_config`), not ignored.

    Raises:
        UsageError: a flag of another strategy, or a bad value.
    """
    from transformer_zoo.generation.search import search_config

    given = {name: getattr(args, name) for name in SEARCH_FLAGS if getattr(args, name) is not None}
    try:
        return search_config(args.strategy, **given)
    except ValueError as error:
        raise UsageError.from_error(error) from None
