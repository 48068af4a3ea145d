"""What a resumed run must remember to end as the uninterrupted one: early stopping's
best value, wait and best weights, and, with `--ema`, the raw weights to train on with
their average in the optimizer, and the dropout's random state. Each run is interrupted right after an epoch's backup
and resumed from it, on a small Dense model, and compared with one that was not."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from transformer_zoo.train.callbacks.backup import restore_backup, resumed_early_stopping
from transformer_zoo.train.callbacks.run_callbacks import run_callbacks
from transformer_zoo.train.callbacks.validation_score import ValidationScore
from transformer_zoo.train.recipe.optimizers import make_optimizer

RNG = np.random.default_rng(0)
X, VALID = RNG.normal(size=(32, 4)), RNG.normal(size=(32, 4))
Y = np.ones((32, 1))


class Interrupt(keras.callbacks.Callback):
    """Ctrl-C at the start of `epoch` (after the previous epoch's backup)."""

    def __init__(self, epoch):
        super().__init__()
        self.epoch = epoch

    def on_epoch_begin(self, epoch, logs=None):
        if epoch == self.epoch:
            raise KeyboardInterrupt


class Scores:
    """A validation score read from `values` by epoch, keeping the weights it scored."""

    def __init__(self, values):
        self.values, self.epoch, self.weights = values, 0, {}

    def __call__(self, model):
        self.weights[self.epoch] = [w.copy() for w in model.get_weights()]
        return self.values[self.epoch]


class Epoch(keras.callbacks.Callback):
    def __init__(self, scores):
        super().__init__()
        self.scores = scores

    def on_epoch_begin(self, epoch, logs=None):
        self.scores.epoch = epoch


def _model(ema: bool):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.Dense(1)])
    optimizer, _ = make_optimizer(
        "adamw-cosine", 4, 100, 0, learning_rate=0.05, ema_momentum=0.8 if ema else None
    )
    model.compile(optimizer=optimizer, loss="mse", steps_per_execution=1)
    model.optimizer.build(model.trainable_variables)
    return model


def _fit(out, values, epochs, ema=False, patience=None, interrupt=None, make=_model):
    """A run of `epochs` on `out` of the model `make(ema)` builds, resumed from its backup
    if it holds one; returns the model, the epochs it trained and the weights scored at
    each epoch."""
    model = make(ema)
    backup = out / "backup"
    resumed = restore_backup(backup, model)
    scores = Scores(values)
    callbacks = run_callbacks(
        str(out),
        early_stopping_patience=patience,
        score=ValidationScore("wer", scores),
        averaged=ema,
        extra=[Epoch(scores)] + ([Interrupt(interrupt)] if interrupt else []),
        resumed_early_stopping=resumed_early_stopping(backup) if resumed else None,
    )
    history = model.fit(X, Y, batch_size=8, validation_data=(VALID, Y), epochs=epochs,
                        initial_epoch=resumed or 0, shuffle=False, verbose=0,
                        callbacks=callbacks)  # fmt: skip
    return model, history.epoch, scores.weights


def _assert_same(actual, expected):
    for a, e in zip(actual, expected, strict=True):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "ema", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["raw", "ema"]
)
def test_an_interrupted_run_stops_early_as_the_uninterrupted_one(tmp_path, ema):
    """Interrupted after its best epoch, a resumed run forgot it: it trained every planned
    epoch and kept its last (worse) one."""
    values = [0.5, 0.3, 0.4, 0.45, 0.2, 0.1, 0.05, 0.01]  # best at epoch 2; stops after 4
    whole, whole_epochs, whole_scored = _fit(tmp_path / "a", values, 8, ema, patience=2)
    assert whole_epochs == [0, 1, 2, 3]
    _assert_same(whole.get_weights(), whole_scored[1])

    with pytest.raises(KeyboardInterrupt):
        _fit(tmp_path / "b", values, 8, ema, patience=2, interrupt=3)
    resumed, epochs, _ = _fit(tmp_path / "b", values, 8, ema, patience=2)
    assert epochs == [3]  # epoch 4 only, then it stops, as the uninterrupted run did
    _assert_same(resumed.get_weights(), whole_scored[1])  # the best epoch's, kept


def test_an_averaged_run_resumes_from_its_raw_weights_with_the_average_in_the_optimizer(
    tmp_path,
):
    """The epoch-end backup held the average as the training weights (and the raw ones
    as the average): the resumed run trained on from the average."""
    values = [0.0] * 3
    whole, _, whole_scored = _fit(tmp_path / "a", values, 3, ema=True)
    with pytest.raises(KeyboardInterrupt):
        _fit(tmp_path / "b", values, 3, ema=True, interrupt=1)
    resumed, epochs, scored = _fit(tmp_path / "b", values, 3, ema=True)
    assert epochs == [1, 2]
    for epoch in (1, 2):  # each validation saw the same average
        _assert_same(scored[epoch], whole_scored[epoch])
    _assert_same(resumed.get_weights(), whole.get_weights())


def test_a_resumed_run_draws_the_dropout_masks_the_uninterrupted_one_draws(tmp_path):
    """`save_weights` leaves the dropout's random state out: the resumed epochs drew the
    first epoch's masks again and ended on other weights."""

    def dropout_model(ema):  # noqa: ARG001 (no average)
        keras.utils.set_random_seed(0)
        model = keras.Sequential([
            keras.Input((4,)), keras.layers.Dense(8), keras.layers.Dropout(0.5, seed=1),
            keras.layers.Dense(1),
        ])  # fmt: skip
        optimizer, _ = make_optimizer("adamw-cosine", 4, 100, 0, learning_rate=0.05)
        model.compile(optimizer=optimizer, loss="mse", steps_per_execution=1)
        model.optimizer.build(model.trainable_variables)
        return model

    values = [0.0] * 3
    whole, _, _ = _fit(tmp_path / "a", values, 3, make=dropout_model)
    with pytest.raises(KeyboardInterrupt):
        _fit(tmp_path / "b", values, 3, interrupt=2, make=dropout_model)
    resumed, epochs, _ = _fit(tmp_path / "b", values, 3, make=dropout_model)
    assert epochs == [2]
    _assert_same(resumed.get_weights(), whole.get_weights())
