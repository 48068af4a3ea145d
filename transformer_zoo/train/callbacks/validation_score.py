"""The task's score on the validation split at each epoch's end, as a Keras log value, so
that the CSV log, TensorBoard and early stopping see it beside the validation loss."""

from __future__ import annotations

from collections.abc import Callable

import keras

from transformer_zoo.train.config import SCORES


class ValidationScore(keras.callbacks.Callback):
    """Puts `score(model)` into the epoch's logs as `val_<name>`.

    It must come before the callbacks that read the logs (CSV log, TensorBoard, early
    stopping): Keras calls them in order, with the same dict.

    Args:
        name: a key of `SCORES`.
        score: the model being trained → its score on (part of) the validation split.
    """

    def __init__(self, name: str, score: Callable[[keras.Model], float]):
        super().__init__()
        if name not in SCORES:
            raise ValueError(f"`name` must be one of {sorted(SCORES)}. Received: {name!r}")
        self.name, self.score = name, score
        self.key = f"val_{name}"

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs[self.key] = float(self.score(self.model))
