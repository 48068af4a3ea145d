import subprocess
import sys

import pytest

from tests.helpers import cli_error
from transformer_zoo import __version__
from transformer_zoo.cli import main


def test_version_flag_prints_the_package_version():
    result = subprocess.run(
        [sys.executable, "-m", "transformer_zoo.cli", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == f"transformer-zoo {__version__}"


def test_unknown_command_exits_with_code_2(capsys):
    try:
        main(["no-such-command"])
    except SystemExit as exit_:
        assert exit_.code == 2
    assert "invalid choice" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["train"],
        ["train", "--family", "no-such-family"],
        ["evaluate"],
        ["export", "somewhere"],
        ["generate", "x"],
        ["translate", "--model"],
        ["embed", "--model", "m", "--batch-size", "x"],
        ["classify", "--nonsense"],
        ["import-hf"],
        ["demo", "--seed", "x"],
        ["demo", "--time-budget", "-5"],
        ["attention", "run"],
        ["describe"],
        ["describe", "no-such-preset"],
    ],
)
def test_every_misuse_ends_in_one_error_line_with_exit_code_2(capsys, argv):
    line = cli_error(capsys, argv)
    command = argv[0] if argv else ""
    assert line.startswith(f"transformer-zoo {command}".strip())


def test_the_command_line_starts_without_tensorflow_or_onnxruntime():
    """`--help` and argument errors come back at once: the handlers import the library
    (the serving commands imported the data package, its built-in tasks included, with
    the module)."""
    banned = ("tensorflow", "keras", "onnxruntime", "transformer_zoo.data")
    code = (
        "import sys, transformer_zoo.cli as c; c.build_parser(); "
        f"print(sorted(m for m in {banned!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_global_verbose_flag_is_not_trains_keras_verbosity():
    """`transformer-zoo --verbose train ...` was read as train's `--verbose` (None after
    the subcommand's default), so it showed no start-up logs; `train --verbose 2` did."""
    from transformer_zoo.cli import build_parser

    parser = build_parser()
    args = parser.parse_args(["--verbose", "train", "--family", "decoder-only"])
    assert args.show_logs is True and args.verbose is None
    args = parser.parse_args(["train", "--family", "decoder-only", "--verbose", "2"])
    assert args.show_logs is False and args.verbose == 2


def test_a_command_run_in_process_leaves_the_librarys_logging_as_it_found_it(
    capsys, tmp_path, caplog
):
    """`main` added its warning and export-stage handlers and stopped propagation for
    good: after one `export` in a notebook or a test run, the library's later messages
    printed as "transformer-zoo export: ..." and never reached the caller's handlers."""
    import logging

    loggers = [logging.getLogger(name) for name in ("transformer_zoo", "transformer_zoo.export")]
    before = [(logger.handlers[:], logger.propagate, logger.level) for logger in loggers]
    cli_error(capsys, ["export", tmp_path / "no-run", "--out", tmp_path / "out"])
    assert [(lg.handlers[:], lg.propagate, lg.level) for lg in loggers] == before
    with caplog.at_level(logging.INFO, logger="transformer_zoo.export"):
        logging.getLogger("transformer_zoo.export").info("a later stage")
    assert "a later stage" in caplog.text
    assert "transformer-zoo" not in capsys.readouterr().err
