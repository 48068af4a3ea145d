"""What a new user hit on their own files (issue 16), each held at the command line."""

import io
import json
import os
import shutil
import stat
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers import cli_error
from transformer_zoo.cli import main


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow  # a fresh process importing TensorFlow and a run: 25 s
def test_attention_command_works_in_a_fresh_process(trained_runs, tmp_path):
    """It crashed with "Could not locate class 'EncoderDecoder'": nothing had imported the
    model classes in a process that only ran this command."""
    run_dir = trained_runs["encoder-decoder"].run_dir
    command = [sys.executable, "-m", "transformer_zoo.cli", "attention", run_dir]
    command += ["--text", "March 5, 2021", "--out", str(tmp_path)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "attention.png").is_file() and (tmp_path / "causal_mask.png").is_file()
    assert "Traceback" not in result.stderr


@pytest.mark.slow  # a fresh process importing TensorFlow: 15 s
def test_a_command_prints_no_tensorflow_start_up_lines():
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    command = [sys.executable, "-m", "transformer_zoo.cli", "describe", "tiny"]
    result = subprocess.run(
        [*command, "--family", "decoder-only"], capture_output=True, text=True, timeout=300, env=env
    )
    assert result.returncode == 0 and result.stderr == "", result.stderr
    verbose = [sys.executable, "-m", "transformer_zoo.cli", "--verbose", "describe", "minilm_l6"]
    assert subprocess.run(verbose, capture_output=True, text=True, timeout=300, env=env).stderr


def test_files_the_project_writes_are_readable_by_others(trained_runs, family_artifacts):
    """Exported and written files were mode 0600 (written through mkstemp)."""
    umask = os.umask(0)
    os.umask(umask)
    expected = 0o666 & ~umask
    for directory in (
        trained_runs["encoder-decoder"].run_dir,
        family_artifacts("encoder-decoder").export_dir,
    ):
        for root, _, files in os.walk(directory):
            for name in files:
                mode = stat.S_IMODE(os.stat(os.path.join(root, name)).st_mode)
                assert mode & expected == expected, (os.path.join(root, name), oct(mode))


def test_a_damaged_model_is_named_damaged_and_a_finished_run_is_not_taken_as_done(
    trained_runs, tmp_path, capsys
):
    run_dir = tmp_path / "run"
    shutil.copytree(trained_runs["encoder-decoder"].run_dir, run_dir)
    size = (run_dir / "model.keras").stat().st_size
    with open(run_dir / "model.keras", "r+b") as file:
        file.truncate(size // 2)  # a copy cut short
    line = cli_error(capsys, ["generate", "x", "--model", str(run_dir), "--engine", "keras"])
    assert "is damaged" in line and "File not found" not in line
    from tests.artifacts import trained_run_flags

    argv = ["train", "--family", "encoder-decoder", "--out", str(run_dir), *trained_run_flags()]
    line = cli_error(capsys, argv)
    assert "finished, but" in line and "is damaged" in line


def test_an_over_long_input_line_is_named_by_its_line(family_artifacts, tmp_path, capsys):
    art = family_artifacts("encoder-decoder", saved_model=False)
    lines = ["March 5, 2021", " ".join(["the cat sat on the mat"] * 20), "dogs"]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    line = cli_error(
        capsys, ["translate", "--model", art.export_dir, "--input", tmp_path / "in.txt"]
    )
    assert "line 2: the source is" in line and "longer than the model's 32" in line
    assert "source_token_ids" not in line


def test_embed_says_how_many_inputs_it_cut(family_artifacts, capsys):
    art = family_artifacts("encoder-only", saved_model=False)
    long = " ".join(["the cat sat on the mat"] * 20)
    code, out, err = _run(capsys, "embed", "dogs", long, "--model", art.export_dir)
    assert code == 0 and len(out.splitlines()) == 2
    assert "warning: 1 of 2 inputs were longer than the model's 32 tokens" in err


def test_blank_lines_give_empty_outputs_without_running_the_model(
    family_artifacts, tmp_path, capsys
):
    art = family_artifacts("encoder-decoder", saved_model=False)
    (tmp_path / "in.txt").write_text("dogs\n\n   \nthe cat\n", encoding="utf-8")
    code, out, _ = _run(
        capsys,
        "translate",
        "--model",
        art.export_dir,
        "--input",
        tmp_path / "in.txt",
        "--max-new-tokens",
        4,
    )
    outputs = out.split("\n")[:-1]
    assert code == 0 and len(outputs) == 4 and outputs[1] == outputs[2] == ""


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--top-k", "5"], "greedy strategy takes no top_k"),
        (["--temperature", "0.7", "--strategy", "beam"], "beam strategy takes no temperature"),
        (["--early-stopping", "true"], "greedy strategy takes no early_stopping"),
        (["--strategy", "beam", "--early-stopping", "maybe"], "expected true, false or never"),
    ],
)
def test_a_search_flag_of_another_strategy_is_refused(family_artifacts, capsys, flags, message):
    art = family_artifacts("decoder-only", saved_model=False)
    assert message in cli_error(capsys, ["generate", "x", "--model", art.export_dir, *flags])


def test_more_threads_than_cores_are_bounded_with_a_message(family_artifacts, capsys):
    art = family_artifacts("decoder-only", saved_model=False)
    code, out, err = _run(
        capsys, "generate", "x", "--model", art.export_dir, "--threads", 1000, "--max-new-tokens", 2
    )
    assert code == 0 and out.strip() != "" or out == "\n"
    assert f"using {os.cpu_count()}" in err


def test_a_translation_file_is_refused_as_classification_data(tmp_path, capsys):
    rows = [f"{n} apples\t{n}" for n in range(300)]
    (tmp_path / "pairs.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    argv = [
        "train",
        "--family",
        "encoder-only",
        "--data",
        tmp_path / "pairs.tsv",
        "--out",
        tmp_path / "run",
    ]
    line = cli_error(capsys, [str(a) for a in argv])
    assert "that is text, not class labels" in line and "--family encoder-decoder" in line


def test_ctrl_c_during_training_is_one_line_and_exit_code_130(monkeypatch, tmp_path, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("transformer_zoo.train.trainer.train", interrupted)
    code = main(
        [
            "train",
            "--family",
            "encoder-decoder",
            "--max-examples",
            "32",
            "--out",
            str(tmp_path / "r"),
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 130
    assert err[-1] == (
        "transformer-zoo train: interrupted; rerun the same command to start again (nothing "
        "was backed up yet)"
    )
    assert "Traceback" not in "\n".join(err)


def test_the_help_says_what_the_flags_take(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "stop model.fit after SECONDS (compilation included;" in text
    assert "minilm_l6" in text and "tiny_encoder_decoder" in text  # the presets are listed


def test_describe_takes_the_family_of_tiny(capsys):
    code, out, _ = _run(capsys, "describe", "tiny", "--family", "encoder-only")
    assert code == 0 and '"preset": "tiny_encoder_only"' in out


def test_messages_use_the_right_article(family_artifacts, capsys):
    art = family_artifacts("encoder-decoder", saved_model=False)
    line = cli_error(capsys, ["generate", "x", "--model", art.export_dir])
    assert "needs a decoder-only model" in line
    np.testing.assert_equal(
        "an encoder-only" in cli_error(capsys, ["embed", "x", "--model", art.export_dir]), True
    )


@pytest.mark.slow  # about 3 minutes of training
def test_the_default_recipe_learns_a_small_file_of_the_users(tmp_path):
    """A 3,000-line TSV (number words → digits) with no flags but the family: the old
    defaults (10 epochs, the paper's warmup of 400 of 230 steps) reached 63% exact match."""
    import random

    from transformer_zoo.data.builtin.english import english_number

    rng = random.Random(0)
    numbers = rng.sample(range(100_000), 3000)
    rows = [f"{english_number(n)}\t{n}" for n in numbers]
    (tmp_path / "numbers.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    command = [sys.executable, "-m", "transformer_zoo.cli", "train", "--family", "encoder-decoder"]
    command += ["--data", str(tmp_path / "numbers.tsv"), "--out", str(tmp_path / "run")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "Chosen for the data" in result.stdout and "adamw-cosine" in result.stdout
    import json

    test = json.loads((tmp_path / "run" / "metrics.json").read_text())["test"]
    assert test["exact_match"]["all"] >= 0.95, test["exact_match"]
    assert test["chrf"]["all"] > 90 and test["bleu_tokenize"] == "13a"


@pytest.mark.slow  # a run killed by Ctrl-C, then resumed: about 1 minute
def test_ctrl_c_stops_a_run_in_one_line_and_the_same_command_resumes_it(tmp_path):
    import signal
    import time

    from transformer_zoo.train.callbacks.backup import backup_epoch

    out = tmp_path / "run"
    command = [sys.executable, "-m", "transformer_zoo.cli", "train", "--family", "encoder-decoder"]
    command += ["--max-examples", "128", "--batch-size", "16", "--steps-per-execution", "1"]
    # Enough epochs that the run is still training when the signal comes, even on a busy
    # machine; resuming runs the few seconds left.
    command += ["--epochs", "16", "--no-evaluate", "--out", str(out)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # The child starts with Ctrl-C's default action whatever its parent's is (an ignored
    # SIGINT is inherited across exec, and then Python installs no KeyboardInterrupt).
    run = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    deadline = time.monotonic() + 600
    while (
        (backup_epoch(out / "backup") or 0) < 1
        and run.poll() is None
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    run.send_signal(signal.SIGINT)
    finished_first = run.poll() is not None
    out_text, err = run.communicate(timeout=300)
    assert not finished_first, "the run ended before its first backup:\n" + out_text[-2000:]
    assert run.returncode == 130, out_text[-1500:] + err[-1500:]
    lines = err.strip().splitlines()
    assert "Traceback" not in err
    assert lines[-1].startswith(
        "transformer-zoo train: interrupted; rerun the same command to resume from epoch "
    )
    leftovers = [
        n for _, dirs, files in os.walk(out) for n in dirs + files if n.startswith(".partial")
    ]
    assert not leftovers
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "from its backup at epoch" in again.stdout


@pytest.mark.slow  # an export in a fresh process: 20 s
def test_export_shows_each_stage_once(trained_runs, tmp_path):
    command = [sys.executable, "-m", "transformer_zoo.cli", "export"]
    command += [trained_runs["encoder-decoder"].run_dir, "--format", "onnx", "--out", str(tmp_path)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("writing the fused graphs") == 1, result.stderr
    for graph in ("encoder_model.onnx", "decoder_model.onnx"):
        assert result.stderr.count(f"{graph}: ") == 1, result.stderr  # nodes, size, difference


# Issue 18: the user-data path, held at the command line. A bad file ends in one line
# naming it, exit code 2, and nothing written.


def _train_error(capsys, tmp_path, family, *flags) -> str:
    out = tmp_path / "run"
    line = cli_error(capsys, ["train", "--family", family, *flags, "--out", out])
    assert not out.exists()
    return line


@pytest.mark.parametrize(
    "texts, flags, message",
    [
        ({"a.txt": 150}, [], "a.txt: the training text (its first 90%) holds 135 tokens"),
        ({"a.txt": 1000}, [], "a.txt: the validation text (its last 10%) holds 100 tokens"),
        ({"a.txt": 3000, "v.txt": 100}, ["--valid"], "v.txt: the validation text holds 100"),
        ({"a.txt": 3000, "t.txt": 100}, ["--test"], "t.txt: the test text holds 100 tokens"),
    ],
)
def test_a_text_shorter_than_one_window_is_refused_before_anything_is_written(
    tmp_path, capsys, texts, flags, message
):
    """It crashed with a traceback in the pipeline, or after the whole run in its test
    evaluation, and left a run directory that the next run resumed."""
    paths = []
    for name, length in texts.items():
        (tmp_path / name).write_text("ab cd" * (length // 5), encoding="utf-8")
        paths.append(tmp_path / name)
    argv = ["--data", paths[0], *flags, *paths[1:], "--tokenizer", "char"]
    line = _train_error(capsys, tmp_path, "decoder-only", *argv)
    assert message in line and "fewer than one window of 256, the model's context" in line


def test_a_stream_run_evaluates_from_another_directory_and_names_a_short_test_file(
    tmp_path, capsys, monkeypatch
):
    """Relative --data paths were stored as given: `evaluate RUN` failed elsewhere. A data
    file changed since training is refused, not split anew."""
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    (tmp_path / "work" / "corpus.txt").write_text("the cat sat on the mat. " * 40, "utf-8")
    small = ["num_layers=1", "num_heads=2", "hidden_dim=16", "intermediate_dim=32"]
    code = main([
        "train", "--family", "decoder-only", "--data", "corpus.txt", "--tokenizer", "char",
        "--set", *small, "max_length=16", "--steps", "2", "--batch-size", "4",
        "--precision", "float32", "--out", "run", "--verbose", "0",
    ])  # fmt: skip
    assert code == 0
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["evaluate", "work/run"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["examples"] == 6  # windows
    (tmp_path / "short.txt").write_text("the cat", encoding="utf-8")
    line = cli_error(capsys, ["evaluate", "work/run", "--test", "short.txt"])
    assert line.endswith(
        "error: short.txt: the test text holds 7 tokens, fewer than one window of 16, the "
        "model's context (a longer text, or a model trained with a shorter context, --set "
        "max_length=N, is needed)"
    )
    # The splits come from the file's contents: changed, they would hold other examples.
    with open(tmp_path / "work" / "corpus.txt", "a", encoding="utf-8") as corpus:
        corpus.write("a new line. ")
    line = cli_error(capsys, ["evaluate", "work/run"])
    assert "corpus.txt (the data file) has changed since this run trained on it" in line
    assert main(["evaluate", "work/run", "--test", "work/corpus.txt"]) == 0  # a file to score
    # Moved away, the file is named as the run's data, with the ways on (it was a bare
    # "cannot read the file (No such file or directory)").
    (tmp_path / "work" / "corpus.txt").rename(tmp_path / "corpus.txt")
    line = cli_error(capsys, ["evaluate", "work/run"])
    assert "corpus.txt (the data file this run trained on, as its config.json records" in line
    assert "give its new place with --data FILE, or put it back at that path" in line
    line = cli_error(capsys, ["evaluate", "work/run", "--data", "corpus.txt"])  # changed above
    assert "corpus.txt is not the data file this run trained on" in line


def test_a_tokenizer_that_cannot_be_trained_is_one_line(tmp_path, capsys, monkeypatch):
    import sentencepiece

    def fail(**kwargs):
        raise RuntimeError("Internal: src/trainer_interface.cc(661) [!sentences_.empty()]")

    monkeypatch.setattr(sentencepiece.SentencePieceTrainer, "train", fail)
    (tmp_path / "a.txt").write_text("some text\n" * 100, encoding="utf-8")
    line = _train_error(capsys, tmp_path, "decoder-only", "--data", tmp_path / "a.txt")
    assert "SentencePiece cannot train a tokenizer on this text: Internal:" in line


ROWS = [f"{'pos' if i % 3 else 'neg'}\ttext number {i}" for i in range(40)]


@pytest.mark.parametrize(
    "files, flags, message",
    [
        ({"a.tsv": ["label\ttext", *ROWS]}, [], "a.tsv:1: this looks like a header line"),
        (
            {"a.tsv": ["sentence\tlabel"] + [f"sentence {i}\t{i % 2}" for i in range(150)]},
            [],
            "that is text, not class labels. A TSV with a header line names the columns to "
            "read with --columns sentence,label",
        ),
        ({"a.tsv": [f"pos\ttext {i}" for i in range(20)]}, [], "a classifier needs 2 labels"),
        (
            {"a.tsv": ROWS, "t.tsv": ["pos\tfine", "1\tgood"]},
            ["--test"],
            "t.tsv:2: label '1' does not occur in the training data (labels: 'neg', 'pos')",
        ),
        (
            {"a.tsv": ROWS, "v.tsv": ["CAT\tK AE T", "DOG\tD AO G"]},
            ["--valid"],
            "v.tsv:1: label 'CAT' does not occur in the training data",
        ),
        (
            {"a.tsv": ["sentence\tlabel"]},
            ["--columns", "sentence,label"],
            "a.tsv: the file holds a header line and no rows",
        ),
    ],
)
def test_a_bad_classification_file_is_named_before_anything_is_written(
    tmp_path, capsys, files, flags, message
):
    """A header trained as an example, labels only a test file held became classes (0%
    test accuracy), one label trained a one-class model, a --valid file of another format
    was blamed on the --data file."""
    paths = []
    for name, lines in files.items():
        (tmp_path / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
        paths.append(tmp_path / name)
    flags = [*flags[:1], *paths[1:], *flags[1:]]
    line = _train_error(capsys, tmp_path, "encoder-only", "--data", paths[0], *flags)
    assert message in line


def test_inference_inputs_drop_a_byte_order_mark(family_artifacts, tmp_path, capsys):
    """Training dropped it; generate kept it as the first input's first character."""
    art = family_artifacts("decoder-only", saved_model=False)
    outputs = []
    for name, data in (("bom.txt", b"\xef\xbb\xbfMarch 5\n"), ("plain.txt", b"March 5\n")):
        (tmp_path / name).write_bytes(data)
        code, out, _ = _run(
            capsys, "generate", "--model", art.export_dir, "--input", tmp_path / name,
            "--max-new-tokens", 4, "--format", "jsonl",
        )  # fmt: skip
        assert code == 0
        outputs.append(json.loads(out))
    assert outputs[0] == outputs[1] and outputs[0]["input"] == "March 5"


@pytest.mark.parametrize("command", ["generate", "classify"])
def test_an_undecodable_input_line_is_named_by_file_and_line(
    family_artifacts, tmp_path, capsys, monkeypatch, command
):
    """It said `'utf-8' codec can't decode byte 0xe9 in position 8`, an offset in the file."""
    art = family_artifacts(
        "decoder-only" if command == "generate" else "encoder-only", saved_model=False
    )
    (tmp_path / "in.txt").write_bytes(b"fine\ncaf\xe9\n")
    path = tmp_path / "in.txt"
    line = cli_error(capsys, [command, "--model", art.export_dir, "--input", path])
    assert line.endswith(f"error: {path}:2: the line is not valid UTF-8")
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"fine\ncaf\xe9\n")))
    line = cli_error(capsys, [command, "--model", art.export_dir])
    assert line.endswith("error: <stdin>:2: the line is not valid UTF-8")
    (tmp_path / "empty.txt").write_bytes(b"")
    line = cli_error(
        capsys, [command, "--model", art.export_dir, "--input", tmp_path / "empty.txt"]
    )
    assert line.endswith(f"error: {tmp_path / 'empty.txt'}: the input holds no line")


def test_a_pair_without_a_tab_is_named_by_its_line(family_artifacts, tmp_path, capsys):
    art = family_artifacts("encoder-only", saved_model=False)
    (tmp_path / "pairs.txt").write_text("a\tb\nno tab here\n", encoding="utf-8")
    argv = ["classify", "--pairs", "--model", art.export_dir, "--input", tmp_path / "pairs.txt"]
    assert "error: line 2: --pairs needs 'text<TAB>second text'" in cli_error(capsys, argv)


def test_ctrl_c_that_tensorflow_turns_into_another_error_still_reads_interrupted(
    monkeypatch, capsys
):
    """Ctrl-C while `export` traced its SavedModel came out as `error: in user code:`
    (exit 2) or a SystemError traceback: TensorFlow re-raises the KeyboardInterrupt as
    an error of its own."""
    import signal

    from transformer_zoo.cli import export as export_command

    def traced(args):
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            raise ValueError("in user code:\n\n    File ...") from None

    monkeypatch.setattr(export_command, "_export", traced)
    assert main(["export", "runs/x", "--format", "onnx", "--out", "exports/x"]) == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == "transformer-zoo export: interrupted"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
