"""`StepPlan`: how long a run trains (its epochs, steps per epoch and warmup), sized to
its data by `plan_steps`, and the line that says so before the first step."""

from __future__ import annotations

import math
from dataclasses import dataclass

from transformer_zoo.errors import count
from transformer_zoo.train.config import MAX_EPOCHS, TARGET_STEPS, WARMUP_SHARE, TrainConfig
from transformer_zoo.train.recipe.optimizers import capped_warmup

MAX_VALIDATIONS = 10  # a run of `--steps` without `--eval-every` validates at most this often


@dataclass(frozen=True)
class StepPlan:
    """How long a run trains: `epochs` of `steps_per_epoch` steps, with `warmup_steps`.

    An epoch is one pass over the training batches rounded up to whole executions of
    `steps_per_execution` steps (the data repeats), so that the progress bar, the
    optimizer's step count and the cosine schedule agree.
    """

    epochs: int
    steps_per_epoch: int
    warmup_steps: int
    batches: int  # in one pass over the training split
    chosen: tuple[str, ...]  # the settings sized to the data
    total_steps: int = 0  # the run's steps (with `--steps`, the last epoch may be cut short)
    warmup_given: int | None = None  # a warmup given (or the built-in data's) cut to a fifth

    def __post_init__(self):
        if not self.total_steps:
            object.__setattr__(self, "total_steps", self.epochs * self.steps_per_epoch)

    def describe(
        self, config: TrainConfig, dropout: float, head_dropout: float | None = None
    ) -> str:
        """One line: what the run will do, and which settings were chosen for the data.
        `dropout` is the model's (with `init` and no `dropout` set, the initial model's);
        `head_dropout` a classifier head's, said where it differs (a fresh head after an
        `init` classifier takes that classifier's head rate)."""
        total = self.total_steps
        rate = config.learning_rate
        peak = f"peak {rate:g}" if config.optimizer == "adamw-cosine" else f"factor {rate or 1:g}"
        if config.steps is not None:
            rounded = (
                f" (--steps {config.steps} in whole executions)" if total != config.steps else ""
            )
            asked = config.eval_every
            rounded_too = (
                f" (--eval-every {asked} in whole executions)"
                if asked is not None and asked != self.steps_per_epoch
                else ""
            )
            length = (
                f"{count(total, 'step')}{rounded}, validating every {self.steps_per_epoch}"
                f"{rounded_too} (batch"
            )
        else:
            length = f"{count(self.epochs, 'epoch')} of {self.steps_per_epoch} steps ({count(total, 'step')}, batch"
        own = " (the initial model's)" if config.init is not None and config.dropout is None else ""
        head = ""
        if head_dropout is not None and head_dropout != dropout:
            head = f", the head's {head_dropout:g}"
        line = (
            f"Training {length} {config.batch_size}): {config.optimizer}, {peak}, warmup "
            f"{count(self.warmup_steps, 'step')}, dropout {dropout:g}{own}{head}, "
            f"{config.precision}."
        )
        if config.ema_momentum:
            line = line[:-1] + f", weights averaged (EMA {config.ema_momentum:g})."
        if self.chosen:
            line += (
                f" Chosen for the data ({count(self.batches, 'batch', 'batches')} per pass): "
                + " and ".join(self.chosen)
                + "; --epochs (or --steps, --eval-every) and --warmup-steps set them."
            )
        if self.warmup_given is not None:
            line += (
                f" The warmup of {count(self.warmup_given, 'step')} is cut to a fifth of "
                f"the {total} steps, leaving the learning rate four fifths of them to decay."
            )
        return line


def plan_steps(config: TrainConfig, batches: int, steps_per_execution: int) -> StepPlan:
    """The run's `StepPlan` for `batches` training batches per pass: the given epochs and
    warmup, or (left None, on user data) about `TARGET_STEPS` steps and `WARMUP_SHARE` of
    them as warmup; adamw-cosine's warmup is at most a fifth of the steps (a longer one
    is cut, and kept as `warmup_given`). With `config.steps`, that many steps (whole executions) in epochs of
    `eval_every` steps (default: a pass over the data, at most `MAX_VALIDATIONS` a run);
    the last epoch ends at the step count (`callbacks.budget.Budget`)."""
    execution = max(1, steps_per_execution)

    def whole(steps: int) -> int:  # whole executions
        return max(1, math.ceil(steps / execution)) * execution

    steps_per_epoch = whole(batches)
    chosen = []
    epochs = config.epochs
    total = None
    if config.steps is not None:
        total = whole(config.steps)
        period = config.eval_every
        if period is None:
            period = max(steps_per_epoch, math.ceil(total / MAX_VALIDATIONS))
            if total < batches:
                chosen.append("one validation, at the end (the run is shorter than a pass)")
            else:
                chosen.append(f"a validation every pass over the data, at most {MAX_VALIDATIONS}")
        steps_per_epoch = min(whole(period), total)
        epochs = math.ceil(total / steps_per_epoch)
    elif epochs is None:
        epochs = min(MAX_EPOCHS, max(1, math.ceil(TARGET_STEPS / steps_per_epoch)))
        chosen.append(f"{epochs} epochs for about {TARGET_STEPS} steps")
    total = total or epochs * steps_per_epoch
    warmup, given = config.warmup_steps, None
    if warmup is None:
        warmup = round(WARMUP_SHARE * total)
        chosen.append(f"warmup {WARMUP_SHARE:.0%} of the steps")
    if config.optimizer == "adamw-cosine" and capped_warmup(warmup, total) < warmup:
        warmup, given = capped_warmup(warmup, total), warmup  # cut, not chosen
    return StepPlan(epochs, steps_per_epoch, warmup, batches, tuple(chosen), total, given)
