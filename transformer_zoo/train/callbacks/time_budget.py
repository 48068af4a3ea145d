"""Stop training after a wall-clock budget."""

from __future__ import annotations

import time

import keras


class TimeBudget(keras.callbacks.Callback):
    """Sets `stop_training` once `seconds` have passed since `fit` began.

    The check runs at every batch end Keras reports (every `steps_per_execution`
    steps), so the epoch in progress is cut short; Keras then still validates and
    runs the epoch's callbacks (checkpoints, CSV log) before `fit` returns.

    Args:
        seconds: the budget.

    Attributes:
        stopped: whether the budget ended training.

    Example:
    >>> budget = TimeBudget(150.0)
    >>> budget.stopped
    False
    """

    def __init__(self, seconds: float):
        super().__init__()
        if not seconds > 0:
            raise ValueError(f"`seconds` must be positive. Received: seconds={seconds!r}")
        self.seconds = float(seconds)
        self.stopped = False
        self._start = None

    def on_train_begin(self, logs=None):
        self._start = time.perf_counter()
        self.stopped = False

    def on_train_batch_end(self, batch, logs=None):
        if time.perf_counter() - self._start >= self.seconds:
            self.stopped = True
            self.model.stop_training = True
