"""`ResumedEpoch`: the rest of an epoch a mid-epoch backup interrupted, ended where the
uninterrupted run ends it."""

from __future__ import annotations

import keras


class ResumedEpoch(keras.callbacks.Callback):
    """Ends the first epoch of a run resumed from a mid-epoch backup (`Backup(save_freq=N)`)
    at the step where the uninterrupted run ends it.

    `fit(initial_epoch=...)` trains whole epochs of `steps_per_epoch` steps; the resumed
    one has fewer left. At `end_step` this sets `stop_training`, so Keras stops the epoch,
    validates and runs the epoch's callbacks, then clears it at the epoch's end (unless a
    callback before it, the time or step budget, stopped the run at the same step) so that
    the next epochs run. Put it right after the budget and before early stopping, whose
    stop at the same epoch's end is kept.

    Keras starts an epoch's running means (the training loss and metrics) afresh and
    builds them only in the first step, so the resumed epoch's means cover the steps
    trained after the resume; its validation figures are the uninterrupted run's.

    Args:
        end_step: the optimizer step the resumed epoch ends at.
    """

    def __init__(self, end_step: int):
        super().__init__()
        self.end_step = end_step
        self._cut = False

    def on_train_batch_end(self, batch, logs=None):
        if self.end_step is None or int(self.model.optimizer.iterations.numpy()) < self.end_step:
            return
        self.end_step = None  # once
        if not self.model.stop_training:
            self.model.stop_training = self._cut = True

    def on_epoch_end(self, epoch, logs=None):
        if self._cut:
            self.model.stop_training = self._cut = False
