"""Shared `tf.data` steps of the pipelines: in-graph tokenization (and the error that names
a text no tokenizer reads) and length bucketing."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence

import keras_hub
import tensorflow as tf

from transformer_zoo.errors import InputError, is_integer
from transformer_zoo.files import native_stderr_silenced
from transformer_zoo.text import Tokenizer

# Strings are tokenized this many at a time (a ragged batch), then unbatched.
TOKENIZE_BATCH = 1024


def in_graph_tokenizer(tokenizer: Tokenizer) -> keras_hub.tokenizers.SentencePieceTokenizer:
    """The keras-hub (TensorFlow Text) tokenizer over the same model: identical ids.

    Raises:
        ValueError: `tokenizer` is not this package's SentencePiece `Tokenizer` (an imported
            checkpoint's Marian or byte-level BPE tokenizer, whose ids and special tokens
            the pipelines' constants would get wrong).
    """
    if not isinstance(tokenizer, Tokenizer):
        raise ValueError(
            "The translation and language-model pipelines take this package's SentencePiece "
            f"`Tokenizer` (with its <bos> 2 and <eos> 3); got a {type(tokenizer).__name__}. "
            "An imported checkpoint's tokenizer serves, exports and evaluates, but its "
            "ids would be wrong here (Marian's </s> is 0, GPT-2's tokens are byte-level BPE)."
        )
    # tensorflow_text's SentencePiece writes "precompiled_charsmap is empty" (a target
    # tokenizer's identity normalization) straight to the process's stderr.
    with native_stderr_silenced():
        return keras_hub.tokenizers.SentencePieceTokenizer(proto=tokenizer.proto)


@contextlib.contextmanager
def naming_bad_text(columns: dict[str, Sequence]) -> Iterator[None]:
    """Turns a failure to convert or encode the texts of `columns` (column name → each
    example's text, or None) into an `InputError` that names the first example holding a
    lone surrogate (what Python makes of bytes that are not UTF-8, with
    `errors="surrogateescape"`), which no tokenizer reads: TensorFlow, SentencePiece and
    Hugging Face's tokenizers each fail on one without saying which. The texts are read
    only after a failure; any other failure is raised as it was.

    Raises:
        InputError: an example's text is not valid UTF-8; `index` is the example's.
    """
    try:
        yield
    except Exception:
        for index, texts in enumerate(zip(*columns.values(), strict=True)):
            for name, text in zip(columns, texts, strict=True):
                if not isinstance(text, str) or text.isascii():
                    continue
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError as error:
                    raise InputError(
                        f"The {name} of example {index} is not valid UTF-8: it holds "
                        f"{text[error.start]!r} at character {error.start + 1}, a lone "
                        "surrogate (an undecodable byte)",
                        index,
                    ) from None
        raise


def tokenize_columns(
    columns: dict[str, Sequence[str]], tokenizers: dict[str, Tokenizer]
) -> tf.data.Dataset:
    """A dataset of dicts of 1-D int32 id tensors, one per text column.

    Args:
        columns: column name → the strings of every example (equal lengths).
        tokenizers: column name → the tokenizer of that column.

    Raises:
        InputError: a string is not valid UTF-8 (`naming_bad_text`).
    """
    by_model: dict[int, keras_hub.tokenizers.SentencePieceTokenizer] = {}
    graph_tokenizers = {}
    for name, tokenizer in tokenizers.items():
        # Columns that share a Tokenizer share one in-graph tokenizer.
        if id(tokenizer) not in by_model:
            by_model[id(tokenizer)] = in_graph_tokenizer(tokenizer)
        graph_tokenizers[name] = by_model[id(tokenizer)]
    with naming_bad_text(columns):
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
    keep_order: bool = False,
) -> tf.data.Dataset:
    """Cache, shuffle (if `shuffle_buffer` > 0), bucket by length, pad each batch with 0.

    Examples of similar length share a batch, so little compute goes to padding: even
    unshuffled, batches do not come in the examples' order. The cache keeps the tokenized
    examples, so tokenization runs once, not every epoch. `pad_to_bucket_boundary` pads to
    the bucket's edge instead of the batch's longest example, which bounds the number of
    distinct shapes (XLA compiles one per shape). `keep_order` batches the examples in
    their order instead, unbucketed (`model.predict` rows then line up with the examples;
    unshuffled only).
    """
    if not is_integer(batch_size) or batch_size < 1:
        raise ValueError(f"`batch_size` must be a positive integer. Received: {batch_size!r}")
    batch_size = int(batch_size)
    data = data.cache()
    if keep_order:
        if shuffle_buffer > 0 or pad_to_bucket_boundary:
            raise ValueError(
                "`keep_order` keeps the examples' order: not with `shuffle` or buckets."
            )
        return data.padded_batch(batch_size, drop_remainder=drop_remainder)
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
