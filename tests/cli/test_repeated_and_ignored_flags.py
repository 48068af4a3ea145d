"""Flags a user gives twice, or beside a flag that overrides them, at the parser and in
the first lines of the handlers: nothing a user wrote is dropped without a word (rnew's
findings 2 and 8)."""

import pytest

from tests.helpers import cli_error
from transformer_zoo.cli import build_parser, main


def test_a_repeated_set_keeps_every_pair():
    """`--set num_layers=1 --set hidden_dim=64` recorded only hidden_dim."""
    argv = ["train", "--family", "decoder-only", "--set", "num_layers=1"]
    args = build_parser().parse_args([*argv, "--set", "hidden_dim=64", "dropout=0.1"])
    assert args.overrides == ["num_layers=1", "hidden_dim=64", "dropout=0.1"]
    assert build_parser().parse_args(["train", "--family", "decoder-only"]).overrides is None


def test_a_repeated_quantize_keeps_every_weight_type():
    """`export --quantize int8 --quantize int4` wrote only the int4 copy."""
    argv = ["export", "run", "--out", "out", "--quantize", "int8", "--quantize", "int4"]
    args = build_parser().parse_args(argv)
    assert args.quantize == ["int8", "int4"]


def test_a_weight_type_named_twice_is_quantized_once(monkeypatch, tmp_path, capsys):
    import transformer_zoo.export.run_export as run_export

    calls = []
    monkeypatch.setattr(run_export, "export_run", lambda *a, **options: calls.append(options))
    argv = ["export", tmp_path, "--out", tmp_path / "out", "--quantize", "int8", "int4"]
    assert main([str(a) for a in [*argv, "--quantize", "int8"]]) == 0
    assert calls[0]["quantize"] == ["int8", "int4"]


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--output", "vectors.txt"], "--output {tmp}/vectors.txt: embed writes a NumPy .npy file"),
        (["--output", "vectors"], "--output {tmp}/vectors: embed writes a NumPy .npy file"),
        (
            ["--output", "vectors.npy", "--format", "jsonl"],
            "--format jsonl formats the printed lines; --output writes one .npy array instead",
        ),
    ],
)
def test_embed_output_refuses_a_name_or_format_it_would_not_honour(
    tmp_path, capsys, flags, message
):
    """`--output o.txt` wrote NumPy's binary into o.txt, and `--format jsonl --output
    o.npy` wrote .npy, the format ignored; both are refused before any model loads (the
    model directory here does not exist)."""
    flags = [str(tmp_path / f) if f.startswith("vectors") else f for f in flags]
    argv = ["embed", "x", "--model", tmp_path / "no-model", *flags]
    line = cli_error(capsys, argv)
    assert line.startswith("transformer-zoo embed: error: ")
    assert message.format(tmp=tmp_path) in line
    assert not list(tmp_path.iterdir())


def test_embed_output_takes_an_npy_name_in_any_case(tmp_path, capsys):
    """What passes the checks goes on to load the model (here: no such directory)."""
    for name in ("vectors.npy", "VECTORS.NPY"):
        argv = ["embed", "x", "--model", tmp_path / "no-model", "--output", tmp_path / name]
        assert "no-model" in cli_error(capsys, argv)
