"""`metrics.json`'s training summary of a resumed run covers the whole run: what stopped
it and its seconds, as the budget counts them."""

from __future__ import annotations

import json
import os

import keras
import pytest

from tests.artifacts import TRAINED_RUN as SMALL
from transformer_zoo.train.config import TrainConfig
from transformer_zoo.train.trainer import train


class _KillWhileSaving(keras.callbacks.Callback):
    def on_train_end(self, logs=None):
        raise KeyboardInterrupt  # after the last backup, before `model.keras` is saved


def test_a_run_killed_after_its_time_budget_says_so_with_the_whole_runs_seconds(tmp_path):
    """Its rerun said `"stopped_by": "early_stopping"` (early stopping was off) and
    `"train_seconds": 0.0`."""
    settings = {**SMALL, "epochs": None, "steps": 10_000, "eval_every": 4, "time_budget": 3}
    config = TrainConfig("encoder-decoder", out=str(tmp_path), evaluate=False, **settings)
    with pytest.raises(KeyboardInterrupt):
        train(config, callbacks=[_KillWhileSaving()], verbose=0)
    with open(os.path.join(tmp_path, "backup", "training_metadata.json")) as file:
        recorded = json.load(file)["seconds"]
    assert recorded >= 3

    training = train(config, verbose=0).metrics["training"]
    assert training["stopped_by"] == "time_budget"
    assert training["train_seconds"] >= round(recorded, 1)
