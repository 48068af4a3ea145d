"""`Backup`: the crash backup of a `fit`, and `restore_backup` for the run that resumes it."""

from __future__ import annotations

import os
import shutil

import keras

from transformer_zoo.files import atomic_path, read_json, write_json

WEIGHTS_FILE = "latest.weights.h5"
METADATA_FILE = "training_metadata.json"


class Backup(keras.callbacks.Callback):
    """Backs the training state up for crash recovery, with public Keras API only: the
    weights with the optimizer state (`model.save_weights`) and the epoch to resume from.

    Both files are written atomically (`files.atomic_path`), weights first: a kill between
    the two renames (microseconds) at worst repeats one epoch with newer weights, never
    loses one. The backup is removed when `fit` ends normally. A rerun resumes with
    `restore_backup` and `fit(initial_epoch=...)`.

    Args:
        backup_dir: the directory of the backup (nothing else may be written there).
        save_freq: `"epoch"`, or back up every this many batches (a resumed run restarts
            the interrupted epoch from its first batch, with the backed-up weights).

    Example:
    >>> Backup("/tmp/backup").save_freq
    'epoch'
    """

    def __init__(self, backup_dir, save_freq="epoch"):
        super().__init__()
        if save_freq != "epoch" and not (isinstance(save_freq, int) and save_freq > 0):
            raise ValueError(
                f"`save_freq` must be 'epoch' or a positive integer. Received: {save_freq!r}"
            )
        self.backup_dir = os.fspath(backup_dir)
        self.save_freq = save_freq
        self._epoch = 0
        self._batches = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self.save_freq == "epoch":
            return
        self._batches += 1
        if self._batches % self.save_freq == 0:
            self._save(self._epoch)  # a resumed run repeats this epoch

    def on_epoch_end(self, epoch, logs=None):
        self._save(epoch + 1)

    def on_train_end(self, logs=None):
        shutil.rmtree(self.backup_dir, ignore_errors=True)

    def _save(self, resume_epoch: int) -> None:
        os.makedirs(self.backup_dir, exist_ok=True)
        with atomic_path(os.path.join(self.backup_dir, WEIGHTS_FILE)) as temporary:
            self.model.save_weights(temporary)
        write_json(os.path.join(self.backup_dir, METADATA_FILE), {"epoch": resume_epoch})


def backup_epoch(backup_dir: str | os.PathLike) -> int | None:
    """The epoch a backup in `backup_dir` resumes from, or None without a whole backup."""
    weights = os.path.join(backup_dir, WEIGHTS_FILE)
    metadata = os.path.join(backup_dir, METADATA_FILE)
    if not (os.path.isfile(weights) and os.path.isfile(metadata)):
        return None
    return int(read_json(metadata)["epoch"])


def restore_backup(backup_dir: str | os.PathLike, model: keras.Model) -> int | None:
    """Loads the backed-up weights and optimizer state into `model` (compiled, built);
    returns the epoch to pass to `fit` as `initial_epoch`, or None without a backup."""
    epoch = backup_epoch(backup_dir)
    if epoch is None:
        return None
    if model.optimizer is not None and not model.optimizer.built:
        model.optimizer.build(model.trainable_variables)  # its variables receive the state
    model.load_weights(os.path.join(backup_dir, WEIGHTS_FILE))
    return epoch
