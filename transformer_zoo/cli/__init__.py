"""The `transformer-zoo` command: argument parsing only. Each subcommand's module
registers its parser and a handler that calls the library; every misuse ends in one
`transformer-zoo COMMAND: error: MESSAGE` line with exit code 2 (`cli.parsing`)."""

from __future__ import annotations

import argparse
import json
import sys

from transformer_zoo import __version__
from transformer_zoo.cli import demo, export, import_hf, serving, train
from transformer_zoo.cli.parsing import UsageError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="transformer-zoo",
        description="A Keras 3 model zoo of the Transformer family.",
    )
    parser.add_argument("--version", action="version", version=f"transformer-zoo {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    describe = commands.add_parser("describe", help="print a preset's architecture as JSON")
    describe.add_argument("preset", help="preset name")
    describe.set_defaults(handler=_describe)
    train.register(commands)  # train, evaluate
    export.register(commands)  # export
    serving.register(commands)  # generate, translate, embed, classify
    import_hf.register(commands)  # import-hf
    demo.register(commands)  # demo, attention
    return parser


def _describe(args: argparse.Namespace) -> int:
    from transformer_zoo.models.presets import describe

    try:
        summary = describe(args.preset)
    except ValueError as error:
        raise UsageError.from_error(error) from None
    print(json.dumps(summary))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args) or 0
    except UsageError as error:
        print(f"transformer-zoo {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
