"""What the `tf.data` pipelines share: the checks of their arguments and of the model the
batches are for, the padding mask and loss weights of a batch, and the packed rows of the
encoder-only pipelines (`packed_pairs`: classification's and the masked LM's).

Given the `model` the batches are for, a pipeline refuses one smaller than its data
(`check_model`): on a CPU the model's embedding would fail mid-`fit` in a gather that
names no size, and on a GPU the ids or positions past its tables embed as zeros, silently.
"""

from __future__ import annotations

from collections.abc import Sequence

import keras
import tensorflow as tf

from transformer_zoo.data.bucketing import naming_bad_text
from transformer_zoo.errors import InputError, count, is_integer
from transformer_zoo.models.family import dimensions_of
from transformer_zoo.text.formats import encoder_rows
from transformer_zoo.text.tokenizer import PAD_ID

AUTOTUNE = tf.data.AUTOTUNE

# No autotuning model: with it, each iterator runs a thread that re-tunes the AUTOTUNE
# values every period, doubling from 10 ms to 60 s as the iterator ages, and deleting the
# iterator waits for that thread. TensorFlow 2.21 often loses its wake-up:
# `CancellationManager::StartCancel` runs the callback that wakes it before it marks itself
# cancelled, so the thread finds nothing cancelled and sleeps out the rest of its period.
# Keras' epoch iterators are freed by the garbage collector, mid-run or at the exit: after
# a `train` on 1M lines the exit waited 85 s for them (45 s and 38 s each at 300k lines).
# Without the model, AUTOTUNE maps run min(16, cores) calls at a time and prefetch buffers
# still grow on their own, as they do for a dataset outside tf.data's autotuning.
_NO_AUTOTUNE_MODEL = tf.data.Options()
_NO_AUTOTUNE_MODEL.autotune.enabled = False


def prefetched(data: tf.data.Dataset) -> tf.data.Dataset:
    """`data` with a prefetch buffer, without tf.data's autotuning model thread (see
    `_NO_AUTOTUNE_MODEL`): every pipeline's last step. Datasets made from it (`repeat`,
    `skip`, Keras' distribution) keep the option."""
    return data.prefetch(AUTOTUNE).with_options(_NO_AUTOTUNE_MODEL)


def check_arguments(examples: Sequence, max_lengths: dict[str, int], minimum: int = 2) -> None:
    """Refuses an empty `examples` and any of `max_lengths` (argument name → value) that
    is not an integer ≥ `minimum`, naming it: every pipeline's first check."""
    if len(examples) == 0:
        raise ValueError("`examples` is empty: a pipeline needs at least one example.")
    for name, value in max_lengths.items():
        if not is_integer(value) or value < minimum:
            raise ValueError(f"`{name}` must be an integer ≥ {minimum}. Received: {name}={value!r}")


def check_model(
    model: keras.Model | None, max_length: int, ids: dict[str, int], labels: int = 0
) -> None:
    """Raises `InputError` where `model` (a zoo model of any family; None: no check) is
    smaller than the data a pipeline makes for it.

    Args:
        model: the model the batches are for.
        max_length: the longest row the pipeline makes: the model's positions must cover it.
        ids: `"vocabulary_size"` (and an encoder-decoder's `"target_vocabulary_size"`) →
            how many ids that side's data may hold (its tokenizer's vocabulary size).
        labels: how many label ids a classification's rows hold (0: none).
    """
    if model is None:
        return
    dimensions = dimensions_of(model)
    sizes = {
        "vocabulary_size": dimensions.vocabulary_size,
        "target_vocabulary_size": dimensions.output_vocabulary_size,
    }
    for name, needed in ids.items():
        if sizes[name] < needed:
            raise InputError(
                f"The model's {name} is {sizes[name]}, too small for the data's ids (up to "
                f"{needed - 1}): build it with {name} set to the tokenizer's vocabulary_size."
            )
    if dimensions.max_length < max_length:
        raise InputError(
            f"max_length={max_length} is longer than the model's max_length of "
            f"{dimensions.max_length}: pass max_length={dimensions.max_length} (examples "
            "are cut to it)."
        )
    classes = dimensions.num_classes or 0  # None: no classifier head
    if labels and classes < labels:
        raise InputError(
            f"The model has {count(classes, 'class', 'classes')} but `label_names` holds "
            f"{labels}: build an EncoderOnlyClassifier with num_classes={labels}."
        )


def sequence_length(ids: tf.Tensor) -> tf.Tensor:
    """The length of one example's (T,) ids, as int32: the bucketing key."""
    return tf.shape(ids, out_type=tf.int32)[0]


def loss_weights(labels: tf.Tensor) -> tf.Tensor:
    """1.0 for a label that counts, 0.0 for padding (`PAD_ID`): the loss's sample weights."""
    return tf.cast(tf.not_equal(labels, PAD_ID), tf.float32)


def padding_mask(token_ids: tf.Tensor) -> tf.Tensor:
    """1 for tokens, 0 for padding, as int32: `tf.distribute.MirroredStrategy` fails on
    boolean inputs (its AddN has no bool kernel), and the models cast masks to bool."""
    return tf.cast(tf.not_equal(token_ids, PAD_ID), tf.int32)


def packed_pairs(
    texts: Sequence,
    tokenizer,
    max_length: int,
    labels: Sequence[int] | None = None,
    type_vocabulary_size: int = 2,
) -> tf.data.Dataset:
    """`{"token_ids", "segment_ids"[, "label"]}` per text or text pair, packed as serving
    packs them (`text.formats.encoder_rows`: `[bos] … [eos]` for a SentencePiece
    `Tokenizer`, `[CLS] … [SEP]` for a `WordPieceTokenizer`), at most `max_length` long.

    Args:
        texts: `(text, text2 or None)` tuples or plain strings.
        tokenizer: the shared tokenizer.
        max_length: the longest packed sequence.
        labels: a label id per text, if any.
        type_vocabulary_size: the model's segments: below 2, a pair's second text is in
            segment 0 too (`text.formats.pair_row`).

    Raises:
        InputError: a text is not valid UTF-8 (named by its index in `texts`).
    """
    pairs = [(t, None) if isinstance(t, str) else tuple(t) for t in texts]
    columns = {"text": [a for a, _ in pairs], "text2": [b for _, b in pairs]}
    with naming_bad_text(columns):
        rows = encoder_rows(
            tokenizer, columns["text"], columns["text2"], max_length, type_vocabulary_size
        )
    lengths = [len(ids) for ids, _ in rows]
    # The rows end to end, each example a slice of them.
    flat_ids = tf.constant([t for ids, _ in rows for t in ids], tf.int32)
    flat_segments = tf.constant([t for _, segments in rows for t in segments], tf.int32)
    starts = [0]
    for length in lengths[:-1]:
        starts.append(starts[-1] + length)
    columns = [tf.constant(starts, tf.int32), tf.constant(lengths, tf.int32)]
    if labels is not None:
        columns.append(tf.constant(list(labels), tf.int32))

    def example(start, length, *label):
        found = {
            "token_ids": flat_ids[start : start + length],
            "segment_ids": flat_segments[start : start + length],
        }
        return {**found, "label": label[0]} if label else found

    return tf.data.Dataset.from_tensor_slices(tuple(columns)).map(
        example, num_parallel_calls=AUTOTUNE
    )
