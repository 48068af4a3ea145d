"""Early stopping on the task's validation score (issue 13): the score logged as
`val_<score>` each epoch, the direction each score improves in, the best epoch's weights
restored, and the settings checked in one line."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import keras
import numpy as np
import pytest

from tests.helpers import cli_error
from transformer_zoo.cli import main
from transformer_zoo.train.callbacks.run_callbacks import run_callbacks
from transformer_zoo.train.callbacks.validation_score import ValidationScore
from transformer_zoo.train.config import TrainConfig

DATA = Path(__file__).resolve().parents[1] / "data"
G2P = DATA / "g2p"


class ScriptedScore:
    """Returns the next of `values` and keeps the weights it was asked to score."""

    def __init__(self, values):
        self.values, self.weights = list(values), []

    def __call__(self, model):
        self.weights.append([w.copy() for w in model.get_weights()])
        return self.values[len(self.weights) - 1]


def _fit_with_score(tmp_path, name, values, patience):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.random.default_rng(0).normal(size=(2, 32, 4)), np.ones((32, 1))
    scripted = ScriptedScore(values)
    callbacks = run_callbacks(
        str(tmp_path), early_stopping_patience=patience, score=ValidationScore(name, scripted)
    )
    model.fit(x[0], y, validation_data=(x[1], y), epochs=len(values), verbose=0,
              callbacks=callbacks)  # fmt: skip
    with open(tmp_path / "history.csv", encoding="utf-8") as file:
        history = list(csv.DictReader(file))
    return model, scripted, history


@pytest.mark.parametrize(
    ("name", "values", "best"),
    [
        ("wer", [0.5, 0.3, 0.4, 0.45, 0.2], 1),  # lower is better: stops after epoch 4
        ("accuracy", [0.5, 0.7, 0.6, 0.65, 0.9], 1),  # higher is better
    ],
)
def test_early_stopping_on_a_score_restores_the_best_epoch(tmp_path, name, values, best):
    model, scripted, history = _fit_with_score(tmp_path, name, values, patience=2)
    assert len(history) == 4  # two epochs without a better score after the best
    assert [float(row[f"val_{name}"]) for row in history] == pytest.approx(values[:4])
    assert "val_loss" in history[0]
    for restored, kept in zip(model.get_weights(), scripted.weights[best], strict=True):
        np.testing.assert_array_equal(restored, kept)
    assert not np.array_equal(model.get_weights()[0], scripted.weights[-1][0])


def test_a_score_of_another_name_is_refused():
    with pytest.raises(ValueError, match="`name` must be one of"):
        ValidationScore("f1", lambda model: 0.0)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (dict(early_stopping_on="wer"), "give `early_stopping_patience`"),
        (dict(early_stopping_patience=2, early_stopping_on="f1"), "`early_stopping_on` must be"),
        (
            dict(early_stopping_patience=2, early_stopping_on="accuracy"),
            "an encoder-decoder model has no 'accuracy' score (it has wer, per, exact_match",
        ),
        (dict(score_examples=100), "`score_examples` applies with `early_stopping_on`"),
        (
            dict(early_stopping_patience=2, early_stopping_on="wer", score_examples=0),
            "`score_examples` must be a positive integer",
        ),
    ],
)
def test_score_settings_are_checked(settings, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        TrainConfig(family="encoder-decoder", data="train.tsv", **settings)


def test_a_token_stream_has_no_score_but_its_loss(tmp_path, capsys):
    argv = ["train", "--family", "decoder-only", "--data", DATA / "shakespeare" / "input_head.txt",
            "--early-stopping", "2", "--early-stopping-on", "exact_match",
            "--out", tmp_path / "run"]  # fmt: skip
    line = cli_error(capsys, argv)
    assert "a token stream has no 'exact_match' score" in line
    assert not (tmp_path / "run").exists()


@pytest.mark.slow  # about 40 s of training and scoring on 2 cores
def test_g2p_stops_on_its_validation_wer_and_keeps_the_best_epoch(tmp_path, capsys):
    out = tmp_path / "g2p"
    code = main([
        "train", "--family", "encoder-decoder", "--data", str(G2P / "train.tsv"),
        "--test", str(G2P / "test.tsv"), "--source-tokenizer", "char",
        "--target-tokenizer", "word", "--epochs", "4", "--batch-size", "32",
        "--precision", "float32", "--early-stopping", "1", "--early-stopping-on", "wer",
        "--out", str(out), "--verbose", "0",
    ])  # fmt: skip
    assert code == 0
    with open(out / "history.csv", encoding="utf-8") as file:
        wer = [float(row["val_wer"]) for row in csv.DictReader(file)]
    training = json.loads((out / "metrics.json").read_text())["training"]
    stopping = training["early_stopping"]
    assert stopping["monitor"] == "val_wer"
    assert stopping["best"] == pytest.approx(min(wer))
    assert wer[stopping["best_epoch"] - 1] == min(wer)
    capsys.readouterr()
    # The saved model is the best epoch's: `evaluate` on the validation split (every
    # example: fewer than --score-examples' 1000) gives that epoch's WER.
    assert main(["evaluate", str(out), "--split", "valid"]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed["wer"] == pytest.approx(min(wer))
