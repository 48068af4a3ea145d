"""`--ema`: the optimizer's moving average of the weights is what validation, the scores,
early stopping and the saved model see, checked against the average computed in numpy
from the raw weights after each step."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from tests.helpers import cli_error
from transformer_zoo.train.callbacks.budget import Budget
from transformer_zoo.train.callbacks.run_callbacks import run_callbacks
from transformer_zoo.train.callbacks.validation_score import ValidationScore
from transformer_zoo.train.config import TrainConfig
from transformer_zoo.train.recipe.optimizers import make_optimizer

MOMENTUM = 0.8
STEPS_PER_EPOCH = 4


class RawWeights(keras.callbacks.Callback):
    """The model's weights after each train step (the raw ones: the average is swapped in
    only between epochs)."""

    def __init__(self):
        super().__init__()
        self.steps = []

    def on_train_batch_end(self, batch, logs=None):
        self.steps.append([w.copy() for w in self.model.get_weights()])


class Scores:
    """A validation score that keeps the weights it was asked to score."""

    def __init__(self, values):
        self.values, self.weights = list(values), []

    def __call__(self, model):
        self.weights.append([w.copy() for w in model.get_weights()])
        return self.values[len(self.weights) - 1]


def _average(steps):
    """The exponential moving average after each step, as Keras defines it: the first
    step's weights, then m · average + (1 − m) · weights."""
    averages, average = [], None
    for weights in steps:
        if average is None:
            average = [w.astype(np.float64) for w in weights]
        else:
            average = [
                MOMENTUM * a + (1 - MOMENTUM) * w for a, w in zip(average, weights, strict=True)
            ]
        averages.append(average)
    return averages


def _fit(tmp_path, epochs, scores=(), patience=None, budget=None):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.Dense(1)])
    optimizer, _ = make_optimizer(
        "adamw-cosine", 4, 100, 0, learning_rate=0.05, ema_momentum=MOMENTUM
    )
    model.compile(optimizer=optimizer, loss="mse", steps_per_execution=1)
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(2, 8 * STEPS_PER_EPOCH, 4)), rng.normal(size=(8 * STEPS_PER_EPOCH, 1))
    raw = RawWeights()
    scored = Scores(scores or [0.0] * epochs)
    callbacks = run_callbacks(
        str(tmp_path),
        budget=budget,
        early_stopping_patience=patience,
        extra=[raw],
        score=ValidationScore("wer", scored),
        averaged=True,
    )
    history = model.fit(x[0], y, batch_size=8, validation_data=(x[1], y), epochs=epochs,
                        verbose=0, callbacks=callbacks, shuffle=False)  # fmt: skip
    return model, raw.steps, scored.weights, history, (x[1], y)


def _assert_weights(actual, expected):
    for a, e in zip(actual, expected, strict=True):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)


def test_the_model_ends_with_the_average_and_each_epoch_is_scored_on_it(tmp_path):
    model, steps, scored, history, valid = _fit(tmp_path, epochs=3)
    averages = _average(steps)
    assert len(steps) == 3 * STEPS_PER_EPOCH
    assert not np.allclose(averages[-1][0], steps[-1][0], atol=1e-3)  # the two differ
    _assert_weights(model.get_weights(), averages[-1])
    for epoch, weights in enumerate(scored):
        _assert_weights(weights, averages[(epoch + 1) * STEPS_PER_EPOCH - 1])
    # val_loss is the average's too, and training went on from the raw weights.
    assert history.history["val_loss"][-1] == pytest.approx(model.evaluate(*valid, verbose=0))


def test_a_run_cut_short_by_its_budget_keeps_the_average(tmp_path):
    """`fit` copies the optimizer's slots into the model at its end, and those hold the raw
    weights when the run ends before its planned last epoch."""
    model, steps, _, _, _ = _fit(tmp_path, epochs=5, budget=Budget(steps=6))
    assert len(steps) == 6
    _assert_weights(model.get_weights(), _average(steps)[-1])


def test_early_stopping_restores_the_best_epochs_average(tmp_path):
    model, steps, scored, history, _ = _fit(
        tmp_path, epochs=6, scores=[0.5, 0.2, 0.4, 0.45, 0.3, 0.1], patience=2
    )
    assert len(history.history["loss"]) == 4
    _assert_weights(model.get_weights(), _average(steps)[2 * STEPS_PER_EPOCH - 1])
    _assert_weights(model.get_weights(), scored[1])


@pytest.mark.parametrize("momentum", [0, 1, 1.5, True])
def test_the_momentum_is_checked(momentum):
    with pytest.raises(ValueError, match="`ema_momentum` must be in"):
        TrainConfig(family="encoder-only", ema_momentum=momentum)


@pytest.mark.parametrize(
    ("value", "message"),
    [("-0.9", "expected a positive number"), ("1", "`ema_momentum` must be in (0, 1)")],
)
def test_the_cli_refuses_a_momentum_outside_0_1(capsys, value, message):
    error = cli_error(capsys, ["train", "--family", "encoder-only", "--ema", value])
    assert message in error


def test_the_run_says_it_averages():
    from transformer_zoo.train.step_plan import plan_steps

    config = TrainConfig("encoder-decoder", data="pairs.tsv", epochs=3, ema_momentum=0.999)
    line = plan_steps(config, batches=23, steps_per_execution=10).describe(config, config.dropout)
    assert "weights averaged (EMA 0.999)." in line
    plain = TrainConfig("encoder-decoder", data="pairs.tsv", epochs=3)
    assert "EMA" not in plan_steps(plain, batches=23, steps_per_execution=10).describe(
        plain, plain.dropout
    )
