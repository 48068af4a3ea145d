"""Shared `tf.data` steps of the pipelines: in-graph tokenization and length bucketing."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import keras_hub
import tensorflow as tf

from transformer_zoo.text import Tokenizer

# Strings are tokenized this many at a time (a ragged batch), then unbatched.
TOKENIZE_BATCH = 1024


def in_graph_tokenizer(tokenizer: Tokenizer) -> keras_hub.tokenizers.SentencePieceTokenizer:
    """The keras-hub (TensorFlow Text) tokenizer over the same model: identical ids."""
    return keras_hub.tokenizers.SentencePieceTokenizer(proto=tokenizer.proto)


def tokenize_columns(
    columns: dict[str, Sequence[str]], tokenizers: dict[str, Tokenizer]
) -> tf.data.Dataset:
    """A dataset of dicts of 1-D int32 id tensors, one per text column.

    Args:
        columns: column name → the strings of every example (equal lengths).
        tokenizers: column name → the tokenizer of that column.
    """
    by_model: dict[int, keras_hub.tokenizers.SentencePieceTokenizer] = {}
    graph_tokenizers = {}
    for name, tokenizer in tokenizers.items():
        # Columns that share a Tokenizer share one in-graph tokenizer.
        if id(tokenizer) not in by_model:
            by_model[id(tokenizer)] = in_graph_tokenizer(tokenizer)
        graph_tokenizers[name] = by_model[id(tokenizer)]
    data = tf.data.Dataset.from_tensor_slices({k: list(v) for k, v in columns.items()})
    return (
        data.batch(TOKENIZE_BATCH)
        .map(
            lambda batch: {k: graph_tokenizers[k](v) for k, v in batch.items()},
            num_parallel_calls=tf.data.AUTOTUNE,
        )
        .unbatch()
    )


def bucket_boundaries(max_length: int) -> list[int]:
    """Bucket edges 8, 12, 16, 24, 32, 48, ... below `max_length`, then `max_length + 1`."""
    edges, edge = [], 8
    while edge <= max_length:
        edges.append(edge)
        edge = edge * 3 // 2 if edge & (edge - 1) == 0 else edge * 4 // 3
    return edges + [max_length + 1]


def batch_by_length(
    data: tf.data.Dataset,
    length_fn: Callable[[dict], tf.Tensor],
    batch_size: int,
    max_length: int,
    shuffle_buffer: int = 0,
    seed: int = 0,
    drop_remainder: bool = False,
    pad_to_bucket_boundary: bool = False,
) -> tf.data.Dataset:
    """Cache, shuffle (if `shuffle_buffer` > 0), bucket by length, pad each batch with 0.

    Examples of similar length share a batch, so little compute goes to padding. The
    cache keeps the tokenized examples, so tokenization runs once, not every epoch.
    `pad_to_bucket_boundary` pads to the bucket's edge instead of the batch's longest
    example, which bounds the number of distinct shapes (XLA compiles one per shape).
    """
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"`batch_size` must be a positive integer. Received: {batch_size!r}")
    data = data.cache()
    if shuffle_buffer > 0:
        data = data.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    boundaries = bucket_boundaries(max_length)
    return data.bucket_by_sequence_length(
        element_length_func=length_fn,
        bucket_boundaries=boundaries,
        bucket_batch_sizes=[batch_size] * (len(boundaries) + 1),
        pad_to_bucket_boundary=pad_to_bucket_boundary,
        drop_remainder=drop_remainder,
    )
