"""Optimizers of the recipe: the paper's Adam with its warmup schedule, or AdamW with a
cosine decay. Both return plain Keras optimizers, serialized with the model."""

from __future__ import annotations

import keras

from transformer_zoo.train.config import OPTIMIZERS
from transformer_zoo.train.recipe.transformer_schedule import TransformerSchedule


def paper_adam(
    d_model: int, warmup_steps: int = 4000, scale: float = 1.0, **options
) -> keras.optimizers.Adam:
    """Adam with β₁ = 0.9, β₂ = 0.98, ε = 1e-9 and the paper's warmup schedule (§5.3).

    Args:
        d_model: the model width D.
        warmup_steps: steps of linear warmup (4000 in the paper; a few hundred suits
            the tiny presets).
        scale: factor on the schedule.
        **options: more arguments of `keras.optimizers.Adam` (`use_ema`, ...).
    """
    return keras.optimizers.Adam(
        learning_rate=TransformerSchedule(d_model, warmup_steps, scale),
        beta_1=0.9,
        beta_2=0.98,
        epsilon=1e-9,
        **options,
    )


def adamw_cosine(
    learning_rate: float,
    total_steps: int,
    warmup_steps: int = 0,
    weight_decay: float = 0.01,
    final_fraction: float = 0.0,
    clip_norm: float | None = None,
    **options,
) -> keras.optimizers.AdamW:
    """AdamW (Loshchilov & Hutter 2019) whose rate rises linearly from 0 over
    `warmup_steps`, then follows a cosine down to `final_fraction · learning_rate` at
    `total_steps`, and stays there.

    Weight decay applies to every variable (the exclusion list of
    `AdamW.exclude_from_weight_decay` is not saved with the optimizer).

    Args:
        learning_rate: the peak rate.
        total_steps: steps of warmup plus decay.
        warmup_steps: steps of linear warmup.
        weight_decay: the decoupled weight decay.
        final_fraction: the rate at the end as a share of the peak.
        clip_norm: clip the gradients' global norm to this; None: no clipping.
        **options: more arguments of `keras.optimizers.AdamW` (`use_ema`, ...).
    """
    if not isinstance(total_steps, int) or not 0 <= warmup_steps < total_steps:
        raise ValueError(
            "Expected integers 0 ≤ warmup_steps < total_steps. Received: "
            f"warmup_steps={warmup_steps!r}, total_steps={total_steps!r}"
        )
    schedule = keras.optimizers.schedules.CosineDecay(
        initial_learning_rate=0.0 if warmup_steps else learning_rate,
        decay_steps=total_steps - warmup_steps,
        alpha=final_fraction,
        warmup_target=learning_rate if warmup_steps else None,
        warmup_steps=warmup_steps,
    )
    return keras.optimizers.AdamW(
        learning_rate=schedule, weight_decay=weight_decay, global_clipnorm=clip_norm, **options
    )


DEFAULT_ADAMW_RATE = 1e-3
ADAMW_WEIGHT_DECAY = 0.01


def capped_warmup(warmup_steps: int, total_steps: int) -> int:
    """The warmup adamw-cosine runs: at most a fifth of the run's `total_steps`, so that
    a short run keeps 4/5 of its steps for the decay (`step_plan.plan_steps` reports it)."""
    return min(warmup_steps, total_steps // 5)


def make_optimizer(
    name: str,
    d_model: int,
    total_steps: int,
    warmup_steps: int,
    learning_rate: float | None = None,
    time_budget: float | None = None,
    weight_decay: float | None = None,
    min_learning_rate: float | None = None,
    clip_norm: float | None = None,
    ema_momentum: float | None = None,
) -> tuple[keras.optimizers.Optimizer, list]:
    """A run's optimizer, and the callbacks that drive its rate (if any).

    Args:
        name: `"paper-adam"` (the paper's Adam and schedule; `learning_rate` is a factor
            on it, default 1) or `"adamw-cosine"` (AdamW, peak `learning_rate`, default
            1e-3, warmup then a cosine to 0 at `total_steps`).
        d_model: the model width D (the paper's schedule scales with D^-0.5).
        total_steps: the run's planned optimizer steps.
        warmup_steps: steps of warmup; adamw-cosine keeps at least 4/5 of a short run's
            steps for the decay.
        learning_rate: see `name`.
        time_budget: with adamw-cosine, seconds after which the cosine must have reached
            its floor even if fewer steps ran (`BudgetedCosineDecay`, a callback).
        weight_decay: AdamW's decoupled weight decay (default `ADAMW_WEIGHT_DECAY`).
        min_learning_rate: adamw-cosine's floor, where the cosine ends (default 0).
        clip_norm: clip the gradients' global norm to this (either optimizer).
        ema_momentum: keep an exponential moving average of the weights with this
            momentum (Keras' `use_ema`; `callbacks.averaged_weights` puts it to use).
    """
    if name not in OPTIMIZERS:
        raise ValueError(f"`optimizer` must be one of {OPTIMIZERS}. Received: {name!r}")
    ema = {"use_ema": True, "ema_momentum": ema_momentum} if ema_momentum else {}
    if name == "paper-adam":  # warmup is the schedule's peak; the schedule does not end
        optimizer = paper_adam(d_model, max(1, warmup_steps), learning_rate or 1.0, **ema)
        optimizer.global_clipnorm = clip_norm
        return optimizer, []
    peak = learning_rate or DEFAULT_ADAMW_RATE
    warmup = capped_warmup(warmup_steps, total_steps)
    total = max(total_steps, warmup + 1)
    decay = ADAMW_WEIGHT_DECAY if weight_decay is None else weight_decay
    floor = min(1.0, (min_learning_rate or 0.0) / peak)
    if time_budget:
        from transformer_zoo.train.callbacks.budgeted_cosine_decay import BudgetedCosineDecay

        schedule = BudgetedCosineDecay(
            peak, total, warmup, seconds=time_budget, final_fraction=floor
        )
        optimizer = keras.optimizers.AdamW(
            learning_rate=schedule.rate(0, 0.0),
            weight_decay=decay,
            global_clipnorm=clip_norm,
            **ema,
        )
        return optimizer, [schedule]
    return adamw_cosine(peak, total, warmup, decay, floor, clip_norm, **ema), []
