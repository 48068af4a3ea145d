"""Token accuracy over the positions that are trained on (labels ≠ padding)."""

from __future__ import annotations

import keras
from keras import ops

from transformer_zoo.train.recipe.token_math import token_weights


@keras.saving.register_keras_serializable(package="transformer_zoo")
class MaskedAccuracy(keras.metrics.Metric):
    """Share of non-padding positions whose highest-scoring class is the label.

    Args:
        pad_id: the label id that marks positions to skip (0); None skips none.
        name: the metric name.
        dtype: the metric dtype.

    Call arguments (`update_state`):
        y_true: (B, T) integer labels.
        y_pred: (B, T, V) logits or probabilities.
        sample_weight: optional (B, T) or (B,) weights.

    Example:
    >>> metric = MaskedAccuracy()
    >>> metric.update_state([[2, 1, 0]], [[[0, 0, 9], [0, 0, 9], [9, 0, 0]]])
    >>> float(metric.result())  # 1 of the 2 non-padding positions is right
    0.5
    """

    def __init__(self, pad_id: int | None = 0, name: str = "masked_accuracy", dtype=None):
        super().__init__(name=name, dtype=dtype)
        self.pad_id = pad_id
        self.correct = self.add_variable((), initializer="zeros", name="correct")
        self.count = self.add_variable((), initializer="zeros", name="count")

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = ops.cast(y_true, "int32")
        predictions = ops.cast(ops.argmax(y_pred, axis=-1), "int32")
        weights = token_weights(y_true, self.pad_id, sample_weight, self.dtype)
        hits = ops.cast(ops.equal(predictions, y_true), self.dtype) * weights
        self.correct.assign_add(ops.sum(hits))
        self.count.assign_add(ops.sum(weights))

    def result(self):
        return ops.divide_no_nan(self.correct, self.count)

    def reset_state(self):
        self.correct.assign(0.0)
        self.count.assign(0.0)

    def get_config(self):
        return {**super().get_config(), "pad_id": self.pad_id}
