"""The `transformer-zoo` command: argument parsing only. Each subcommand's module
registers its parser and a handler that calls the library; every misuse ends in one
`transformer-zoo COMMAND: error: MESSAGE` line with exit code 2 (`cli.parsing`)."""

from __future__ import annotations

import argparse
import codecs
import contextlib
import json
import logging
import os
import signal
import sys
import threading

from transformer_zoo import __version__
from transformer_zoo.architectures import preset_names
from transformer_zoo.cli import demo, export, import_hf, serve, serving, train
from transformer_zoo.cli.parsing import UsageError
from transformer_zoo.run_directory import FAMILIES


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="transformer-zoo",
        description="A Keras 3 model zoo of the Transformer family.",
    )
    parser.add_argument("--version", action="version", version=f"transformer-zoo {__version__}")
    parser.add_argument(
        "--verbose",
        dest="show_logs",  # not `verbose`: train's own --verbose (Keras' 0/1/2) is that
        action="store_true",
        help="show TensorFlow's start-up logs (quiet by default); give it before COMMAND",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    describe = commands.add_parser("describe", help="print a preset's architecture as JSON")
    describe.add_argument(
        "preset", choices=preset_names(), metavar="PRESET", help=", ".join(preset_names())
    )
    describe.add_argument("--family", choices=FAMILIES, help="the family of 'tiny'")
    describe.set_defaults(handler=_describe)
    train.register(commands)  # train, evaluate
    export.register(commands)  # export
    serving.register(commands)  # generate, translate, embed, classify
    serve.register(commands)  # serve
    import_hf.register(commands)  # import-hf
    demo.register(commands)  # demo, attention
    parser.command_parsers = commands.choices  # {name: its parser}, for `main`'s errors
    return parser


def _describe(args: argparse.Namespace) -> int:
    from transformer_zoo.models.presets import describe

    try:
        summary = describe(args.preset, args.family)
    except ValueError as error:
        raise UsageError.from_error(error) from None
    print(json.dumps(summary))
    return 0


def _needs_tensorflow(args) -> bool:
    """Whether the command loads TensorFlow: all but serving from ONNX files."""
    return getattr(args, "engine", "keras") != "onnx"


def _import_tensorflow_quietly() -> None:
    """Imports TensorFlow and Keras with their start-up lines silenced: TensorFlow's logs
    below FATAL, the absl and CUDA-probe lines its libraries write straight to the process's
    stderr while loading (six lines on every CPU machine, one of them an `E0000 ... failed
    call to cuInit` error), and its Python warnings. `--verbose` shows them."""
    from transformer_zoo.files import native_stderr_silenced

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    with native_stderr_silenced():
        import absl.logging
        import keras  # noqa: F401
        import tensorflow  # noqa: F401
    # TensorFlow's Python warnings, such as the SavedModel export renaming our dotted input
    # names (`past_key_values.0.key` → `past_key_values_0_key`) in its signatures.
    absl.logging.set_verbosity(absl.logging.ERROR)


class _WarningHandler(logging.Handler):
    """The library's warnings (inputs cut to the model's length, ...) and errors as one
    line each, `transformer-zoo COMMAND: warning: ...` (or `error:`), on the `sys.stderr`
    of the moment; a record with an exception (a server's unexpected failure) is followed
    by its traceback, which says what failed and where."""

    def __init__(self, command: str):
        super().__init__(logging.WARNING)
        self.command = command

    def emit(self, record):
        level = record.levelname.lower()
        line = f"transformer-zoo {self.command}: {level}: {record.getMessage()}"
        if record.exc_info:
            line += "\n" + logging.Formatter().formatException(record.exc_info)
        print(line, file=sys.stderr)


@contextlib.contextmanager
def _library_loggers_restored():
    """The package's loggers as they were before the command: the handlers a command adds
    (its warnings, export's stages) print with its name and stop propagation, which must not
    outlive `main` in a process that goes on (a notebook, a test run): a later library
    call would print as "transformer-zoo export: ..." and never reach the caller's own
    handlers."""
    logging.getLogger("transformer_zoo")  # exists before, so that it is restored
    before = {
        logger: (logger.handlers[:], logger.propagate, logger.level)
        for logger in _package_loggers()
    }
    try:
        yield
    finally:
        for logger in _package_loggers():  # those made during the command: as made
            handlers, propagate, level = before.get(logger, ([], True, logging.NOTSET))
            logger.handlers[:] = handlers
            logger.propagate, logger.level = propagate, level


def _package_loggers() -> list[logging.Logger]:
    return [
        logger
        for name, logger in logging.Logger.manager.loggerDict.items()
        if name.split(".")[0] == "transformer_zoo" and isinstance(logger, logging.Logger)
    ]


def _show_warnings(command: str) -> None:
    library = logging.getLogger("transformer_zoo")
    library.handlers = [h for h in library.handlers if not isinstance(h, _WarningHandler)]
    library.addHandler(_WarningHandler(command))
    library.propagate = False  # a root handler (tf2onnx sets one) would print it again


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # said by the parser whose part of the line holds them, with its usage
        before = argv[: argv.index(args.command)] if args.command in argv else []
        owner = parser if set(unknown) & set(before) else parser.command_parsers[args.command]
        owner.error(f"unrecognized arguments: {' '.join(unknown)}")
    _utf8_output()
    with (
        _library_loggers_restored(),
        _noting_ctrl_c(terminate_too=args.command not in SERVING_COMMANDS) as interrupted,
    ):
        _show_warnings(args.command)
        try:
            if not args.show_logs and _needs_tensorflow(args) and "tensorflow" not in sys.modules:
                _import_tensorflow_quietly()  # seconds, in which Ctrl-C is one line too
            return args.handler(args) or 0
        except KeyboardInterrupt:
            pass
        except Exception as error:
            # TensorFlow's tracing turns a Ctrl-C into an error of its own ("in user code:",
            # a SystemError): after one, any error is the interruption.
            if not interrupted:
                if isinstance(error, UsageError):
                    print(f"transformer-zoo {args.command}: error: {error}", file=sys.stderr)
                    return 2
                raise
    print(f"\ntransformer-zoo {args.command}: interrupted", file=sys.stderr)
    return 130


def _utf8_output() -> None:
    """Standard output in UTF-8 whatever the locale says, as the inputs are read: a
    translation into Chinese, or an input's é echoed in JSONL, cannot be written in
    Latin-1 or ASCII (`PYTHONIOENCODING=ascii`, a Latin-1 locale), which ended the command
    in a UnicodeEncodeError traceback with nothing written. (Standard error already
    escapes what its encoding cannot write.)"""
    stdout = sys.stdout
    encoding = getattr(stdout, "encoding", None) or "utf-8"
    if codecs.lookup(encoding).name != "utf-8" and hasattr(stdout, "reconfigure"):
        stdout.reconfigure(encoding="utf-8")


# Commands that handle SIGTERM themselves (a server drains its requests first).
SERVING_COMMANDS = ("serve", "demo")


@contextlib.contextmanager
def _noting_ctrl_c(terminate_too: bool = False):
    """A list that holds True once SIGINT came (Python's KeyboardInterrupt is raised as
    ever); with `terminate_too`, SIGTERM (a job scheduler's stop, `kill`) is taken as
    Ctrl-C, so that a run stops with the same line and rerun hint, not silently. A process
    started with SIGINT ignored (a script's `&` job) keeps ignoring it; SIGTERM is still
    taken. On the main thread only, where signal handlers can be set."""
    interrupted: list[bool] = []
    if threading.current_thread() is not threading.main_thread():
        yield interrupted
        return
    previous = signal.getsignal(signal.SIGINT)
    ctrl_c = previous != signal.SIG_IGN  # ignored when started as a background job
    if not ctrl_c and not terminate_too:
        yield interrupted
        return

    def note(signum, frame):
        interrupted.append(True)
        if signum == signal.SIGINT and callable(previous):
            previous(signum, frame)
        raise KeyboardInterrupt

    if ctrl_c:
        signal.signal(signal.SIGINT, note)
    terminate = signal.getsignal(signal.SIGTERM)
    if terminate_too:
        signal.signal(signal.SIGTERM, note)
    try:
        yield interrupted
    finally:
        if ctrl_c:
            signal.signal(signal.SIGINT, previous)
        if terminate_too:
            signal.signal(signal.SIGTERM, terminate)


if __name__ == "__main__":
    sys.exit(main())
