"""`tf.data` pipelines, one per model family: tokenize in-graph, truncate to the model's
maximum, bucket by length, pad each batch with 0, prefetch.

Every pipeline yields Keras-ready `(inputs, labels, sample_weight)` batches whose input
keys match the models; padding masks are `token_ids != 0` as int32 1/0. Label id 0 marks a position
that is not trained on (padding, or a prompt token), and `sample_weight` is
`labels != 0`, so padding stays out of the loss whether the loss reads the labels
(`MaskedSparseCategoricalCrossentropy`) or the weights (any Keras loss). The token layout
is the one of `transformer_zoo.text.formats`, which generation and serving use.

Given the `model` the batches are for, a pipeline refuses one smaller than its data
(`check_model`): on a CPU the model's embedding would fail mid-`fit` in a gather that
names no size, and on a GPU the ids or positions past its tables embed as zeros, silently.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import keras
import numpy as np
import tensorflow as tf

from transformer_zoo.data.bucketing import batch_by_length, naming_bad_text, tokenize_columns
from transformer_zoo.data.examples import (
    ClassificationExample,
    PromptCompletion,
    TextStream,
    TranslationPair,
)
from transformer_zoo.errors import InputError, count, is_integer
from transformer_zoo.models.family import dimensions_of
from transformer_zoo.text import Tokenizer
from transformer_zoo.text.formats import encoder_rows, stream_window
from transformer_zoo.text.tokenizer import BOS_ID, EOS_ID, PAD_ID

AUTOTUNE = tf.data.AUTOTUNE
SHOWN = 5  # examples a warning names

log = logging.getLogger(__name__)  # examples dropped; the command line shows it


def _check(examples: Sequence, max_lengths: dict[str, int], minimum: int = 2) -> None:
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


def _length(ids: tf.Tensor) -> tf.Tensor:
    return tf.shape(ids, out_type=tf.int32)[0]


def _weights(labels: tf.Tensor) -> tf.Tensor:
    return tf.cast(tf.not_equal(labels, PAD_ID), tf.float32)


def padding_mask(token_ids: tf.Tensor) -> tf.Tensor:
    """1 for tokens, 0 for padding, as int32: `tf.distribute.MirroredStrategy` fails on
    boolean inputs (its AddN has no bool kernel), and the models cast masks to bool."""
    return tf.cast(tf.not_equal(token_ids, PAD_ID), tf.int32)


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
    _check(pairs, {"max_source_length": max_source_length, "max_target_length": max_target_length})
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
        return inputs, batch["labels"], _weights(batch["labels"])

    data = batch_by_length(
        data.map(example, num_parallel_calls=AUTOTUNE),
        lambda e: tf.maximum(_length(e["encoder_token_ids"]), _length(e["labels"])),
        batch_size,
        max(max_source_length, max_target_length),
        shuffle_buffer=len(pairs) if shuffle else 0,
        seed=seed,
        **batching,
    )
    return data.map(to_keras, num_parallel_calls=AUTOTUNE).prefetch(AUTOTUNE)


def language_model_dataset(
    examples: Sequence[PromptCompletion],
    tokenizer: Tokenizer,
    batch_size: int = 64,
    max_length: int = 256,
    completion_only_loss: bool = True,
    shuffle: bool = False,
    seed: int = 0,
    model: keras.Model | None = None,
    **batching,
) -> tf.data.Dataset:
    """Next-token batches for `DecoderOnly`.

    The sequence is `<bos>` + prompt pieces + completion pieces + `<eos>`, cut to
    `max_length + 1` tokens; inputs are all but its last token, labels all but its
    first. With `completion_only_loss` (the default) the loss covers only the
    completion and its `<eos>`: the prompt is given at inference, so learning to
    write it is wasted capacity. Plain text (empty prompts) trains on every token.
    With it, an example whose prompt fills `max_length` has no completion token left to
    train on: it is dropped, and a warning says how many were (`keep_order` then lines
    `model.predict` up with the examples kept). `shuffle`, `seed`, `model` and
    `**batching` as in `translation_dataset` (batches group examples of similar length
    unless `keep_order=True`).

    Returns:
        A dataset of `({"token_ids": (B, T), "padding_mask": (B, T)}, labels (B, T),
        sample_weight (B, T))`.

    Raises:
        InputError: every example was dropped, a text is not valid UTF-8 (named by its
            example's index), or `model` is smaller than the data.
    """
    _check(examples, {"max_length": max_length}, minimum=1)
    if any(isinstance(e, TextStream) for e in examples):
        raise ValueError(
            "A TextStream (`load_task(..., stream=True)`) is one token stream, cut into "
            "windows by `stream_dataset(stream.token_ids(tokenizer), ...)`; "
            "`language_model_dataset` takes PromptCompletion examples (a file read by lines)."
        )
    check_model(model, max_length, {"vocabulary_size": tokenizer.vocabulary_size})
    columns = {
        "prompt": [e.prompt for e in examples],
        "completion": [e.completion for e in examples],
    }
    with naming_bad_text(columns):  # the index in `examples`, not in the examples kept
        if completion_only_loss:
            examples = _with_completions(examples, tokenizer, max_length)
        data = tokenize_columns(
            {name: [getattr(e, name) for e in examples] for name in columns},
            {"prompt": tokenizer, "completion": tokenizer},
        )

    def example(ids):
        sequence = tf.concat([[BOS_ID], ids["prompt"], ids["completion"], [EOS_ID]], 0)
        sequence = sequence[: max_length + 1]
        labels = sequence[1:]
        if completion_only_loss:
            # labels[i] is token i + 1 of the sequence: a prompt token while i < len(prompt).
            in_completion = tf.range(_length(labels)) >= _length(ids["prompt"])
            labels = tf.where(in_completion, labels, tf.zeros_like(labels))
        return {"token_ids": sequence[:-1], "labels": labels}

    def to_keras(batch):
        ids = batch["token_ids"]
        inputs = {"token_ids": ids, "padding_mask": padding_mask(ids)}
        return inputs, batch["labels"], _weights(batch["labels"])

    data = batch_by_length(
        data.map(example, num_parallel_calls=AUTOTUNE),
        lambda e: _length(e["token_ids"]),
        batch_size,
        max_length,
        shuffle_buffer=len(examples) if shuffle else 0,
        seed=seed,
        **batching,
    )
    return data.map(to_keras, num_parallel_calls=AUTOTUNE).prefetch(AUTOTUNE)


def _with_completions(
    examples: Sequence[PromptCompletion], tokenizer: Tokenizer, max_length: int
) -> list[PromptCompletion]:
    """The examples that keep a completion token to train on: the labels are tokens 1 to
    `max_length` of `[bos]` + prompt + completion + `[eos]`, the first `len(prompt)` of
    them the prompt's, so a prompt of `max_length` pieces or more leaves none. Logs one
    warning naming the dropped ones.

    Raises:
        InputError: none is left.
    """
    with_prompt = [i for i, e in enumerate(examples) if e.prompt]
    pieces = tokenizer.encode([examples[i].prompt for i in with_prompt])
    dropped = [i for i, ids in zip(with_prompt, pieces, strict=True) if len(ids) >= max_length]
    if len(dropped) == len(examples):
        raise InputError(
            f"Every example's prompt is max_length={max_length} tokens long or longer, which "
            "leaves no completion to train on: raise max_length (the model's context)."
        )
    if dropped:
        shown = ", ".join(map(str, dropped[:SHOWN])) + (", ..." if len(dropped) > SHOWN else "")
        log.warning(
            "%d of %d examples have a prompt of max_length=%d tokens or more, which leaves "
            "no completion to train on: they are dropped (examples %s)",
            len(dropped),
            len(examples),
            max_length,
            shown,
        )
    skipped = set(dropped)
    return [e for i, e in enumerate(examples) if i not in skipped]


def stream_dataset(
    ids: Sequence[int] | np.ndarray,
    batch_size: int = 64,
    max_length: int = 256,
    windows: str = "random",
    shuffle: bool = False,
    seed: int = 0,
    bos_id: int = BOS_ID,
    model: keras.Model | None = None,
) -> tf.data.Dataset:
    """Next-token batches for `DecoderOnly` from one token stream, cut into windows of
    `max_length` tokens (`text.formats.stream_window`: `[bos]` (`bos_id`, the
    tokenizer's) + the window's tokens but its last, labelled with the window's tokens).
    A window has no padding: its mask and weights are all ones, so a tokenizer whose id 0
    is a token (GPT-2's `!`) trains on it too.

    One pass holds `len(ids) // max_length` windows: with `windows="random"`, windows at
    random starts (nanoGPT's `get_batch`; new ones every pass, from `seed`); with
    `"epoch"`, the stream's non-overlapping windows, shuffled every pass when `shuffle`.
    The last batch of a pass may be smaller; `Dataset.cardinality` counts the batches.
    `model`: the model the batches are for, if it is to be checked (`check_model`: its
    vocabulary must hold the stream's largest id, its `max_length` a window).

    Returns:
        A dataset of `({"token_ids": (B, T), "padding_mask": (B, T)}, labels (B, T),
        sample_weight (B, T))`, as `language_model_dataset`.
    """
    if windows not in ("random", "epoch"):
        raise ValueError(f"`windows` must be 'random' or 'epoch'. Received: windows={windows!r}")
    _check([0], {"max_length": max_length}, minimum=1)
    count = len(ids) // max_length
    if count < 1:
        raise ValueError(
            f"The stream holds {len(ids)} tokens: fewer than one window of {max_length}."
        )
    if model is not None:
        largest = max(int(np.max(ids)), bos_id)
        check_model(model, max_length, {"vocabulary_size": largest + 1})
    stream = tf.constant(ids, tf.int32)
    if windows == "random":
        starts = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).take(count)
        last = len(ids) - max_length  # the largest start
        starts = starts.map(lambda r: tf.cast(r % (last + 1), tf.int32))
    else:
        starts = tf.data.Dataset.range(count).map(lambda i: tf.cast(i * max_length, tf.int32))
        if shuffle:
            starts = starts.shuffle(count, seed=seed, reshuffle_each_iteration=True)

    def window(start):
        inputs, labels = stream_window(
            stream, start, max_length, lambda a, b: tf.concat([a, b], 0), bos_id
        )
        mask = tf.ones_like(inputs, tf.int32)
        return {"token_ids": inputs, "padding_mask": mask}, labels, tf.ones_like(labels, tf.float32)

    data = starts.map(window, num_parallel_calls=AUTOTUNE).batch(batch_size)
    return data.prefetch(AUTOTUNE)


def packed_pairs(
    texts: Sequence, tokenizer, max_length: int, labels: Sequence[int] | None = None
) -> tf.data.Dataset:
    """`{"token_ids", "segment_ids"[, "label"]}` per text or text pair, packed as serving
    packs them (`text.formats.encoder_rows`: `[bos] … [eos]` for a SentencePiece
    `Tokenizer`, `[CLS] … [SEP]` for a `WordPieceTokenizer`), at most `max_length` long.

    Args:
        texts: `(text, text2 or None)` tuples or plain strings.
        tokenizer: the shared tokenizer.
        max_length: the longest packed sequence.
        labels: a label id per text, if any.

    Raises:
        InputError: a text is not valid UTF-8 (named by its index in `texts`).
    """
    pairs = [(t, None) if isinstance(t, str) else tuple(t) for t in texts]
    columns = {"text": [a for a, _ in pairs], "text2": [b for _, b in pairs]}
    with naming_bad_text(columns):
        rows = encoder_rows(tokenizer, columns["text"], columns["text2"], max_length)
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


def classification_dataset(
    examples: Sequence[ClassificationExample],
    tokenizer,
    label_names: Sequence[str],
    batch_size: int = 64,
    max_length: int = 128,
    shuffle: bool = False,
    seed: int = 0,
    model: keras.Model | None = None,
    **batching,
) -> tf.data.Dataset:
    """Text or text-pair classification batches for `EncoderOnly` (with a classifier head).

    The texts are encoded as serving encodes them (`text.formats.encoder_rows`: a
    SentencePiece `Tokenizer`, or the `WordPieceTokenizer` of an imported checkpoint).
    `shuffle`, `seed`, `model` (an `EncoderOnlyClassifier`: its classes must cover
    `label_names`) and `**batching` as in `translation_dataset` (batches group examples of
    similar length unless `keep_order=True`: to line `model.predict` up with them).

    Returns:
        A dataset of `({"token_ids": (B, T), "padding_mask": (B, T), "segment_ids": (B, T)},
        labels (B,))`: label ids are positions in `label_names`.
    """
    _check(examples, {"max_length": max_length}, minimum=3)
    index = {name: i for i, name in enumerate(label_names)}
    unknown = sorted({e.label for e in examples} - set(index))
    if unknown:
        raise ValueError(f"Labels {unknown} are not in `label_names`={list(label_names)}.")
    check_model(model, max_length, {"vocabulary_size": tokenizer.vocabulary_size}, len(label_names))
    texts = [(e.text, e.text2) for e in examples]
    data = packed_pairs(texts, tokenizer, max_length, [index[e.label] for e in examples])

    def to_keras(batch):
        ids = batch["token_ids"]
        inputs = {
            "token_ids": ids,
            "padding_mask": padding_mask(ids),
            "segment_ids": batch["segment_ids"],
        }
        return inputs, batch["label"]

    data = batch_by_length(
        data,
        lambda e: _length(e["token_ids"]),
        batch_size,
        max_length,
        shuffle_buffer=len(examples) if shuffle else 0,
        seed=seed,
        **batching,
    )
    return data.map(to_keras, num_parallel_calls=AUTOTUNE).prefetch(AUTOTUNE)
