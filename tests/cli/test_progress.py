"""The serving commands over many inputs: on a terminal a bar on stderr counts the inputs
done, a batch at a time; it changes no output, and nothing is drawn where stderr is not a
terminal (a pipe, a log file)."""

from __future__ import annotations

import sys

import pytest
from tqdm import tqdm

from transformer_zoo import progress
from transformer_zoo.cli import main

TEXTS = ["the cat", "dogs", "March 5, 2021", "a b c", "it is late"]


class Eager(tqdm):
    """The bar, drawn at every update rather than at most ten times a second."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **{**kwargs, "mininterval": 0, "miniters": 1})


def _argv(family_artifacts, command: str) -> list[str]:
    family = {"generate": "decoder-only", "translate": "encoder-decoder"}.get(
        command, "encoder-only"
    )
    art = family_artifacts(family)
    argv = [command, *TEXTS, "--model", str(art.export_dir), "--batch-size", "2"]
    return argv + (["--max-new-tokens", "4"] if command == "generate" else [])


@pytest.mark.parametrize("command", ["generate", "translate", "embed", "classify"])
def test_a_terminal_sees_the_inputs_counted_and_the_output_is_unchanged(
    family_artifacts, capsys, monkeypatch, command
):
    argv = _argv(family_artifacts, command)
    if command == "classify" and family_artifacts("encoder-only").config.task != "classification":
        pytest.skip("the encoder-only artifact is not a classifier")
    capsys.readouterr()  # the export's logs, where this test is the first to build it
    assert main(argv) == 0
    plain_out, plain_err = capsys.readouterr()
    assert "2/5" not in plain_err  # captured stderr is no terminal: no bar

    monkeypatch.setattr(progress, "tqdm", Eager)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert out == plain_out
    verb = {"generate": "generating", "translate": "translating"}.get(command)
    verb = verb or {"embed": "embedding", "classify": "classifying"}[command]
    shown = err.split(f"{verb}:", 1)[1]
    assert "0/5" in shown and "5/5" in shown and ("2/5" in shown or "4/5" in shown)


def test_the_python_api_draws_no_bar_unless_asked(family_artifacts, capsys, monkeypatch):
    from transformer_zoo.serving import load_onnx

    served = load_onnx(family_artifacts("decoder-only").export_dir)
    capsys.readouterr()
    monkeypatch.setattr(progress, "tqdm", Eager)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    quiet = served.generate(TEXTS, 3, batch_size=2)
    assert capsys.readouterr().err == ""  # a library call (the server's too) stays quiet
    shown = served.generate(TEXTS, 3, batch_size=2, progress=True)
    assert shown == quiet and "5/5" in capsys.readouterr().err
