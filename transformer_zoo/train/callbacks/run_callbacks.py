"""The callbacks of a `train()` run, in the order an epoch's end needs them."""

from __future__ import annotations

import os

import keras

from transformer_zoo import run_directory as rd
from transformer_zoo.train.callbacks.averaged_weights import AveragedWeights
from transformer_zoo.train.callbacks.backup import Backup
from transformer_zoo.train.callbacks.budget import Budget
from transformer_zoo.train.callbacks.checkpoint import Checkpoint
from transformer_zoo.train.callbacks.early_stopping import EarlyStoppingState, RunEarlyStopping
from transformer_zoo.train.callbacks.nan_guard import NaNGuard
from transformer_zoo.train.callbacks.resumed_epoch import ResumedEpoch
from transformer_zoo.train.callbacks.validation_score import ValidationScore
from transformer_zoo.train.config import SCORES


def run_callbacks(
    out: str,
    resumed_best: float | None = None,
    budget: Budget | None = None,
    early_stopping_patience: int | None = None,
    backup_every: int | None = None,
    extra=(),
    score: ValidationScore | None = None,
    averaged: bool = False,
    resumed_early_stopping: EarlyStoppingState | None = None,
    resumed_epoch: ResumedEpoch | None = None,
) -> list:
    """The weights' moving average swapped in (with `averaged`), NaN guard, time budget, CSV log, best and last checkpoints, TensorBoard, early
    stopping, `extra` (e.g. the learning-rate callback) and the crash backup, writing into
    the run directory `out`.

    Order matters at an epoch's end: the CSV row and the checkpoints are written before
    the backup, so a crash in between repeats the epoch instead of losing it.

    Args:
        out: the directory to write.
        resumed_best: a resumed run's best validation loss so far (the best checkpoint
            is replaced only by a better one).
        budget: the run's `Budget`, if any.
        early_stopping_patience: stop after this many epochs without a better validation
            loss (or `score`); None: never. The weights of the best epoch are restored at
            the end.
        backup_every: back up every this many steps; None: at every epoch's end.
        extra: more callbacks, run before the backup.
        score: the task's validation score, logged first; early stopping watches it
            instead of the loss.
        averaged: the optimizer keeps a moving average of the weights (`use_ema`):
            validate, score, checkpoint, stop early on and keep it (`AveragedWeights`).
        resumed_early_stopping: a resumed run's early-stopping state (its backup's).
        resumed_epoch: a run resumed from a mid-epoch backup: the end of that epoch.
    """
    checkpoints = os.path.join(out, rd.CHECKPOINT_DIR)
    os.makedirs(checkpoints, exist_ok=True)
    last = os.path.join(checkpoints, "last.keras")
    averaging = AveragedWeights() if averaged else None
    callbacks = [averaging] if averaging else []
    callbacks.append(NaNGuard(last, out))
    callbacks += [budget] if budget else []
    callbacks += [resumed_epoch] if resumed_epoch else []  # sees the budget's stop
    callbacks += [score] if score else []
    callbacks += [
        keras.callbacks.CSVLogger(os.path.join(out, rd.HISTORY_FILE), append=True),
        Checkpoint(
            os.path.join(checkpoints, "best.keras"),
            monitor="val_loss",
            initial_value_threshold=resumed_best,
        ),
        Checkpoint(last),
        keras.callbacks.TensorBoard(os.path.join(out, rd.LOG_DIR), write_graph=False),
    ]
    stopping = None
    if early_stopping_patience:
        monitor, mode = (score.key, SCORES[score.name]) if score else ("val_loss", "min")
        stopping = RunEarlyStopping(
            monitor, mode, early_stopping_patience, resumed=resumed_early_stopping
        )
        callbacks.append(stopping)
    callbacks += list(extra)
    callbacks.append(
        Backup(
            os.path.join(out, rd.BACKUP_DIR),
            save_freq=backup_every or "epoch",
            averaged=averaging,
            early_stopping=stopping,
        )
    )
    return callbacks
