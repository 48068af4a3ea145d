"""`Backup`: the crash backup of a `fit`, and `restore_backup` (with
`resumed_early_stopping`) for the run that resumes it."""

from __future__ import annotations

import contextlib
import os
import shutil
import time

import keras
import numpy as np

from transformer_zoo.errors import RunError
from transformer_zoo.files import (
    atomic_path,
    check_free_space,
    interruptions_deferred,
    read_json,
    variables_bytes,
    write_json,
)
from transformer_zoo.models.saving import weights_predate_this_version
from transformer_zoo.run_directory import BACKUP_METADATA_FILE as METADATA_FILE
from transformer_zoo.run_directory import BACKUP_WEIGHTS_FILE as WEIGHTS_FILE
from transformer_zoo.train.callbacks.averaged_weights import AveragedWeights
from transformer_zoo.train.callbacks.early_stopping import EarlyStoppingState, RunEarlyStopping

BEST_WEIGHTS_PREFIX = "early_stopping_best."  # + the best epoch (from 1) + ".npz"


class Backup(keras.callbacks.Callback):
    """Backs the training state up for crash recovery, with public Keras API only: the
    weights with the optimizer state (`model.save_weights`), the states of the random
    generators of the model's layers (dropout's; `save_weights` leaves them out, and a
    resumed run drew the first epoch's masks again) and the epoch to resume from.

    Both files are written atomically (`files.atomic_path`), weights first: a kill between
    the two renames (microseconds) at worst repeats one epoch with newer weights, never
    loses one. The weights are the training ones: with `averaged`, the raw weights in
    the model and their average in the optimizer's slots, even at an epoch's end, where
    the average is swapped into the model. With `early_stopping`, the metadata holds its
    state and a file its best epoch's weights (written once per best epoch, before the
    metadata names it). The backup outlives `fit`: the run that made it removes it once
    it has saved its model (`remove_backup`). A rerun resumes with `restore_backup`,
    `resumed_early_stopping` and `fit(initial_epoch=...)`.

    Args:
        backup_dir: the directory of the backup (nothing else may be written there).
        save_freq: `"epoch"`, or back up every this many optimizer steps: the resumed run
            trains the rest of the interrupted epoch, from the batch after the backup's
            step, and ends it where the uninterrupted run does (`ResumedEpoch`). Steps, not
            callback calls: with `steps_per_execution` Keras calls back once per execution
            of that many steps.
        averaged: the run's `AveragedWeights`, if it averages the weights.
        early_stopping: the run's `RunEarlyStopping`, if it stops early.

    Attributes:
        spent: the training seconds of the attempts before this one (`backup_seconds`):
            each backup records the run's seconds of training so far, which a time
            budget counts on after a resume.

    Example:
    >>> Backup("/tmp/backup").save_freq
    'epoch'
    """

    def __init__(
        self,
        backup_dir,
        save_freq="epoch",
        averaged: AveragedWeights | None = None,
        early_stopping: RunEarlyStopping | None = None,
    ):
        super().__init__()
        if save_freq != "epoch" and not (isinstance(save_freq, int) and save_freq > 0):
            raise ValueError(
                f"`save_freq` must be 'epoch' or a positive integer. Received: {save_freq!r}"
            )
        self.backup_dir = os.fspath(backup_dir)
        self.save_freq = save_freq
        self.averaged = averaged
        self.early_stopping = early_stopping
        self._epoch = 0
        self._saved_at = 0  # the optimizer step of the last backup (or of the start)
        self.spent = 0.0
        self._start = time.perf_counter()

    def on_train_begin(self, logs=None):
        self._saved_at = self._step()
        self._start = time.perf_counter() - self.spent

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self.save_freq == "epoch":
            return
        step = self._step()
        if step // self.save_freq > self._saved_at // self.save_freq:
            self._saved_at = step
            # An epoch's last step is backed up by `on_epoch_end`, after its validation: a
            # backup here would name the epoch whose training is done, and a rerun killed
            # in that validation would train an execution past the epoch's end.
            if step % (self.params.get("steps") or step + 1):
                self._save(self._epoch)  # a resumed run ends this epoch

    def _step(self) -> int:
        return int(self.model.optimizer.iterations.numpy())  # a MirroredVariable too

    def on_epoch_end(self, epoch, logs=None):
        self._save(epoch + 1)

    def _save(self, resume_epoch: int) -> None:
        os.makedirs(self.backup_dir, exist_ok=True)
        check_free_space(self.backup_dir, variables_bytes(self.model), "the crash backup")
        raw = self.averaged.raw_weights() if self.averaged else contextlib.nullcontext()
        # The weights and the metadata that names their epoch are written as one: a Ctrl-C
        # between the two left a backup of epoch N's weights that said N - 1, and the
        # rerun trained an epoch twice (or, at the first backup, started afresh).
        with interruptions_deferred(), raw:
            with atomic_path(os.path.join(self.backup_dir, WEIGHTS_FILE)) as temporary:
                self.model.save_weights(temporary)
            metadata = {
                "epoch": resume_epoch,
                "seconds": time.perf_counter() - self._start,
                "seed_states": [state.numpy().tolist() for state in seed_states(self.model)],
            }
            if self.early_stopping is not None:
                metadata["early_stopping"] = self._save_early_stopping()
            write_json(os.path.join(self.backup_dir, METADATA_FILE), metadata)
        named = metadata.get("early_stopping", {}).get("weights")
        for name in os.listdir(self.backup_dir):  # best epochs the metadata no longer names
            if name.startswith(BEST_WEIGHTS_PREFIX) and name != named:
                os.remove(os.path.join(self.backup_dir, name))

    def _save_early_stopping(self) -> dict:
        state = self.early_stopping.state()
        name = None
        if state.best_weights is not None:
            name = f"{BEST_WEIGHTS_PREFIX}{state.best_epoch + 1}.npz"
            path = os.path.join(self.backup_dir, name)
            if not os.path.isfile(path):  # an epoch's weights do not change once written
                with atomic_path(path) as temporary, open(temporary, "wb") as file:
                    np.savez(file, *state.best_weights)
        return {
            "best": state.best,
            "wait": state.wait,
            "best_epoch": state.best_epoch,
            "weights": name,
        }


def backup_epoch(backup_dir: str | os.PathLike) -> int | None:
    """The epoch a backup in `backup_dir` resumes from, or None without a whole backup."""
    weights = os.path.join(backup_dir, WEIGHTS_FILE)
    metadata = os.path.join(backup_dir, METADATA_FILE)
    if not (os.path.isfile(weights) and os.path.isfile(metadata)):
        return None
    return int(read_json(metadata)["epoch"])


def backup_seconds(backup_dir: str | os.PathLike) -> float:
    """The seconds of training a backup in `backup_dir` records (0 without one, or one
    written before backups recorded them)."""
    if backup_epoch(backup_dir) is None:
        return 0.0
    return float(read_json(os.path.join(backup_dir, METADATA_FILE)).get("seconds", 0.0))


def restore_backup(backup_dir: str | os.PathLike, model: keras.Model) -> int | None:
    """Loads the backed-up weights and optimizer state into `model` (compiled, built);
    returns the epoch to pass to `fit` as `initial_epoch`, or None without a backup.

    Raises:
        RunError: the backup was written by an older version whose weights this one
            cannot load (`weights_predate_this_version`); the backup is left as it is.
    """
    epoch = backup_epoch(backup_dir)
    if epoch is None:
        return None
    if model.optimizer is not None and not model.optimizer.built:
        model.optimizer.build(model.trainable_variables)  # its variables receive the state
    try:
        model.load_weights(os.path.join(backup_dir, WEIGHTS_FILE))
    except ValueError as error:
        why = weights_predate_this_version(error)
        if why is None:
            raise
        raise RunError(
            f"Cannot resume from the backup in {os.fspath(backup_dir)}: {why}; start the "
            "run again under another --out (this backup is left as it is), or resume it "
            "with the version that made it."
        ) from None
    saved = read_json(os.path.join(backup_dir, METADATA_FILE)).get("seed_states")
    if saved is not None:  # None: a backup made before they were kept
        for state, value in zip(seed_states(model), saved, strict=True):
            state.assign(np.asarray(value, dtype=state.dtype))
    return epoch


def seed_states(model: keras.Model) -> list[keras.Variable]:
    """The state variables of the `keras.random.SeedGenerator`s of `model`'s layers (its
    dropout's), in the model's order."""
    return [v for v in model.variables if v.name == "seed_generator_state"]


def resumed_early_stopping(backup_dir: str | os.PathLike) -> EarlyStoppingState | None:
    """The early-stopping state a backup in `backup_dir` holds, with its best epoch's
    weights, or None (no backup, or a run without early stopping)."""
    if backup_epoch(backup_dir) is None:
        return None
    state = read_json(os.path.join(backup_dir, METADATA_FILE)).get("early_stopping")
    if state is None:
        return None
    weights = None
    if state["weights"] is not None:
        with np.load(os.path.join(backup_dir, state["weights"])) as saved:
            weights = [saved[f"arr_{i}"] for i in range(len(saved.files))]
    return EarlyStoppingState(state["best"], state["wait"], state["best_epoch"], weights)


def remove_backup(backup_dir: str | os.PathLike) -> None:
    """Removes the backup once the run no longer needs it (its model is saved)."""
    shutil.rmtree(backup_dir, ignore_errors=True)
