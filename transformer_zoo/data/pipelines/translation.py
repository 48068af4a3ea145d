"""The translation pipeline: teacher-forced batches for `EncoderDecoder`."""

from __future__ import annotations

from collections.abc import Sequence

import keras
import tensorflow as tf

from transformer_zoo.data.bucketing import batch_by_length, tokenize_columns
from transformer_zoo.data.examples import TranslationPair
from transformer_zoo.data.pipelines.common import (
    AUTOTUNE,
    check_arguments,
    check_model,
    loss_weights,
    padding_mask,
    prefetched,
    sequence_length,
)
from transformer_zoo.text import Tokenizer
from transformer_zoo.text.tokenizer import BOS_ID, EOS_ID


def translation_dataset(
    pairs: Sequence[TranslationPair],
    source_tokenizer: Tokenizer,
    target_tokenizer: Tokenizer,
    batch_size: int = 64,
    max_source_length: int = 128,
    max_target_length: int = 128,
    shuffle: bool = False,
    seed: int = 0,
    model: keras.Model | None = None,
    **batching,
) -> tf.data.Dataset:
    """Teacher-forced translation batches for `EncoderDecoder`.

    Encoder inputs are the source pieces + `<eos>`; decoder inputs are `<bos>` + the
    target pieces (the targets shifted right); labels are the target pieces + `<eos>`.

    Args:
        pairs: the examples.
        source_tokenizer: tokenizer of the sources.
        target_tokenizer: tokenizer of the targets (may be `source_tokenizer`).
        batch_size: examples per batch.
        max_source_length: the encoder's maximum; longer sources are cut.
        max_target_length: the decoder's maximum; longer targets are cut, and then
            have no `<eos>` label.
        shuffle: reshuffle every epoch (deterministically for `seed`).
        seed: the shuffle seed.
        model: the model the batches are for, if it is to be checked (`check_model`): its
            vocabularies must hold the tokenizers' ids, its `max_length` both maxima.
        **batching: `drop_remainder`, `pad_to_bucket_boundary`, `keep_order` (see
            `batch_by_length`: batches group examples of similar length, shuffled or not;
            `keep_order=True` batches them in order, for `model.predict`).

    Returns:
        A dataset of `({"encoder_token_ids": (B, S), "encoder_padding_mask": (B, S),
        "decoder_token_ids": (B, T), "decoder_padding_mask": (B, T)}, labels (B, T),
        sample_weight (B, T))`.

    Raises:
        InputError: a text is not valid UTF-8 (named by its example's index), or `model`
            is smaller than the data.
    """
    check_arguments(
        pairs, {"max_source_length": max_source_length, "max_target_length": max_target_length}
    )
    check_model(
        model,
        max(max_source_length, max_target_length),
        {
            "vocabulary_size": source_tokenizer.vocabulary_size,
            "target_vocabulary_size": target_tokenizer.vocabulary_size,
        },
    )
    data = tokenize_columns(
        {"source": [p.source for p in pairs], "target": [p.target for p in pairs]},
        {"source": source_tokenizer, "target": target_tokenizer},
    )

    def example(ids):
        # Cut after adding <bos>/<eos>: a cut target keeps no <eos> label, so the model
        # is never taught to stop where the real target goes on.
        target = ids["target"]
        return {
            "encoder_token_ids": tf.concat([ids["source"][: max_source_length - 1], [EOS_ID]], 0),
            "decoder_token_ids": tf.concat([[BOS_ID], target], 0)[:max_target_length],
            "labels": tf.concat([target, [EOS_ID]], 0)[:max_target_length],
        }

    def to_keras(batch):
        inputs = {}
        for side in ("encoder", "decoder"):
            ids = batch[f"{side}_token_ids"]
            inputs[f"{side}_token_ids"] = ids
            inputs[f"{side}_padding_mask"] = padding_mask(ids)
        return inputs, batch["labels"], loss_weights(batch["labels"])

    data = batch_by_length(
        data.map(example, num_parallel_calls=AUTOTUNE),
        lambda e: tf.maximum(sequence_length(e["encoder_token_ids"]), sequence_length(e["labels"])),
        batch_size,
        max(max_source_length, max_target_length),
        shuffle_buffer=len(pairs) if shuffle else 0,
        seed=seed,
        **batching,
    )
    return prefetched(data.map(to_keras, num_parallel_calls=AUTOTUNE))
