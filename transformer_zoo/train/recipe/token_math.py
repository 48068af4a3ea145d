"""Per-token pieces shared by the loss and the metrics: log-probabilities and the weights
of the positions that count (labels ≠ padding, times any sample weight)."""

from __future__ import annotations

import keras
from keras import ops


def log_probabilities(y_pred, from_logits: bool):
    """(…, V) float32 log-probabilities from logits or probabilities (exact under
    mixed precision: the cast comes first)."""
    y_pred = ops.cast(y_pred, "float32")
    if from_logits:
        return ops.log_softmax(y_pred, axis=-1)
    return ops.log(ops.clip(y_pred, keras.config.epsilon(), 1.0))


def label_log_probability(log_probs, y_true):
    """log p(label) at every position: (…, V) and (…) integer labels → (…)."""
    index = ops.expand_dims(ops.cast(y_true, "int32"), -1)
    return ops.squeeze(ops.take_along_axis(log_probs, index, axis=-1), -1)


def token_weights(y_true, pad_id: int | None, sample_weight=None, dtype="float32"):
    """1 where the label is not `pad_id` (everywhere with None: windows of a token stream,
    where every id is a token, GPT-2's id 0 too), times `sample_weight` ((B, T) or (B,))."""
    if pad_id is None:
        weights = ops.ones_like(y_true, dtype)
    else:
        weights = ops.cast(ops.not_equal(ops.cast(y_true, "int32"), pad_id), dtype)
    if sample_weight is not None:
        sample_weight = ops.cast(sample_weight, dtype)
        if len(sample_weight.shape) < len(weights.shape):
            sample_weight = ops.expand_dims(sample_weight, -1)
        weights = weights * sample_weight
    return weights
