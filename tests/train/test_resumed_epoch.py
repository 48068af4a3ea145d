"""A run resumed from a mid-epoch backup (`--backup-every`) trains the batches the
uninterrupted run trains after the backup's step, ends its epochs where that run does and
stops at the planned step, so its validations are that run's (`ResumedEpoch`)."""

from __future__ import annotations

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.artifacts import SMALL_RUN as SMALL
from transformer_zoo.train.callbacks.resumed_epoch import ResumedEpoch
from transformer_zoo.train.callbacks.run_callbacks import run_callbacks
from transformer_zoo.train.config import TrainConfig
from transformer_zoo.train.trainer import train
from transformer_zoo.visualize.curves import read_history

SETTINGS = {**SMALL, "max_examples": 200, "batch_size": 16, "epochs": 3, "backup_every": 4}
SETTINGS["dropout"] = 0.1  # the resumed steps draw the masks the uninterrupted ones draw


class _KillAt(keras.callbacks.Callback):
    """Ctrl-C after optimizer step `step` (before that step's backup is written)."""

    def __init__(self, step):
        super().__init__()
        self.step = step

    def on_train_batch_end(self, batch, logs=None):
        if int(self.model.optimizer.iterations.numpy()) >= self.step:
            raise KeyboardInterrupt


def _config(out):
    return TrainConfig("encoder-decoder", out=str(out), evaluate=False, **SETTINGS)


@pytest.mark.slow  # three runs, about a minute
def test_a_run_resumed_mid_epoch_validates_and_ends_as_the_uninterrupted_one(tmp_path):
    whole = train(_config(tmp_path / "whole"), verbose=0)
    per_epoch = whole.metrics["training"]["steps_per_epoch"]
    kill = per_epoch + 6  # into the second epoch, two steps after a backup
    try:
        train(_config(tmp_path / "cut"), callbacks=[_KillAt(kill)], verbose=0)
    except KeyboardInterrupt:
        pass
    with open(os.path.join(tmp_path, "cut", "backup", "training_metadata.json")) as file:
        assert json.load(file)["epoch"] == 1  # a mid-epoch backup
    resumed = train(_config(tmp_path / "cut"), verbose=0)

    training = resumed.metrics["training"]
    assert training["steps"] == training["planned_steps"] == whole.metrics["training"]["steps"]
    expected = read_history(os.path.join(tmp_path, "whole", "history.csv"))
    actual = read_history(os.path.join(tmp_path, "cut", "history.csv"))
    assert [row["epoch"] for row in actual] == [row["epoch"] for row in expected]
    for key in ("val_loss", "val_masked_accuracy"):
        np.testing.assert_allclose(
            [float(row[key]) for row in actual], [float(row[key]) for row in expected], rtol=1e-5
        )
    # The epochs after the resumed one average whole epochs, as the uninterrupted run's.
    np.testing.assert_allclose(float(actual[-1]["loss"]), float(expected[-1]["loss"]), rtol=1e-5)


class _StopAt(keras.callbacks.Callback):
    """A user's callback: stops the run after optimizer step `step`."""

    def __init__(self, step):
        super().__init__()
        self.step = step

    def on_train_batch_end(self, batch, logs=None):
        if int(self.model.optimizer.iterations.numpy()) == self.step:
            self.model.stop_training = True


@pytest.mark.parametrize("user_stop", [None, 2], ids=["no-stop", "user-stops-at-the-end-step"])
def test_a_stop_at_the_resumed_epochs_last_step_stops_the_run(tmp_path, user_stop):
    """The resumed epoch (2 steps left of 5) ends at step 2 and the next epochs run; a
    user's callback that stops the run at that same step stopped nothing: `ResumedEpoch`
    took its `stop_training = True` for its own and cleared it at the epoch's end."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse", steps_per_execution=1)
    data = tf.data.Dataset.from_tensors((np.ones((8, 4)), np.ones((8, 1)))).repeat()
    extra = [_StopAt(user_stop)] if user_stop else []
    callbacks = run_callbacks(str(tmp_path), extra=extra, resumed_epoch=ResumedEpoch(2))
    history = model.fit(
        data, epochs=3, steps_per_epoch=5, callbacks=callbacks, shuffle=False, verbose=0
    )
    steps = int(model.optimizer.iterations.numpy())
    if user_stop:
        assert (history.epoch, steps) == ([0], 2)
    else:
        assert (history.epoch, steps) == ([0, 1, 2], 2 + 5 + 5)
