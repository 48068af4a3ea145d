"""The task's score on the validation split at each epoch's end, as a Keras log value, so
that the CSV log, TensorBoard and early stopping see it beside the validation loss."""

from __future__ import annotations

from collections.abc import Callable

import keras

from transformer_zoo.train.config import SCORES


class ValidationScore(keras.callbacks.Callback):
    """Puts `score(model)` into the epoch's logs as `val_<name>`, or watches the value
    Keras' own metric logs under that name (`score=None`: a classifier's `val_accuracy`,
    over every validation example).

    It must come before the callbacks that read the logs (CSV log, TensorBoard, early
    stopping): Keras calls them in order, with the same dict. It never replaces a value
    Keras logged: a score of that name is one of the model's compiled metrics.

    Args:
        name: a key of `SCORES`.
        score: the model being trained → its score on (part of) the validation split;
            None: Keras' metric `name` is the score.
    """

    def __init__(self, name: str, score: Callable[[keras.Model], float] | None):
        super().__init__()
        if name not in SCORES:
            raise ValueError(f"`name` must be one of {sorted(SCORES)}. Received: {name!r}")
        self.name, self.score = name, score
        self.key = f"val_{name}"

    def on_epoch_end(self, epoch, logs=None):
        if logs is None:
            return
        if self.score is None:
            if self.key not in logs:
                raise ValueError(
                    f"Keras logged no {self.key} to watch: compile the model with the "
                    f"metric {self.name!r}, or pass a `score` that computes it."
                )
            return
        if self.key in logs:
            raise ValueError(
                f"Keras logs {self.key} already (a metric the model is compiled with): "
                "pass score=None to watch it rather than replace it."
            )
        logs[self.key] = float(self.score(self.model))
