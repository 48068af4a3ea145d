"""Perplexity: exp of the mean token cross-entropy over non-padding positions."""

from __future__ import annotations

import keras
from keras import ops

from transformer_zoo.train.token_math import (
    label_log_probability,
    log_probabilities,
    token_weights,
)


@keras.saving.register_keras_serializable(package="transformer_zoo")
class Perplexity(keras.metrics.Metric):
    """exp(Σ -log p(label) / N) over the N non-padding positions seen since the last reset.

    Unlike the training loss it has no label smoothing, so it is comparable across
    recipes; it accumulates sums, so the epoch's value is the corpus perplexity, not a
    mean of batch perplexities.

    Args:
        pad_id: the label id that marks positions to skip (0).
        from_logits: whether `y_pred` are logits or probabilities.
        name: the metric name.
        dtype: the metric dtype.

    Call arguments (`update_state`):
        y_true: (B, T) integer labels.
        y_pred: (B, T, V) logits (or probabilities).
        sample_weight: optional (B, T) or (B,) weights.

    Example:
    >>> metric = Perplexity()
    >>> metric.update_state([[1, 0]], [[[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]])
    >>> round(float(metric.result()), 4)  # uniform over 4 classes
    4.0
    """

    def __init__(
        self, pad_id: int = 0, from_logits: bool = True, name: str = "perplexity", dtype=None
    ):
        super().__init__(name=name, dtype=dtype)
        self.pad_id = pad_id
        self.from_logits = from_logits
        self.total = self.add_variable((), initializer="zeros", name="total")
        self.count = self.add_variable((), initializer="zeros", name="count")

    def update_state(self, y_true, y_pred, sample_weight=None):
        nll = -label_log_probability(log_probabilities(y_pred, self.from_logits), y_true)
        weights = token_weights(y_true, self.pad_id, sample_weight)
        self.total.assign_add(ops.cast(ops.sum(nll * weights), self.dtype))
        self.count.assign_add(ops.cast(ops.sum(weights), self.dtype))

    def result(self):
        return ops.exp(ops.divide_no_nan(self.total, self.count))

    def reset_state(self):
        self.total.assign(0.0)
        self.count.assign(0.0)

    def get_config(self):
        return {**super().get_config(), "pad_id": self.pad_id, "from_logits": self.from_logits}
