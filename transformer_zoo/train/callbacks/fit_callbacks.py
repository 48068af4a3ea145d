"""The callbacks and the optimizer of a `train()` run."""

from __future__ import annotations

import os

import keras

from transformer_zoo import run_directory as rd
from transformer_zoo.train.callbacks.atomic_backup_and_restore import AtomicBackupAndRestore
from transformer_zoo.train.callbacks.atomic_model_checkpoint import AtomicModelCheckpoint
from transformer_zoo.train.callbacks.budgeted_cosine_decay import BudgetedCosineDecay
from transformer_zoo.train.callbacks.nan_guard import NaNGuard
from transformer_zoo.train.callbacks.time_budget import TimeBudget
from transformer_zoo.train.config import DEFAULT_ADAMW_RATE, TrainConfig
from transformer_zoo.train.family_setup import FamilySetup

ADAMW_WEIGHT_DECAY = 0.01  # as `optimizers.adamw_cosine`


def fit_callbacks(
    config: TrainConfig, out: str, resumed_best: float | None, budget: TimeBudget | None
) -> list:
    """NaN guard, time budget, CSV log, best and last checkpoints, TensorBoard and early
    stopping, writing into the run directory `out`.

    Args:
        config: the run's settings.
        out: the directory to write.
        resumed_best: a resumed run's best validation loss so far (the best checkpoint
            is replaced only by a better one).
        budget: the run's `TimeBudget`, if any.
    """
    checkpoints = os.path.join(out, rd.CHECKPOINT_DIR)
    os.makedirs(checkpoints, exist_ok=True)
    last = os.path.join(checkpoints, "last.keras")
    # Order matters at an epoch's end: the CSV row and the checkpoints are written
    # before the backup, so a crash in between repeats the epoch instead of losing it.
    callbacks = [NaNGuard(last)]
    callbacks += [budget] if budget else []
    callbacks += [
        keras.callbacks.CSVLogger(os.path.join(out, rd.HISTORY_FILE), append=True),
        AtomicModelCheckpoint(
            os.path.join(checkpoints, "best.keras"),
            monitor="val_loss",
            save_best_only=True,
            initial_value_threshold=resumed_best,
        ),
        AtomicModelCheckpoint(last),
        keras.callbacks.TensorBoard(os.path.join(out, rd.LOG_DIR), write_graph=False),
    ]
    if config.early_stopping_patience:
        callbacks.append(
            keras.callbacks.EarlyStopping(patience=config.early_stopping_patience, verbose=1)
        )
    return callbacks


def backup_callback(config: TrainConfig, out: str) -> AtomicBackupAndRestore:
    """The crash backup; last in the callback list (see `fit_callbacks`)."""
    return AtomicBackupAndRestore(
        os.path.join(out, rd.BACKUP_DIR), save_freq=config.backup_every or "epoch"
    )


def make_optimizer(setup: FamilySetup, config: TrainConfig, total_steps: int) -> tuple:
    """The optimizer, and the callback that sets its rate when a time budget can end
    the cosine schedule early."""
    # A short run (few examples, few epochs) keeps at least 4/5 of its steps for decay.
    warmup = min(config.warmup_steps, total_steps // 5)
    if config.optimizer == "adamw-cosine" and config.time_budget:
        schedule = BudgetedCosineDecay(
            config.learning_rate or DEFAULT_ADAMW_RATE,
            max(total_steps, warmup + 1),
            warmup,
            seconds=config.time_budget,
        )
        optimizer = keras.optimizers.AdamW(
            learning_rate=schedule.rate(0, 0.0), weight_decay=ADAMW_WEIGHT_DECAY
        )
        return optimizer, [schedule]
    if config.optimizer == "paper-adam":
        warmup = config.warmup_steps  # the schedule's peak; it does not end
    optimizer = setup.optimizer(config.optimizer, warmup, config.learning_rate, total_steps)
    return optimizer, []
