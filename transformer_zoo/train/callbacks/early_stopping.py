"""`RunEarlyStopping`: Keras' early stopping, whose state a crash backup keeps."""

from __future__ import annotations

from typing import NamedTuple

import keras
import numpy as np


class EarlyStoppingState(NamedTuple):
    """Where early stopping stood at a backup: the best value so far, the epochs waited
    since (`wait`), the best epoch (from 0) and its weights (`model.get_weights()`)."""

    best: float | None
    wait: int
    best_epoch: int
    best_weights: list[np.ndarray] | None


class RunEarlyStopping(keras.callbacks.EarlyStopping):
    """`keras.callbacks.EarlyStopping(restore_best_weights=True, verbose=1)` that a
    resumed run continues: Keras' callback starts every `fit` from nothing, so a run
    interrupted after its best epoch would wait `patience` epochs more and, with no
    best weights in memory, keep its last epoch. `Backup` stores `state()` (and the best
    epoch's weights) with each backup; the rerun passes it back as `resumed`.

    Args:
        monitor: the logged value to watch (`"val_loss"`, `"val_wer"`, ...).
        mode: `"min"` or `"max"`.
        patience: epochs without a better value before training stops.
        resumed: the state of the interrupted run, or None.
    """

    def __init__(
        self, monitor: str, mode: str, patience: int, resumed: EarlyStoppingState | None = None
    ):
        super().__init__(
            monitor=monitor, mode=mode, patience=patience, restore_best_weights=True, verbose=1
        )
        self.resumed = resumed

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        if self.resumed is not None:
            self.best, self.wait, self.best_epoch, self.best_weights = self.resumed

    def state(self) -> EarlyStoppingState:
        """The state to resume from: what `on_train_begin` restores."""
        best = None if self.best is None else float(self.best)
        return EarlyStoppingState(best, int(self.wait), int(self.best_epoch), self.best_weights)
