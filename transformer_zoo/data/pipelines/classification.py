"""The classification pipeline: text or text-pair batches for `EncoderOnlyClassifier`."""

from __future__ import annotations

from collections.abc import Sequence

import keras
import tensorflow as tf

from transformer_zoo.data.bucketing import batch_by_length
from transformer_zoo.data.examples import ClassificationExample
from transformer_zoo.data.pipelines.common import (
    AUTOTUNE,
    check_arguments,
    check_model,
    packed_pairs,
    padding_mask,
    prefetched,
    sequence_length,
)
from transformer_zoo.text.formats import check_pair_length


def classification_dataset(
    examples: Sequence[ClassificationExample],
    tokenizer,
    label_names: Sequence[str],
    batch_size: int = 64,
    max_length: int = 128,
    shuffle: bool = False,
    seed: int = 0,
    model: keras.Model | None = None,
    type_vocabulary_size: int = 2,
    **batching,
) -> tf.data.Dataset:
    """Text or text-pair classification batches for `EncoderOnly` (with a classifier head).

    The texts are encoded as serving encodes them (`text.formats.encoder_rows`: a
    SentencePiece `Tokenizer`, or the `WordPieceTokenizer` of an imported checkpoint).
    `shuffle`, `seed`, `model` (an `EncoderOnlyClassifier`: its classes must cover
    `label_names`) and `**batching` as in `translation_dataset` (batches group examples of
    similar length unless `keep_order=True`: to line `model.predict` up with them).
    `type_vocabulary_size`: the model's segments; below 2 a pair's second text is in
    segment 0 too (`text.formats.pair_row`), and with none there are no `segment_ids`.

    Returns:
        A dataset of `({"token_ids": (B, T), "padding_mask": (B, T), "segment_ids": (B, T)},
        labels (B,))`: label ids are positions in `label_names`.
    """
    check_arguments(examples, {"max_length": max_length})
    if any(e.text2 is not None for e in examples):
        check_pair_length(max_length)
    index = {name: i for i, name in enumerate(label_names)}
    unknown = sorted({e.label for e in examples} - set(index))
    if unknown:
        raise ValueError(f"Labels {unknown} are not in `label_names`={list(label_names)}.")
    check_model(model, max_length, {"vocabulary_size": tokenizer.vocabulary_size}, len(label_names))
    texts = [(e.text, e.text2) for e in examples]
    labels = [index[e.label] for e in examples]
    data = packed_pairs(texts, tokenizer, max_length, labels, type_vocabulary_size)

    def to_keras(batch):
        ids = batch["token_ids"]
        inputs = {"token_ids": ids, "padding_mask": padding_mask(ids)}
        if type_vocabulary_size:  # a model without segments refuses the key
            inputs["segment_ids"] = batch["segment_ids"]
        return inputs, batch["label"]

    data = batch_by_length(
        data,
        lambda e: sequence_length(e["token_ids"]),
        batch_size,
        max_length,
        shuffle_buffer=len(examples) if shuffle else 0,
        seed=seed,
        **batching,
    )
    return prefetched(data.map(to_keras, num_parallel_calls=AUTOTUNE))
