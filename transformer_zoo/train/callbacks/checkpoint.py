"""`Checkpoint`: the model saved after an epoch, never half-written."""

from __future__ import annotations

import math
import os

import keras

from transformer_zoo.files import (
    atomic_path,
    check_free_space,
    interruptions_deferred,
    remove_stale_staging,
    variables_bytes,
)


class Checkpoint(keras.callbacks.Callback):
    """Saves the model (`model.save`, with the optimizer state) at the end of every epoch, or
    only when `monitor` reached a new low.

    Each file is written in a staging folder and renamed over the previous one
    (`files.atomic_path`), so the checkpoint on disk is always whole: the old one or the
    new one. (Keras' `ModelCheckpoint` writes in place, and a process killed while it
    writes leaves a truncated file where the last good checkpoint was.) A staging folder
    left by a killed process is removed when training begins.

    Args:
        filepath: the `.keras` path; `{epoch}`-style placeholders (the epoch from 1, and
            the logs' names) give one file per epoch.
        monitor: a logged value to minimise (`"val_loss"`); None saves every epoch.
        initial_value_threshold: a resumed run's best value so far: only a lower one
            replaces its checkpoint.

    Example:
    >>> callback = Checkpoint("runs/x/checkpoints/best.keras", monitor="val_loss")
    >>> callback.best
    inf
    """

    def __init__(self, filepath, monitor: str | None = None, initial_value_threshold=None):
        super().__init__()
        self.filepath = os.fspath(filepath)
        self.monitor = monitor
        self.best = math.inf if initial_value_threshold is None else initial_value_threshold

    def on_train_begin(self, logs=None):
        remove_stale_staging(os.path.dirname(os.path.abspath(self.filepath)))

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        if self.monitor is not None:
            value = logs.get(self.monitor)
            if value is None or not value < self.best:
                return
            self.best = float(value)
        path = self.filepath.format(epoch=epoch + 1, **logs)
        check_free_space(path, variables_bytes(self.model), os.path.basename(path))
        with interruptions_deferred(), atomic_path(path) as temporary:
            self.model.save(temporary)
