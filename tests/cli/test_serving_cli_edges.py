"""What a new user of `transformer-zoo generate|translate|embed|classify` hits at the
edges: a reader that stops early (`| head -1`), Ctrl-C while the results are written,
outputs that hold line breaks, a prompt that leaves no room, an argument that is not
UTF-8, the wrong directory for the engine, and the help text."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest

from tests.helpers import cli_error
from transformer_zoo.cli import main
from transformer_zoo.cli.parsing import (
    SEARCH_FLAGS,
    UsageError,
    add_search_arguments,
    search_from_arguments,
)
from transformer_zoo.generation import BeamSearch, Greedy, Sampling
from transformer_zoo.serving import load_onnx
from transformer_zoo.serving.served_model import ServedModel


def test_a_reader_that_stops_early_ends_the_command_quietly(wordpiece_artifacts, tmp_path):
    """`embed ... | head -1` ended in a BrokenPipeError traceback and exit code 1."""
    (tmp_path / "in.txt").write_text("the cat sat\n" * 3000, encoding="utf-8")
    command = [sys.executable, "-m", "transformer_zoo.cli", "embed"]
    command += ["--model", str(wordpiece_artifacts.export_dir), "--input", str(tmp_path / "in.txt")]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ}
    )
    first = process.stdout.readline()  # 3,000 lines are far more than a pipe holds
    process.stdout.close()
    err = process.stderr.read().decode()
    assert process.wait(timeout=120) == 141, err  # 128 + SIGPIPE, as `yes | head -1`
    assert len(first.split()) == 32 and err == ""


class _InterruptedStdout:
    """A stdout on which Ctrl-C arrives during the second write."""

    def __init__(self):
        self.written = ""
        self.writes = 0

    def write(self, text):
        self.writes += 1
        if self.writes == 2:
            raise KeyboardInterrupt
        self.written += text

    def flush(self):
        pass


def test_ctrl_c_while_writing_leaves_only_whole_lines(family_artifacts, monkeypatch, capsys):
    """`print` wrote a line and its newline in two writes: Ctrl-C between them left half
    a line, which the next output would have continued."""
    stdout = _InterruptedStdout()
    monkeypatch.setattr(sys, "stdout", stdout)
    argv = ["classify", "dogs", "the cat", "--model", family_artifacts("encoder-only").export_dir]
    assert main([str(a) for a in argv]) == 130
    assert "interrupted" in capsys.readouterr().err
    label = load_onnx(family_artifacts("encoder-only").export_dir).classify(["dogs"])[0]
    assert stdout.written == f"{label['label']}\t{label['score']:.4f}\n"


def test_outputs_that_hold_line_breaks_are_said_to(family_artifacts, monkeypatch, capsys):
    """A completion holding a line break (GPT-2's vocabulary has them) took two lines of
    the text output, so output line i no longer answered input line i, silently."""
    real = ServedModel.generate_completions

    def with_line_break(self, prompts, *args, **kwargs):
        completions = real(self, prompts, *args, **kwargs)
        first = completions[0]._replace(text=completions[0].text + "\nmore")
        return [first, *completions[1:]]

    monkeypatch.setattr(ServedModel, "generate_completions", with_line_break)
    export = family_artifacts("decoder-only").export_dir
    argv = ["generate", "the cat", "dogs", "--model", export, "--max-new-tokens", "3"]
    assert main([str(a) for a in argv]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 3
    assert "the outputs of 1 input(s) (1) hold line breaks" in err and "--format jsonl" in err
    assert main([str(a) for a in argv] + ["--format", "jsonl"]) == 0
    out, err = capsys.readouterr()
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["input"] for r in rows] == ["the cat", "dogs"] and err == ""
    assert rows[0]["generated"].endswith("\nmore")


def test_the_line_whose_prompt_leaves_no_room_is_named(family_artifacts, tmp_path, capsys):
    """The error said a prompt did not fit with --max-new-tokens, not which one."""
    export = family_artifacts("decoder-only").export_dir
    lines = ["dogs", "the cat sat on the mat " * 2, "the cat"]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    served = load_onnx(export)
    lengths = [len(ids) for ids in served.prompt_ids(lines)]
    room = served.dims.max_length - max(lengths[0], lengths[2])  # too little for line 2 only
    assert lengths[1] + room > served.dims.max_length
    argv = ["generate", "--model", export, "--input", tmp_path / "in.txt"]
    line = cli_error(capsys, [*argv, "--max-new-tokens", room])
    left = served.dims.max_length - lengths[1]
    assert f"line 2: The prompt ({lengths[1]} tokens) leaves room for {left} new token" in line
    assert line.endswith(f"max_new_tokens={room}.")


@pytest.mark.parametrize("command", ["generate", "embed"])
def test_an_argument_that_is_not_utf8_is_named(family_artifacts, capsys, command):
    """Python reads an argument's undecodable bytes as lone surrogates, which reached the
    tokenizer: a RuntimeError traceback, exit code 1."""
    family = "decoder-only" if command == "generate" else "encoder-only"
    export = family_artifacts(family).export_dir
    line = cli_error(capsys, [command, "dogs", "the \udcff cat", "--model", export])
    assert "input 2: the text is not valid UTF-8" in line


def test_the_wrong_directory_for_the_engine_says_which_engine_fits(family_artifacts, capsys):
    art = family_artifacts("decoder-only")
    line = cli_error(capsys, ["generate", "x", "--model", art.run_dir])
    assert "holds no onnx export" in line and "with the keras engine" in line
    line = cli_error(capsys, ["generate", "x", "--model", art.export_dir, "--engine", "keras"])
    assert "lacks model.keras: it is an export" in line and "reads a run directory" in line


def test_the_help_says_what_each_command_does_with_its_inputs(capsys):
    texts = {}
    for command in ("generate", "translate", "embed", "classify"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        texts[command] = " ".join(capsys.readouterr().out.split())
    assert (
        "the prompt and they must fit the model's context (default 32, or the room a prompt "
        "leaves if less)" in texts["generate"]
    )
    assert "(default: the training target length)" in texts["translate"]
    for command in ("generate", "translate"):
        assert "A blank line is answered by an empty line" in texts[command]
    assert "L2-normalised" in texts["embed"] and "are cut to it" in texts["classify"]
    assert "or a run directory (keras)" in texts["embed"]


@pytest.mark.parametrize(
    "content, lines",
    [
        ("日本\rhello\rcafé\r", ["日本", "hello", "café"]),
        ("\ufeff a \r\n\r\nb\u2028c\x85d\n", [" a ", "", "b\u2028c\x85d"]),
    ],
)
def test_input_lines_end_where_the_training_files_lines_end(tmp_path, content, lines):
    """A lone CR ended a line of training and `evaluate` files, not of --input: three
    inputs were one."""
    import argparse

    from transformer_zoo.cli.serving_loop import read_inputs

    path = tmp_path / "in.txt"
    path.write_bytes(content.encode("utf-8"))
    assert read_inputs(argparse.Namespace(texts=[], input=str(path))) == lines
    path.write_bytes(b"fine\r\xff broken\n")
    with pytest.raises(UsageError, match=rf"^{path}:2: the line is not valid UTF-8$"):
        read_inputs(argparse.Namespace(texts=[], input=str(path)))


SEARCH_CASES = [
    (["--strategy", "beam", "--num-beams", "3"], BeamSearch(num_beams=3)),
    (["--strategy", "beam", "--length-penalty", "0.5"], BeamSearch(length_penalty=0.5)),
    (["--strategy", "beam", "--early-stopping", "true"], BeamSearch(early_stopping=True)),
    (["--strategy", "beam", "--early-stopping", "False"], BeamSearch(early_stopping=False)),
    (["--strategy", "beam", "--early-stopping", "never"], BeamSearch(early_stopping="never")),
    (["--strategy", "sample", "--temperature", "0.7"], Sampling(temperature=0.7)),
    (["--strategy", "sample", "--top-k", "5"], Sampling(top_k=5)),
    (["--strategy", "sample", "--top-p", "0.9"], Sampling(top_p=0.9)),
    (["--strategy", "sample", "--seed", "7"], Sampling(seed=7)),
    (["--forced-eos"], Greedy(forced_eos=True)),
    ([], Greedy()),
]


@pytest.mark.parametrize("argv, expected", SEARCH_CASES)
def test_each_search_flag_gives_the_strategy_built_directly(argv, expected):
    """`--flag value` is the strategy dataclass with that field set to the value, typed as
    the field is (`--top-p 0.9` a float, `--early-stopping false` False, not True)."""
    parser = argparse.ArgumentParser()
    add_search_arguments(parser)
    got = search_from_arguments(parser.parse_args(argv))
    assert got == expected
    assert [type(v) for v in vars(got).values()] == [type(v) for v in vars(expected).values()]


def test_the_search_cases_cover_every_search_flag():
    """Every flag of `SEARCH_FLAGS` is checked above."""
    flags = {a[2:].replace("-", "_") for argv, _ in SEARCH_CASES for a in argv if a[:2] == "--"}
    assert flags - {"strategy"} == set(SEARCH_FLAGS)
