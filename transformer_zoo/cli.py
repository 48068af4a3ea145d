"""The `transformer-zoo` command."""

from __future__ import annotations

import argparse
import sys

from transformer_zoo import __version__
from transformer_zoo.cli_import import register as register_import
from transformer_zoo.cli_serving import register as register_serving
from transformer_zoo.cli_train import one_line_error
from transformer_zoo.cli_train import register as register_training
from transformer_zoo.demo import register as register_demo


class UsageError(Exception):
    """Bad user input: printed as one line, exit code 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="transformer-zoo",
        description="A Keras 3 model zoo of the Transformer family.",
    )
    parser.add_argument("--version", action="version", version=f"transformer-zoo {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    describe = commands.add_parser("describe", help="print a preset's architecture as JSON")
    describe.add_argument("preset", help="preset name")
    describe.set_defaults(handler=_describe)
    register_serving(commands)  # export, generate, translate, embed, classify
    register_training(commands)  # train, evaluate
    parser.error = one_line_error(parser)  # unknown flags are reported by this parser
    register_import(commands)  # import-hf
    register_demo(commands)  # demo, attention
    return parser


def _describe(args: argparse.Namespace) -> int:
    import json

    from transformer_zoo.models.presets import describe

    try:
        summary = describe(args.preset)
    except ValueError as error:
        raise UsageError(str(error)) from None
    print(json.dumps(summary))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 0
    try:
        return args.handler(args) or 0
    except UsageError as error:
        print(f"transformer-zoo {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
