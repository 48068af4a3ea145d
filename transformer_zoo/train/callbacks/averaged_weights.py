"""The weights' moving average in the model wherever the model is looked at."""

from __future__ import annotations

import contextlib

import keras


class AveragedWeights(keras.callbacks.SwapEMAWeights):
    """Puts the optimizer's exponential moving average of the weights (`use_ema=True`)
    in the model for all that looks at it outside the train steps: validation, the
    callbacks after this one at an epoch's end (scores, checkpoints, early stopping), and
    the model that `fit` leaves.

    Keras' `SwapEMAWeights(swap_on_epoch=True)` swaps the average in at each epoch's end
    and the raw weights back at the next epoch's start. At the end of `fit`,
    `finalize_variable_values` copies the optimizer's average slots into the model, and
    those hold the raw weights unless the last epoch was the planned last one (a time
    budget or early stopping ends a run sooner). So this keeps the average of the last
    epoch's end and puts it back when training ends. Put it first in the callbacks.
    `raw_weights()` puts the training weights back for a while (the crash backup).
    """

    def __init__(self):
        super().__init__(swap_on_epoch=True)
        self._averaged = None

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        self._averaged = [variable.numpy() for variable in self.model.trainable_variables]

    def on_train_end(self, logs=None):
        if self._averaged is not None:
            for variable, value in zip(self.model.trainable_variables, self._averaged, strict=True):
                variable.assign(value)
            self._averaged = None

    @contextlib.contextmanager
    def raw_weights(self):
        """The raw (training) weights in the model and their average in the optimizer's
        slots for the block, whichever Keras' swap left where."""
        swapped = self._ema_weights_in_model  # SwapEMAWeights' own record of the swap
        if swapped:
            self._swap_variables()
        try:
            yield
        finally:
            if swapped:
                self._swap_variables()
