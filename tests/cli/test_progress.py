"""The serving commands over many inputs: they run a chunk of batches at a time and write
each chunk's lines when it is done, so an interrupted command keeps them; on a terminal a
bar on stderr counts the inputs done; bad input anywhere is refused before any output."""

from __future__ import annotations

import sys

import pytest
from tqdm import tqdm

from transformer_zoo import progress
from transformer_zoo.cli import main
from transformer_zoo.cli import serving_loop as commands
from transformer_zoo.serving.served_model import ServedModel

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
    monkeypatch.setattr(commands, "CHUNK_BATCHES", 1)  # chunks of 2, 2 and 1 inputs
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


@pytest.mark.parametrize(
    "command, call", [("generate", "generate_completions"), ("embed", "embed")]
)
def test_an_interrupted_command_keeps_the_lines_of_the_chunks_done(
    family_artifacts, capsys, monkeypatch, command, call
):
    argv = _argv(family_artifacts, command)
    assert main(argv) == 0
    whole = capsys.readouterr().out.splitlines()
    assert len(whole) == len(TEXTS)

    monkeypatch.setattr(commands, "CHUNK_BATCHES", 1)
    method = getattr(ServedModel, call)
    calls = []

    def interrupted_on_the_second_chunk(self, texts, *args, **kwargs):
        calls.append(texts)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return method(self, texts, *args, **kwargs)

    monkeypatch.setattr(ServedModel, call, interrupted_on_the_second_chunk)
    assert main(argv) == 130
    out, err = capsys.readouterr()
    assert calls == [TEXTS[:2], TEXTS[2:4]]
    assert out.splitlines() == whole[:2]  # the first chunk's lines, as a whole run gives them
    assert "interrupted" in err


def test_bad_input_in_a_later_chunk_is_refused_before_any_output(
    family_artifacts, capsys, monkeypatch
):
    monkeypatch.setattr(commands, "CHUNK_BATCHES", 1)
    art = family_artifacts("decoder-only")
    long_prompt = " ".join(["the cat"] * 200)
    argv = ["generate", *TEXTS, long_prompt, "--model", str(art.export_dir)]
    code = main(argv + ["--batch-size", "2"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert "input 6:" in err and "prompt" in err


@pytest.mark.parametrize("command", ["embed", "classify"])
def test_inputs_cut_to_the_context_are_numbered_over_the_whole_input(
    family_artifacts, capsys, monkeypatch, command
):
    """Chunk by chunk, each chunk's warning numbered its inputs from 1 within it."""
    art = family_artifacts("encoder-only")
    if command == "classify" and art.config.task != "classification":
        pytest.skip("the encoder-only artifact is not a classifier")
    monkeypatch.setattr(commands, "CHUNK_BATCHES", 1)
    texts = list(TEXTS)
    texts[3] = " ".join(["the cat sat on the mat"] * 60)
    argv = [command, *texts, "--model", str(art.export_dir), "--batch-size", "2"]
    capsys.readouterr()
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert err.count("longer than the model's") == 1, err
    assert "1 of 5 inputs" in err and "(inputs 4)" in err


@pytest.mark.parametrize("command", ["generate", "translate"])
def test_blank_lines_alone_are_answered_by_empty_lines(family_artifacts, capsys, command):
    """The check of every input before any chunk ran on no input at all and refused it."""
    argv = _argv(family_artifacts, command)
    argv = [argv[0], "", " ", *argv[1 + len(TEXTS) :]]
    assert main(argv) == 0
    assert capsys.readouterr().out == "\n\n"
