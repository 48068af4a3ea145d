"""The language-model pipelines: next-token batches for `DecoderOnly`, from prompt /
completion examples (`language_model_dataset`) or from one token stream cut into windows
(`stream_dataset`)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import keras
import numpy as np
import tensorflow as tf

from transformer_zoo.data.bucketing import batch_by_length, naming_bad_text, tokenize_columns
from transformer_zoo.data.examples import PromptCompletion, TextStream
from transformer_zoo.data.pipelines.common import (
    AUTOTUNE,
    check_arguments,
    check_model,
    loss_weights,
    padding_mask,
    prefetched,
    sequence_length,
)
from transformer_zoo.errors import InputError
from transformer_zoo.text import Tokenizer
from transformer_zoo.text.formats import stream_window
from transformer_zoo.text.tokenizer import BOS_ID, EOS_ID

SHOWN = 5  # examples a warning names

log = logging.getLogger(__name__)  # examples dropped; the command line shows it


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
    check_arguments(examples, {"max_length": max_length}, minimum=1)
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
            in_completion = tf.range(sequence_length(labels)) >= sequence_length(ids["prompt"])
            labels = tf.where(in_completion, labels, tf.zeros_like(labels))
        return {"token_ids": sequence[:-1], "labels": labels}

    def to_keras(batch):
        ids = batch["token_ids"]
        inputs = {"token_ids": ids, "padding_mask": padding_mask(ids)}
        return inputs, batch["labels"], loss_weights(batch["labels"])

    data = batch_by_length(
        data.map(example, num_parallel_calls=AUTOTUNE),
        lambda e: sequence_length(e["token_ids"]),
        batch_size,
        max_length,
        shuffle_buffer=len(examples) if shuffle else 0,
        seed=seed,
        **batching,
    )
    return prefetched(data.map(to_keras, num_parallel_calls=AUTOTUNE))


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
    check_arguments([0], {"max_length": max_length}, minimum=1)
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
    return prefetched(data)
