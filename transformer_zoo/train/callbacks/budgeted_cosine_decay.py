"""A warmup + cosine learning rate that also ends when a time budget does."""

from __future__ import annotations

import math
import time

import keras


class BudgetedCosineDecay(keras.callbacks.Callback):
    """Sets the optimizer's rate before every execution: linear warmup over
    `warmup_steps`, then a cosine from `peak` down to `final_fraction · peak`.

    The cosine's progress is the larger of the step progress
    (step - warmup) / (total_steps - warmup) and the time progress elapsed / seconds; the
    warmup counts steps, scaled by the cosine of the time progress, so that a budget that
    ends within it still ends at the floor, while the time compilation takes (which the
    budget counts) only lowers the warmup's rate a little rather than skipping it. On a
    machine fast enough to run `total_steps` within the budget it follows the step
    schedule of `optimizers.adamw_cosine` (but for its warmup, one step ahead: step 0
    trains at peak / warmup where Keras' `CosineDecay` gives 0); on a slower (or busier)
    one the rate reaches its floor when the budget ends, so a run cut short by `Budget`
    still gets the low-rate end of the schedule, where much of the final accuracy comes
    from.

    The optimizer must have a float learning rate (Keras keeps it in a variable that a
    callback may assign, as `ReduceLROnPlateau` does).

    Args:
        peak: the highest rate, reached at the end of warmup.
        total_steps: steps of warmup plus decay.
        warmup_steps: steps of linear warmup.
        seconds: the time budget; None decays by steps only.
        final_fraction: the rate at the end as a share of `peak`.

    Attributes:
        spent: seconds an interrupted attempt already trained (its backup's `seconds`),
            counted into the time progress of a resumed run.

    Example:
    >>> schedule = BudgetedCosineDecay(1e-3, total_steps=1000, warmup_steps=100)
    >>> round(schedule.rate(step=550, elapsed=0.0), 6)  # half way through the cosine
    0.0005
    """

    def __init__(
        self,
        peak: float,
        total_steps: int,
        warmup_steps: int = 0,
        seconds: float | None = None,
        final_fraction: float = 0.0,
    ):
        super().__init__()
        if not 0 <= warmup_steps < total_steps:
            raise ValueError(
                "Expected 0 ≤ warmup_steps < total_steps. Received: "
                f"warmup_steps={warmup_steps!r}, total_steps={total_steps!r}"
            )
        if seconds is not None and not seconds > 0:
            raise ValueError(f"`seconds` must be positive or None. Received: seconds={seconds!r}")
        self.peak = float(peak)
        self.total_steps = int(total_steps)
        self.warmup_steps = int(warmup_steps)
        self.seconds = seconds
        self.final_fraction = float(final_fraction)
        self.spent = 0.0
        self._start = None

    def rate(self, step: int, elapsed: float) -> float:
        """The rate at optimizer step `step` (from 0), `elapsed` seconds into training."""
        clock = elapsed / self.seconds if self.seconds else 0.0
        if step < self.warmup_steps:  # the warmup, scaled down by the clock's cosine
            return self.peak * (step + 1) / self.warmup_steps * self._decay(clock)
        progress = (step - self.warmup_steps) / (self.total_steps - self.warmup_steps)
        return self.peak * self._decay(max(progress, clock))

    def _decay(self, progress: float) -> float:
        """The cosine from 1 at `progress` 0 down to `final_fraction` at 1 and past it."""
        cosine = 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))
        return self.final_fraction + (1.0 - self.final_fraction) * cosine

    def on_train_begin(self, logs=None):
        self._start = time.perf_counter() - self.spent

    def on_train_batch_begin(self, batch, logs=None):
        step = int(self.model.optimizer.iterations.numpy())
        self.model.optimizer.learning_rate = self.rate(step, time.perf_counter() - self._start)
