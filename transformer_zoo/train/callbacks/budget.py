"""Stop training after a wall-clock budget, or at a step count."""

from __future__ import annotations

import time

import keras


class Budget(keras.callbacks.Callback):
    """Sets `stop_training` once `seconds` have passed since `fit` began, or once the
    optimizer has taken `steps` steps, whichever comes first.

    The check runs at every batch end Keras reports (every `steps_per_execution`
    steps), so the epoch in progress is cut short; Keras then still validates and
    runs the epoch's callbacks (checkpoints, CSV log) before `fit` returns.

    Args:
        seconds: the time budget; None: none.
        steps: the step budget (optimizer steps, counted over the whole run, so a
            resumed run stops where the first would have); None: none.

    Attributes:
        stopped_by: `"time_budget"` or `"steps"` once the budget ended training, else None.
        spent: seconds of the budget an interrupted attempt already used (its backup's
            `seconds`): a resumed run goes on with the rest of the budget.

    Example:
    >>> budget = Budget(seconds=150.0)
    >>> budget.stopped_by is None
    True
    """

    def __init__(self, seconds: float | None = None, steps: int | None = None):
        super().__init__()
        if seconds is not None and not seconds > 0:
            raise ValueError(f"`seconds` must be positive. Received: seconds={seconds!r}")
        if steps is not None and not (isinstance(steps, int) and steps > 0):
            raise ValueError(f"`steps` must be a positive integer. Received: steps={steps!r}")
        self.seconds = None if seconds is None else float(seconds)
        self.steps = steps
        self.stopped_by = None
        self.spent = 0.0
        self._start = None

    def on_train_begin(self, logs=None):
        self._start = time.perf_counter() - self.spent
        self.stopped_by = None

    def on_train_batch_end(self, batch, logs=None):
        if self.steps is not None and int(self.model.optimizer.iterations.numpy()) >= self.steps:
            self.stopped_by = "steps"
        elif self.seconds is not None and time.perf_counter() - self._start >= self.seconds:
            self.stopped_by = "time_budget"
        if self.stopped_by:
            self.model.stop_training = True
