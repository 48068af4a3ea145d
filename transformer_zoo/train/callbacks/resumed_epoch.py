"""`ResumedEpoch`: the rest of an epoch a mid-epoch backup interrupted, ended where the
uninterrupted run ends it."""

from __future__ import annotations

import keras


class _EndOfResumedEpoch:
    """The `stop_training` that `ResumedEpoch` sets: true, so Keras ends the epoch, and not
    `True`, so that a stop another callback sets at the same step or epoch's end (the
    budget, early stopping, a user's `model.stop_training = True`) replaces it and is kept.
    With `True` a user's stop on that step was taken for the epoch's end and cleared."""

    def __bool__(self) -> bool:
        return True

    def __repr__(self) -> str:
        return "<the end of the resumed epoch>"


END_OF_RESUMED_EPOCH = _EndOfResumedEpoch()


class ResumedEpoch(keras.callbacks.Callback):
    """Ends the first epoch of a run resumed from a mid-epoch backup (`Backup(save_freq=N)`)
    at the step where the uninterrupted run ends it.

    `fit(initial_epoch=...)` trains whole epochs of `steps_per_epoch` steps; the resumed
    one has fewer left. At `end_step` this sets `stop_training` (to
    `END_OF_RESUMED_EPOCH`, unless a callback stopped the run already), so Keras stops the
    epoch, validates and runs the epoch's callbacks; at the epoch's end it clears that
    stop, and only that one (a callback's `True` is kept), so that the next epochs run.

    Keras starts an epoch's running means (the training loss and metrics) afresh and
    builds them only in the first step, so the resumed epoch's means cover the steps
    trained after the resume; its validation figures are the uninterrupted run's.

    Args:
        end_step: the optimizer step the resumed epoch ends at.
    """

    def __init__(self, end_step: int):
        super().__init__()
        self.end_step = end_step

    def on_train_batch_end(self, batch, logs=None):
        if self.end_step is None or int(self.model.optimizer.iterations.numpy()) < self.end_step:
            return
        self.end_step = None  # once
        if not self.model.stop_training:
            self.model.stop_training = END_OF_RESUMED_EPOCH

    def on_epoch_end(self, epoch, logs=None):
        if self.model.stop_training is END_OF_RESUMED_EPOCH:
            self.model.stop_training = False
