"""Deleting a `tf.data` iterator must not wait out tf.data's autotuning period. With the
autotuning model on, each iterator runs a thread that TensorFlow 2.21 often fails to wake
when the iterator is deleted (`CancellationManager::StartCancel` runs the wake-up callback
before it marks itself cancelled), so the deletion waits up to the thread's period, which
doubles to 60 s as the iterator ages: a `train` on 1M lines sat 85 s after its last line
before the exit, deleting Keras' epoch iterators. The pipelines turn the model off."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from transformer_zoo.cli import main
from transformer_zoo.data import ClassificationExample, PromptCompletion, TranslationPair
from transformer_zoo.data.masked_lm import masked_lm_dataset
from transformer_zoo.data.pipelines import (
    classification_dataset,
    language_model_dataset,
    stream_dataset,
    translation_dataset,
)
from transformer_zoo.text import train_tokenizer

SMALL = ["num_layers=1", "num_heads=2", "hidden_dim=16", "intermediate_dim=32", "max_length=16"]
TEXTS = [f"the {w} sat on the mat number {i}" for i, w in enumerate(["cat", "dog", "hen"] * 20)]


def _autotune_model(data: tf.data.Dataset) -> bool:
    # tf.data's own default: the model is on unless an option turns it off.
    return data.options().autotune.enabled is not False


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(TEXTS, 60)


def test_every_pipeline_and_the_pass_repeated_from_it_runs_without_the_autotuning_model(
    tokenizer,
):
    assert _autotune_model(tf.data.Dataset.range(3).prefetch(tf.data.AUTOTUNE))  # the default
    made = {
        "classification": classification_dataset(
            [ClassificationExample(str(i % 2), t) for i, t in enumerate(TEXTS)],
            tokenizer,
            ["0", "1"],
            8,
        ),
        "translation": translation_dataset(
            [TranslationPair(t, t.upper()) for t in TEXTS], tokenizer, tokenizer, 8
        ),
        "language model": language_model_dataset(
            [PromptCompletion("", t) for t in TEXTS], tokenizer, 8
        ),
        "stream": stream_dataset(np.arange(1, 200, dtype=np.int32), 4, 8),
        "masked LM": masked_lm_dataset(TEXTS, tokenizer, 8, shuffle=True),
    }
    for name, data in made.items():
        # `train` iterates `data.repeat()` (and `.skip(step)` when it resumes).
        for derived in (data, data.repeat(), data.repeat().skip(2)):
            assert not _autotune_model(derived), name
        next(iter(data))  # the option leaves the pipeline working


def test_train_iterates_no_dataset_with_the_autotuning_model(tmp_path, monkeypatch):
    """Every `tf.data` iterator that a `train` run (counting pass, fit, validation,
    evaluation) makes: none may carry the thread whose teardown can stall the exit."""
    iterated = []
    original = tf.data.Dataset.__iter__

    def spy(self):
        iterated.append(_autotune_model(self))
        return original(self)

    monkeypatch.setattr(tf.data.Dataset, "__iter__", spy)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat. " * 40, "utf-8")
    argv = [
        "train", "--family", "decoder-only", "--data", str(corpus), "--tokenizer", "char",
        "--set", *SMALL, "--steps", "4", "--batch-size", "4", "--precision", "float32",
        "--out", str(tmp_path / "run"), "--verbose", "0",
    ]  # fmt: skip
    assert main(argv) == 0
    assert iterated, "the spy saw no iterator: Keras no longer iterates the dataset itself"
    assert not any(iterated), f"{sum(iterated)} of {len(iterated)} iterators autotune"
