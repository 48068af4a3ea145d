"""The paper's loss: cross-entropy with label smoothing (§5.4), padding ignored."""

from __future__ import annotations

import keras
from keras import ops

from transformer_zoo.layers.masking import with_keras_mask
from transformer_zoo.train.recipe.token_math import label_log_probability, log_probabilities


@keras.saving.register_keras_serializable(package="transformer_zoo")
class MaskedSparseCategoricalCrossentropy(keras.losses.Loss):
    """Sparse categorical cross-entropy with label smoothing that ignores padding labels.

    The smoothed target puts 1 - ε + ε/V on the true class and ε/V on every other
    class (the convention of `keras.losses.CategoricalCrossentropy`), so per token

        loss = (1 - ε) · (-log p_y) + ε · mean_v(-log p_v).

    Positions whose label is `pad_id` contribute nothing, and with the default
    reduction the batch loss is the mean over the other positions, exactly like Keras'
    `ignore_class`: a batch with much padding is not down-weighted. Where the
    predictions carry a Keras mask (`Embedding(mask_zero=True)` before the blocks), the
    mean is over the positions that both it and the labels keep, as with `ignore_class`.
    Sample weights (the pipelines' `labels != 0`, or one per sequence) multiply as usual. Logits are cast to float32
    first, so the loss is exact under `mixed_bfloat16`.

    Args:
        label_smoothing: ε (the paper's ε_ls = 0.1).
        pad_id: the label id to ignore (0); None ignores nothing.
        from_logits: whether `y_pred` are logits (the models return logits) or
            probabilities.
        reduction: a Keras reduction; `"sum_over_batch_size"` averages over the
            non-padding positions, `"none"` returns per-position losses (0 at padding).
        name: the loss name.
        dtype: the loss dtype.

    Call arguments:
        y_true: (B, T) integer labels.
        y_pred: (B, T, V) logits (or probabilities).
        sample_weight: optional (B, T) or (B,) weights.

    Returns:
        A scalar, or (B, T) losses with `reduction="none"`.

    Example:
    >>> loss = MaskedSparseCategoricalCrossentropy(label_smoothing=0.1)
    >>> float(loss([[1, 0]], [[[0.0, 0.0], [5.0, 0.0]]]))  # the padding position is ignored
    0.6931...
    """

    def __init__(
        self,
        label_smoothing: float = 0.1,
        pad_id: int | None = 0,
        from_logits: bool = True,
        reduction: str = "sum_over_batch_size",
        name: str = "masked_sparse_categorical_crossentropy",
        dtype=None,
    ):
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(
                f"`label_smoothing` must be in [0, 1). Received: label_smoothing={label_smoothing}"
            )
        self.label_smoothing = label_smoothing
        self.pad_id = pad_id
        self.from_logits = from_logits

    def call(self, y_true, y_pred):
        y_true = ops.cast(y_true, "int32")
        log_probs = log_probabilities(y_pred, self.from_logits)  # (B, T, V)
        nll = -label_log_probability(log_probs, y_true)  # (B, T)
        eps = self.label_smoothing
        losses = (1.0 - eps) * nll - eps * ops.mean(log_probs, axis=-1)
        if self.pad_id is None:
            return losses
        keep = ops.not_equal(y_true, self.pad_id)
        # Zeroed, and marked as Keras' own `ignore_class` marks them: `Loss.__call__` then
        # joins this mask with the predictions' Keras mask (`Embedding(mask_zero=True)`'s,
        # passed on by the blocks) and averages over the positions both keep, once.
        return with_keras_mask(losses * ops.cast(keep, losses.dtype), keep)

    def __call__(self, y_true, y_pred, sample_weight=None):
        if sample_weight is not None:
            sample_weight = ops.convert_to_tensor(sample_weight)
            if len(sample_weight.shape) == 1:  # (B,): one weight per sequence
                sample_weight = ops.expand_dims(sample_weight, -1)
        return super().__call__(y_true, y_pred, sample_weight)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "label_smoothing": self.label_smoothing,
                "pad_id": self.pad_id,
                "from_logits": self.from_logits,
            }
        )
        return config
