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
from transformer_zoo.train.config import SCORES, TrainConfig

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


@pytest.mark.parametrize(
    ("windows", "score", "what"),
    [
        ([], "exact_match", "a token stream"),
        # These passed the checks, trained an epoch, then failed: KeyError: 'exact_match'.
        (["--windows", "lines"], "exact_match", "a plain-text file read by lines"),
        (["--windows", "lines"], "bleu", "a plain-text file read by lines"),
    ],
)
def test_plain_text_has_no_score_but_its_loss(tmp_path, capsys, windows, score, what):
    argv = ["train", "--family", "decoder-only", "--data", DATA / "shakespeare" / "input_head.txt",
            *windows, "--early-stopping", "2", "--early-stopping-on", score,
            "--out", tmp_path / "run"]  # fmt: skip
    line = cli_error(capsys, argv)
    assert f"{what} has no '{score}' score (it has none: its score is the validation loss)" in line
    assert not (tmp_path / "run").exists()


# The scores `evaluation.evaluate` gives each family and kind of data (its docstring):
# decoder-only completions only where the examples have prompts (the built-in tasks); a
# plain-text file, in windows or by lines, only its loss, perplexity and token accuracy.
ENCODER_DECODER = ("wer", "per", "exact_match", "bleu")


@pytest.mark.parametrize(
    ("settings", "offered"),
    [
        (dict(family="encoder-only", data="pairs.tsv"), ("accuracy",)),
        (dict(family="encoder-only", data="builtin:dates-zh"), ("accuracy",)),
        (dict(family="encoder-only", data="pairs.tsv", init="runs/minilm"), ("accuracy",)),
        (dict(family="encoder-decoder", data="pairs.tsv"), ENCODER_DECODER),
        (dict(family="encoder-decoder", data="builtin:dates-zh"), ENCODER_DECODER),
        (dict(family="decoder-only", data="builtin:dates-zh"), ("exact_match", "bleu")),
        (dict(family="decoder-only", data="text.txt"), ()),  # random windows
        (dict(family="decoder-only", data="text.txt", windows="epoch"), ()),
        (dict(family="decoder-only", data="text.txt", windows="lines"), ()),
        (dict(family="decoder-only", data="text.txt", init="runs/gpt2"), ()),
    ],
)
def test_early_stopping_watches_only_a_score_the_evaluation_of_the_data_has(settings, offered):
    for name in SCORES:
        given = dict(settings, early_stopping_patience=2, early_stopping_on=name)
        if name in offered:
            assert TrainConfig(**given).early_stopping_on == name
        else:
            with pytest.raises(ValueError, match=f"has no '{name}' score"):
                TrainConfig(**given)


def test_score_examples_are_not_read_for_the_accuracy_keras_computes(capsys):
    """A classifier's accuracy is Keras' val_accuracy, over every validation example; the
    setting is taken, not refused, so that a run that recorded it (before 5c71e2a, when it
    limited the scoring) resumes with the same command."""
    from types import SimpleNamespace

    from transformer_zoo.train.scoring import validation_score

    TrainConfig(family="encoder-only", data="pairs.tsv", early_stopping_patience=2,
                early_stopping_on="accuracy", score_examples=50)  # fmt: skip
    config = SimpleNamespace(early_stopping_on="accuracy", score_examples=50)
    score = validation_score(SimpleNamespace(config=config))
    assert (score.name, score.score) == ("accuracy", None)  # Keras' own val_accuracy
    assert "--score-examples 50 is not read" in capsys.readouterr().out


def _classifier(seed: int = 0):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    model.compile(
        optimizer="sgd",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],  # a classifier's
    )
    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=(2, 40, 4)), rng.integers(0, 3, size=(2, 40))
    return model, (x[0], y[0]), (x[1], y[1])


def test_a_classifiers_accuracy_is_keras_val_accuracy_over_every_validation_example(tmp_path):
    """It was replaced by the accuracy over the first --score-examples validation
    examples, under the same name, in history.csv, TensorBoard and the curves."""
    from types import SimpleNamespace

    from transformer_zoo.train.scoring import validation_score

    model, train, (x_valid, y_valid) = _classifier()
    config = SimpleNamespace(early_stopping_on="accuracy", score_examples=None)
    score = validation_score(SimpleNamespace(config=config))
    callbacks = run_callbacks(str(tmp_path), early_stopping_patience=3, score=score)
    model.fit(*train, validation_data=(x_valid, y_valid), epochs=1, batch_size=8, verbose=0,
              callbacks=callbacks)  # fmt: skip
    with open(tmp_path / "history.csv", encoding="utf-8") as file:
        (row,) = csv.DictReader(file)
    every = np.mean(np.argmax(model.predict(x_valid, verbose=0), axis=-1) == y_valid)
    assert float(row["val_accuracy"]) == pytest.approx(every)


def test_a_score_never_replaces_a_value_keras_logged():
    model, train, valid = _classifier()
    callback = ValidationScore("accuracy", lambda model: 0.125)
    with pytest.raises(ValueError, match="Keras logs val_accuracy already"):
        model.fit(*train, validation_data=valid, epochs=1, verbose=0, callbacks=[callback])
    plain = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    plain.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(True))
    with pytest.raises(ValueError, match="Keras logged no val_accuracy"):
        plain.fit(*train, validation_data=valid, epochs=1, verbose=0,
                  callbacks=[ValidationScore("accuracy", None)])  # fmt: skip


def test_the_scoring_at_each_validation_does_not_repeat_the_cut_warnings(monkeypatch, caplog):
    """Each validation's scoring repeated "N of M inputs were longer than the model's K
    tokens", which the run says once before its first step (`data_warnings.warn_cut`)."""
    from types import SimpleNamespace

    from transformer_zoo.evaluation import evaluate as evaluation
    from transformer_zoo.serving import input_checks
    from transformer_zoo.train import scoring

    def evaluate(served, task, split, limit, samples, progress):
        evaluation.log.warning("3 of 50 valid examples are longer than the model's 32 tokens")
        input_checks.log.warning("3 of 50 inputs were longer than the model's 32 tokens")
        return {"wer": {"all": 0.25}}

    monkeypatch.setattr(scoring, "evaluate", evaluate)
    monkeypatch.setattr(scoring, "served_model", lambda prepared, model: None)
    config = SimpleNamespace(early_stopping_on="wer", score_examples=50, precision="float32")
    prepared = SimpleNamespace(config=config, setup=SimpleNamespace(task=None))
    callback = scoring.validation_score(prepared)
    with caplog.at_level("WARNING"):
        assert [callback.score(None) for _ in range(2)] == [0.25, 0.25]
        assert caplog.messages == []
        evaluation.log.warning("said")  # elsewhere, as before
    assert caplog.messages == ["said"]


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
