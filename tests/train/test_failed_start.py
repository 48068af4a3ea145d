"""A run that failed before its first backup (issue 18): the same command starts afresh
on the data as it is now, rather than resume with the tokenizer of the data it failed
on; and a run names its files by absolute paths, so it is read from any directory."""

import os

import keras
import pytest

from transformer_zoo import run_directory as rd
from transformer_zoo.text import Tokenizer
from transformer_zoo.train.config import TrainConfig
from transformer_zoo.train.prepared import prepare
from transformer_zoo.train.trainer import train

SMALL = dict(num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32, max_length=16)


class _Crash(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        raise RuntimeError("the machine went down")


def test_a_start_that_failed_before_its_first_backup_trains_a_new_tokenizer(tmp_path):
    data, out = tmp_path / "corpus.txt", tmp_path / "run"
    data.write_text("abc abd abe\n" * 40, encoding="utf-8")
    config = TrainConfig(
        "decoder-only", data=str(data), out=str(out), tokenizer="char", overrides=SMALL,
        steps=2, batch_size=4, steps_per_execution=1, precision="float32", evaluate=False,
    )  # fmt: skip
    with pytest.raises(RuntimeError, match="went down"):
        train(config, callbacks=[_Crash()], verbose=0)
    assert (out / "tokenizer.model").is_file() and not (out / rd.BACKUP_DIR).exists()
    assert rd.load_run_config(out).extra["status"] == "training"

    data.write_text("xyz xyw xyv\n" * 40, encoding="utf-8")  # the data, mended
    prepared = prepare(config)
    assert prepared.state == rd.FRESH
    assert prepared.setup.tokenizer.unk_id not in prepared.setup.tokenizer.encode("xyz")
    train(prepared, verbose=0)
    assert Tokenizer.load(out / "tokenizer.model").proto == prepared.setup.tokenizer.proto
    assert rd.load_run_config(out).extra["status"] == "finished"


def test_the_settings_name_files_by_absolute_paths(tmp_path, monkeypatch):
    """`evaluate RUN` and `export --quantize` failed outside the directory `train` ran in."""
    monkeypatch.chdir(tmp_path)
    config = TrainConfig(
        "encoder-only", data="train.tsv", valid="data/valid.tsv", test="../test.tsv",
        init="runs/encoder",
    )  # fmt: skip
    assert config.data == str(tmp_path / "train.tsv")
    assert config.valid == str(tmp_path / "data" / "valid.tsv")
    assert config.test == os.path.join(os.path.dirname(tmp_path), "test.tsv")
    assert config.init == str(tmp_path / "runs" / "encoder")
    assert TrainConfig("encoder-only").data == "builtin:dates-zh"


def test_ctrl_c_in_the_test_evaluation_keeps_the_training_and_evaluates_again(
    tmp_path, monkeypatch, capsys
):
    """The backup went with `fit`'s end: Ctrl-C while the test set was decoded left a run
    marked "training" without a backup, which the rerun trained again from scratch."""
    from transformer_zoo.cli.train import _what_a_rerun_does
    from transformer_zoo.train import train_result
    from transformer_zoo.train.prepared import TRAINED

    data, out = tmp_path / "corpus.txt", tmp_path / "run"
    data.write_text("abc abd abe\n" * 40, encoding="utf-8")
    config = TrainConfig(
        "decoder-only", data=str(data), out=str(out), tokenizer="char", overrides=SMALL,
        steps=2, batch_size=4, steps_per_execution=1, precision="float32",
    )  # fmt: skip
    evaluate = train_result.evaluate

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(train_result, "evaluate", ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        train(config, verbose=0)
    assert rd.load_run_config(out).extra["status"] == TRAINED
    assert _what_a_rerun_does(str(out)) == "evaluate again"
    saved = (out / rd.MODEL_FILE).read_bytes()

    monkeypatch.setattr(train_result, "evaluate", evaluate)
    monkeypatch.setattr(keras.Model, "fit", lambda *a, **k: pytest.fail("trained again"))
    prepared = prepare(config)
    assert prepared.state == TRAINED
    result = train(prepared, verbose=0)
    assert "evaluating its model.keras again" in capsys.readouterr().out
    assert result.metrics["training"]["steps"] == 2 and "test" in result.metrics
    assert (out / rd.MODEL_FILE).read_bytes() == saved
    assert rd.load_run_config(out).extra["status"] == "finished"
    assert not (out / rd.BACKUP_DIR).exists()


def test_train_from_python_under_an_ascii_stdout_prints_its_stages_escaped(tmp_path, monkeypatch):
    """`train(...)` printed "Reading FILE …" with `print`: under an ASCII or Latin-1
    stdout that raised UnicodeEncodeError before anything ran (the command line writes
    UTF-8 whatever the locale; Python callers keep theirs)."""
    import io
    import sys

    from transformer_zoo.data.user_files import DataError

    stdout = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    monkeypatch.setattr(sys, "stdout", stdout)
    data = tmp_path / "données.tsv"  # missing: the run stops once it has said so
    with pytest.raises(DataError, match="cannot read the file"):
        train(TrainConfig("encoder-decoder", data=str(data), out=str(tmp_path / "run")))
    stdout.flush()
    said = stdout.buffer.getvalue().decode("ascii")
    assert said == f"Reading {str(data)[:-11]}donn\\xe9es.tsv \\u2026\n"


def test_train_gives_the_callers_python_and_numpy_generators_their_state_back(tmp_path):
    """`keras.utils.set_random_seed` left them seeded with the run's seed: a notebook
    drawing with np.random between two runs drew the same numbers after each."""
    import random

    import numpy as np

    data = tmp_path / "corpus.txt"
    data.write_text("abc abd abe\n" * 40, encoding="utf-8")
    config = TrainConfig(
        "decoder-only", data=str(data), out=str(tmp_path / "run"), tokenizer="char",
        overrides=SMALL, steps=1, batch_size=4, steps_per_execution=1, precision="float32",
        evaluate=False,
    )  # fmt: skip
    np.random.seed(123)
    random.seed(123)
    expected = np.random.random(), random.random()
    np.random.seed(123)
    random.seed(123)
    train(config, verbose=0)
    assert (np.random.random(), random.random()) == expected
