"""The paper's learning-rate schedule (Vaswani et al. 2017, §5.3)."""

from __future__ import annotations

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="transformer_zoo")
class TransformerSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """lrate = scale · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5).

    The rate grows linearly for `warmup_steps` steps, peaks at
    scale · (d_model · warmup_steps)^-0.5, then decays as step^-0.5. The paper counts
    steps from 1 while Keras' `optimizer.iterations` starts at 0, so the schedule is
    evaluated at `iterations + 1` (step 0 would give an infinite rate).

    Args:
        d_model: the model width D.
        warmup_steps: the paper's warmup (4000).
        scale: a constant factor (1.0 in the paper).

    Example:
    >>> schedule = TransformerSchedule(d_model=512, warmup_steps=4000)
    >>> round(float(schedule(3999)), 7)  # the peak, at step 4000
    0.0006988
    """

    def __init__(self, d_model: int, warmup_steps: int = 4000, scale: float = 1.0):
        if not isinstance(d_model, int) or d_model < 1:
            raise ValueError(f"`d_model` must be a positive integer. Received: d_model={d_model!r}")
        if not isinstance(warmup_steps, int) or warmup_steps < 1:
            raise ValueError(
                f"`warmup_steps` must be a positive integer. Received: warmup_steps={warmup_steps!r}"
            )
        if scale <= 0:
            raise ValueError(f"`scale` must be positive. Received: scale={scale!r}")
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self.scale = scale

    def __call__(self, step):
        step = ops.cast(step, "float32") + 1.0
        rate = ops.minimum(ops.rsqrt(step), step * float(self.warmup_steps) ** -1.5)
        return self.scale * float(self.d_model) ** -0.5 * rate

    def get_config(self):
        return {"d_model": self.d_model, "warmup_steps": self.warmup_steps, "scale": self.scale}
