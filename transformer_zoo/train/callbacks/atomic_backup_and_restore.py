"""`BackupAndRestore` whose backups are never half-written."""

from __future__ import annotations

import json
import os

import keras

PARTIAL_PREFIX = ".partial."


class AtomicBackupAndRestore(keras.callbacks.BackupAndRestore):
    """Keras' `BackupAndRestore` (resume `fit` after a crash), writing atomically.

    Keras overwrites `latest.weights.h5` in place, so a process killed while it writes
    leaves a truncated backup, and the rerun that should resume fails to read it. Here
    the weights (with the optimizer state) and the training metadata (the epoch to
    resume from) are each written to a temporary file and renamed over the previous
    backup, weights first: a kill between the two renames (microseconds) at worst
    repeats one epoch with newer weights, never loses one. Restoring is Keras' own.

    Args:
        backup_dir: the directory of the backup (nothing else may be written there).
        save_freq: `"epoch"`, or back up every this many batches (a resumed run
            restarts the interrupted epoch from its first batch, with the backed-up
            weights).
        delete_checkpoint: remove the backup when `fit` ends normally.

    Example:
    >>> callback = AtomicBackupAndRestore("/tmp/backup")
    >>> callback.save_freq
    'epoch'
    """

    def __init__(self, backup_dir, save_freq="epoch", delete_checkpoint: bool = True):
        super().__init__(
            os.fspath(backup_dir),
            save_freq=save_freq,
            double_checkpoint=False,
            delete_checkpoint=delete_checkpoint,
        )

    def _save_model(self):
        os.makedirs(self.backup_dir, exist_ok=True)
        weights = os.path.join(self.backup_dir, PARTIAL_PREFIX + "latest.weights.h5")
        metadata = os.path.join(self.backup_dir, PARTIAL_PREFIX + "training_metadata.json")
        self.model.save_weights(weights, overwrite=True)
        with open(metadata, "w", encoding="utf-8") as file:
            json.dump({"epoch": self._current_epoch, "batch": self._last_batch_seen}, file)
        os.replace(weights, self._weights_path)
        os.replace(metadata, self._training_metadata_path)


def backup_epoch(backup_dir: str | os.PathLike) -> int | None:
    """The epoch a backup in `backup_dir` resumes from, or None without a backup."""
    path = os.path.join(backup_dir, "training_metadata.json")
    weights = os.path.join(backup_dir, "latest.weights.h5")
    if not (os.path.isfile(path) and os.path.isfile(weights)):
        return None
    with open(path, encoding="utf-8") as file:
        return int(json.load(file)["epoch"])
