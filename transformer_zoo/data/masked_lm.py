"""Masked-LM pretraining batches for `EncoderOnlyMaskedLM` (BERT's recipe, Devlin et al. 2019)."""

from __future__ import annotations

from collections.abc import Sequence

import keras
import tensorflow as tf

from transformer_zoo.data.bucketing import batch_by_length
from transformer_zoo.data.pipelines.common import (
    AUTOTUNE,
    check_model,
    packed_pairs,
    padding_mask,
    prefetched,
)
from transformer_zoo.text import Tokenizer
from transformer_zoo.text.tokenizer import BOS_ID, EOS_ID, PAD_ID


def mask_tokens(
    token_ids: tf.Tensor,
    seed: tf.Tensor,
    mask_id: int,
    vocabulary_size: int,
    mask_rate: float = 0.15,
    special_ids: Sequence[int] = (PAD_ID, BOS_ID, EOS_ID),
) -> tuple[tf.Tensor, tf.Tensor]:
    """BERT's corruption: pick `mask_rate` of the ordinary tokens; of those, 80% become
    `<mask>`, 10% a random ordinary token, 10% stay.

    Args:
        token_ids: (B, T) ids, 0 = padding.
        seed: (2,) integer seed of the stateless random ops.
        mask_id: the `<mask>` id.
        vocabulary_size: V; random replacements are drawn from ids above `mask_id`.
        mask_rate: the share of ordinary tokens to predict.
        special_ids: ids never picked besides `mask_id`: padding and the tokenizer's
            begin/end ids (`[CLS]`/`[SEP]` for WordPiece).

    Returns:
        The corrupted (B, T) ids and (B, T) labels: the original id where a token was
        picked, else 0 (not trained on).
    """
    special = [*special_ids, mask_id]
    ordinary = tf.reduce_all(tf.not_equal(token_ids[..., None], special), axis=-1)
    shape = tf.shape(token_ids)
    pick, how = (tf.random.stateless_uniform(shape, seed + offset) for offset in (0, 1))
    picked = ordinary & (pick < mask_rate)
    random_ids = tf.random.stateless_uniform(
        shape, seed + 2, minval=mask_id + 1, maxval=vocabulary_size, dtype=token_ids.dtype
    )
    corrupted = tf.where(picked & (how < 0.8), tf.cast(mask_id, token_ids.dtype), token_ids)
    corrupted = tf.where(picked & (how >= 0.8) & (how < 0.9), random_ids, corrupted)
    return corrupted, tf.where(picked, token_ids, tf.zeros_like(token_ids))


def masked_lm_dataset(
    texts: Sequence,
    tokenizer: Tokenizer,
    batch_size: int = 64,
    max_length: int = 128,
    mask_rate: float = 0.15,
    shuffle: bool = False,
    seed: int = 0,
    model: keras.Model | None = None,
    type_vocabulary_size: int = 2,
    **batching,
) -> tf.data.Dataset:
    """Masked-LM batches over texts or text pairs, packed as for classification.

    Masks are drawn anew every epoch (deterministically for `seed`), after padding,
    so padding and special tokens are never picked.

    Args:
        texts: plain strings or `(text, text2)` tuples (e.g. the built-in task's
            English and Chinese sides).
        tokenizer: the shared tokenizer; it needs a `<mask>` id.
        batch_size: examples per batch.
        max_length: the encoder's maximum.
        mask_rate: the share of ordinary tokens to predict.
        shuffle: reshuffle every epoch.
        seed: seed of the shuffle and of the masks.
        model: the model the batches are for, if it is to be checked
            (`pipelines.common.check_model`: its vocabulary must hold the tokenizer's ids, its
            `max_length` this one).
        type_vocabulary_size: the model's segments; below 2 a pair's second text is in
            segment 0 too (`text.formats.pair_row`), and with none there are no
            `segment_ids`.
        **batching: `drop_remainder`, `pad_to_bucket_boundary`, `keep_order` (see
            `batch_by_length`).

    Returns:
        A dataset of `({"token_ids": (B, T), "padding_mask": (B, T), "segment_ids": (B, T)},
        labels (B, T), sample_weight (B, T))`; labels are 0 where nothing is predicted.

    Raises:
        InputError: a text is not valid UTF-8 (named by its index in `texts`), or `model`
            is smaller than the data.
    """
    if tokenizer.mask_id is None:
        raise ValueError(
            "Masked-LM needs a tokenizer with a `<mask>` piece (train_tokenizer adds one)."
        )
    if tokenizer.vocabulary_size <= tokenizer.mask_id + 1:
        raise ValueError(f"The vocabulary has no ordinary tokens: {tokenizer!r}")
    if not 0.0 < mask_rate < 1.0:
        raise ValueError(f"`mask_rate` must be in (0, 1). Received: mask_rate={mask_rate}")
    if len(texts) == 0:
        raise ValueError("`texts` is empty: a pipeline needs at least one example.")
    check_model(model, max_length, {"vocabulary_size": tokenizer.vocabulary_size})
    # Never picked: padding and the begin/end ids (`[CLS]`/`[SEP]` for WordPiece).
    ends = ("pad", "bos", "eos", "cls", "sep")
    special = sorted({PAD_ID, *(i for k, i in tokenizer.special_ids.items() if k in ends)})
    data = batch_by_length(
        packed_pairs(texts, tokenizer, max_length, type_vocabulary_size=type_vocabulary_size),
        lambda e: tf.shape(e["token_ids"])[0],
        batch_size,
        max_length,
        shuffle_buffer=len(texts) if shuffle else 0,
        seed=seed,
        **batching,
    )
    seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True)

    def to_keras(batch, random):
        ids = batch["token_ids"]
        corrupted, labels = mask_tokens(
            ids,
            tf.stack([random, tf.cast(seed, tf.int64)]),
            tokenizer.mask_id,
            tokenizer.vocabulary_size,
            mask_rate,
            special,
        )
        inputs = {"token_ids": corrupted, "padding_mask": padding_mask(ids)}
        if type_vocabulary_size:  # a model without segments refuses the key
            inputs["segment_ids"] = batch["segment_ids"]
        return inputs, labels, tf.cast(tf.not_equal(labels, PAD_ID), tf.float32)

    return prefetched(tf.data.Dataset.zip(data, seeds).map(to_keras, num_parallel_calls=AUTOTUNE))
