"""`transformer-zoo train` and `evaluate`: bad input ends in one error line, exit code 2.

(The commands on a trained run are tested in tests/train/test_fit.py, with its runs.)"""

import pytest

from tests.helpers import cli_error
from transformer_zoo.run_directory import RunConfig, save_run_config


def _error(capsys, argv) -> str:
    return cli_error(capsys, argv)


TRAIN = ["train", "--family", "encoder-decoder"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train"], "the following arguments are required: --family"),
        (["train", "--family", "rnn"], "invalid choice: 'rnn'"),
        ([*TRAIN, "--epochs", "two"], "invalid int value: 'two'"),
        ([*TRAIN, "--epochs", "0"], "`epochs` must be a positive integer"),
        ([*TRAIN, "--batch-size", "-4"], "`batch_size` must be a positive integer"),
        ([*TRAIN, "--dropout", "1.5"], "`dropout` must be in [0, 1)"),
        ([*TRAIN, "--time-budget", "nan"], "--time-budget: expected a positive number"),
        ([*TRAIN, "--precision", "int8"], "invalid choice: 'int8'"),
        ([*TRAIN, "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
        ([*TRAIN, "--pretrain-steps", "5"], "applies to the encoder-only family"),
        (  # was clamped to the peak, silently
            [*TRAIN, "--learning-rate", "1e-3", "--min-learning-rate", "5e-3"],
            "`min_learning_rate` (0.005) is above the peak `learning_rate` (0.001)",
        ),
        (["evaluate"], "the following arguments are required: run_dir"),
    ],
)
def test_bad_flags_give_one_line_and_exit_code_2(capsys, argv, message):
    assert message in _error(capsys, argv)


@pytest.mark.parametrize(
    "argv, line",
    [
        (["embed", "--model", "m", "--pairs"], "transformer-zoo embed: error: unrecognized arguments: --pairs"),
        ([*TRAIN, "--no-such-flag"], "transformer-zoo train: error: unrecognized arguments: --no-such-flag"),
        (["--bogus", "describe", "tiny"], "transformer-zoo: error: unrecognized arguments: --bogus"),
    ],
)  # fmt: skip
def test_an_unknown_flag_is_told_by_the_command_it_was_given_to(capsys, argv, line):
    """The top-level parser said `transformer-zoo: error:` for a command's unknown flag."""
    assert _error(capsys, argv) == line


def test_unknown_preset_gives_one_line(capsys, tmp_path):
    line = _error(capsys, [*TRAIN, "--preset", "huge", "--out", str(tmp_path / "r")])
    assert "invalid choice: 'huge'" in line and "tiny_encoder_decoder" in line
    line = _error(capsys, [*TRAIN, "--preset", "gpt2_small", "--out", str(tmp_path / "r")])
    assert "is a decoder-only model" in line


def test_unreadable_or_malformed_data_gives_one_line(capsys, tmp_path):
    missing = tmp_path / "missing.tsv"
    line = _error(capsys, [*TRAIN, "--data", str(missing), "--out", str(tmp_path / "r")])
    assert str(missing) in line and "cannot read" in line
    bad = tmp_path / "bad.tsv"
    bad.write_text("one\tuno\ntwo without a tab\n", encoding="utf-8")
    line = _error(capsys, [*TRAIN, "--data", str(bad), "--out", str(tmp_path / "r")])
    assert f"{bad}:2:" in line
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    line = _error(
        capsys,
        ["train", "--family", "decoder-only", "--data", str(empty), "--out", str(tmp_path / "r")],
    )
    assert "holds no examples" in line
    line = _error(capsys, [*TRAIN, "--data", "builtin:nope", "--out", str(tmp_path / "r")])
    assert "unknown built-in dataset" in line


def test_an_out_holding_something_else_gives_one_line(capsys, tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert "is a file" in _error(capsys, [*TRAIN, "--out", str(a_file)])
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    assert "holds no run" in _error(capsys, [*TRAIN, "--out", str(other)])
    exported = tmp_path / "exported"
    save_run_config(exported, RunConfig("encoder-decoder", "tiny", "translation"))
    assert "did not write" in _error(capsys, [*TRAIN, "--out", str(exported)])
    previous = tmp_path / "previous"
    settings = {"family": "encoder-decoder", "preset": "tiny", "epochs": 9}
    save_run_config(
        previous, RunConfig("encoder-decoder", "tiny", "translation", extra={"train": settings})
    )
    line = _error(capsys, [*TRAIN, "--out", str(previous), "--epochs", "2"])
    assert "holds a different run" in line and "epochs=9 there, 2 now" in line


def test_multiworker_without_tf_config_gives_one_line(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    argv = [*TRAIN, "--strategy", "multiworker", "--out", str(tmp_path / "r")]
    assert "needs TF_CONFIG" in _error(capsys, argv)


def test_evaluate_of_a_directory_that_is_not_a_run_gives_one_line(capsys, tmp_path):
    assert "no such directory" in _error(capsys, ["evaluate", str(tmp_path / "none")])
    assert "holds no config.json" in _error(capsys, ["evaluate", str(tmp_path)])


@pytest.mark.parametrize(
    "arguments, message",
    [
        ([*TRAIN[1:], "--set", "num_heads=3"], "The model width must be divisible by the number of heads"),
        ([*TRAIN[1:], "--set", "num_layers=0"], "`num_layers` must be a positive integer"),
        ([*TRAIN[1:], "--set", "activation=bogus"], "`activation` must be one of"),
        ([*TRAIN[1:], "--set", "dropout=1.5"], "`dropout` must be in [0, 1)"),
        ([*TRAIN[1:], "--set", "max_length=1"], "`max_length` must be an integer ≥ 2, room for a source's text"),
        # A traceback after the data was read: "`max_length` must be an integer ≥ 3".
        (["--family", "encoder-only", "--set", "max_length=1"], "room for a text's `[CLS]`"),
        # Failed after training two tokenizers ("Three-way tying needs one vocabulary"),
        # or, at equal sizes, tied two different vocabularies row by row.
        (
            [*TRAIN[1:], "--target-vocabulary-size", "30", "--set", "tie_weights=all"],
            "drop `target_vocabulary_size`, or set tie_weights='decoder'",
        ),
    ],
)  # fmt: skip
def test_a_bad_model_setting_is_one_line_before_anything_is_read_or_written(
    capsys, tmp_path, monkeypatch, arguments, message
):
    """It was a 34-line traceback, exit 1, after the data and tokenizers were processed."""
    from transformer_zoo.train import prepared

    def no_data(*args, **kwargs):
        raise AssertionError("the data was read before the model settings were checked")

    monkeypatch.setattr(prepared, "load_task", no_data)
    out = tmp_path / "run"
    assert message in _error(capsys, ["train", *arguments, "--out", out])
    assert not out.exists()


def test_a_word_tokenizer_for_a_token_stream_is_refused_before_the_data_is_read(
    capsys, tmp_path, monkeypatch
):
    """SentencePiece's word model has no newline piece: every line end read as <unk>."""
    from transformer_zoo.train import prepared

    def no_data(*args, **kwargs):
        raise AssertionError("the data was read before the tokenizer was checked")

    monkeypatch.setattr(prepared, "load_task", no_data)
    text = tmp_path / "text.txt"
    text.write_text("the cat sat\non the mat\n" * 50)
    out = tmp_path / "run"
    argv = ["train", "--family", "decoder-only", "--data", text, "--tokenizer", "word"]
    assert "--windows lines" in _error(capsys, [*argv, "--out", out])
    assert not out.exists()


def test_help_gives_the_defaults_the_run_uses(capsys):
    """It said `files: paper-adam` and `files: 400` where a run on files used
    adamw-cosine and a warmup of 10% of its steps."""
    from transformer_zoo.cli import main
    from transformer_zoo.train.config import USER_DEFAULTS, WARMUP_SHARE

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "paper-adam;" not in text and "files: 400" not in text
    assert f"--optimizer {{paper-adam,adamw-cosine}} default {USER_DEFAULTS['optimizer']}" in text
    assert f"files: {WARMUP_SHARE:.0%} of the planned steps" in text
    assert f"default {USER_DEFAULTS['dropout']}" in text


@pytest.mark.parametrize(
    ("config", "what"),
    [
        (
            RunConfig(
                "encoder-only", "tiny", "classification", label_names=["a"], data="/d/pairs.tsv"
            ),
            "a classifier",
        ),
        (RunConfig("decoder-only", "tiny", "language-model", data="/data/text.txt"), "plain text"),
        (RunConfig("decoder-only", "gpt2_small", "language-model"), "plain text"),  # imported
    ],
)
@pytest.mark.parametrize(
    "search", [["--strategy", "sample", "--seed", "1"], ["--strategy", "beam", "--num-beams", "2"]]
)
def test_evaluate_refuses_a_search_strategy_for_a_run_that_decodes_nothing(
    capsys, tmp_path, config, what, search
):
    """A classifier and a language model of plain text were scored as greedily, with a
    `search` entry in the JSON line and metrics.json left as it was."""
    save_run_config(tmp_path, config)
    line = _error(capsys, ["evaluate", tmp_path, *search])
    assert f"--strategy {search[1]} decodes outputs, and {tmp_path} decodes none (" in line
    assert what in line and line.endswith("drop --strategy")


@pytest.mark.parametrize(
    "config",
    [
        RunConfig("encoder-decoder", "tiny", "translation", data="/data/pairs.tsv"),
        RunConfig("decoder-only", "tiny", "language-model", data="builtin:dates-zh"),
    ],
)
def test_evaluate_takes_a_search_strategy_for_a_run_that_decodes(capsys, tmp_path, config):
    save_run_config(tmp_path, config)  # no model: refused for that, later
    line = _error(capsys, ["evaluate", tmp_path, "--strategy", "beam", "--num-beams", "2"])
    assert "decodes none" not in line
