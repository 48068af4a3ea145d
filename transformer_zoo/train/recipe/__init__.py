"""The paper's recipe as serializable Keras objects: the padding-masked, label-smoothed
loss (§5.4), token accuracy and perplexity, the warmup schedule (§5.3) and the optimizers."""

import keras_hub

from transformer_zoo.train.recipe.masked_accuracy import MaskedAccuracy
from transformer_zoo.train.recipe.masked_sparse_categorical_crossentropy import (
    MaskedSparseCategoricalCrossentropy,
)
from transformer_zoo.train.recipe.optimizers import adamw_cosine, paper_adam
from transformer_zoo.train.recipe.transformer_schedule import TransformerSchedule


def perplexity(pad_id: int | None = 0) -> keras_hub.metrics.Perplexity:
    """Corpus perplexity over the non-padding positions (every position with `pad_id`
    None): keras-hub's `Perplexity`, which sums the token log-losses and counts across
    batches (no label smoothing)."""
    return keras_hub.metrics.Perplexity(from_logits=True, mask_token_id=pad_id, name="perplexity")


__all__ = [
    "MaskedAccuracy",
    "MaskedSparseCategoricalCrossentropy",
    "TransformerSchedule",
    "adamw_cosine",
    "paper_adam",
    "perplexity",
]
