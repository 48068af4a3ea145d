"""Optimizers of the recipe: the paper's Adam with its warmup schedule, or AdamW with a
cosine decay. Both return plain Keras optimizers, serialized with the model."""

from __future__ import annotations

import keras

from transformer_zoo.train.recipe.transformer_schedule import TransformerSchedule


def paper_adam(d_model: int, warmup_steps: int = 4000, scale: float = 1.0) -> keras.optimizers.Adam:
    """Adam with β₁ = 0.9, β₂ = 0.98, ε = 1e-9 and the paper's warmup schedule (§5.3).

    Args:
        d_model: the model width D.
        warmup_steps: steps of linear warmup (4000 in the paper; a few hundred suits
            the tiny presets).
        scale: factor on the schedule.
    """
    return keras.optimizers.Adam(
        learning_rate=TransformerSchedule(d_model, warmup_steps, scale),
        beta_1=0.9,
        beta_2=0.98,
        epsilon=1e-9,
    )


def adamw_cosine(
    learning_rate: float,
    total_steps: int,
    warmup_steps: int = 0,
    weight_decay: float = 0.01,
    final_fraction: float = 0.0,
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
    return keras.optimizers.AdamW(learning_rate=schedule, weight_decay=weight_decay)
