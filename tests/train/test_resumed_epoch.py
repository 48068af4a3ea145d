"""A run resumed from a mid-epoch backup (`--backup-every`) trains the batches the
uninterrupted run trains after the backup's step, ends its epochs where that run does and
stops at the planned step, so its validations are that run's (`ResumedEpoch`)."""

from __future__ import annotations

import json
import os

import keras
import numpy as np
import pytest

from tests.artifacts import SMALL_RUN as SMALL
from transformer_zoo.train.config import TrainConfig
from transformer_zoo.train.trainer import train
from transformer_zoo.visualize.curves import read_history

SETTINGS = {**SMALL, "max_examples": 200, "batch_size": 16, "epochs": 3, "backup_every": 4}


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
