"""Masked-LM pretraining of an encoder-only backbone before its classifier trains
(BERT's recipe, Devlin et al. 2019, on the task's own text)."""

from __future__ import annotations

import time
import warnings

import keras
import tensorflow as tf

from transformer_zoo.data.masked_lm import masked_lm_dataset
from transformer_zoo.models import EncoderOnly, EncoderOnlyMaskedLM
from transformer_zoo.progress import say
from transformer_zoo.train.distribution import fit_scope
from transformer_zoo.train.family_setup import FamilySetup, even_batches
from transformer_zoo.train.recipe.masked_accuracy import MaskedAccuracy
from transformer_zoo.train.recipe.masked_sparse_categorical_crossentropy import (
    MaskedSparseCategoricalCrossentropy,
)
from transformer_zoo.train.recipe.optimizers import adamw_cosine

PRETRAIN_RATE = 1e-3  # AdamW peak, cosine to 0 (benchmarks/dates_zh_baseline.py)


def pretraining_texts(setup: FamilySetup) -> list:
    """The (text, text2) pairs to pretrain on: on the built-in data, whose pairs are
    labelled "correct"/"incorrect", the correct ones (near misses would teach wrong
    pairings); on a user's file, every training example, whatever its labels, and the
    texts of `--pretrain-data` (`Task.pretraining`)."""
    everything = [(e.text, e.text2) for e in setup.task.train]
    everything += [(text, None) for text in setup.task.pretraining]
    if not str(setup.task.data).startswith("builtin:"):
        return everything
    pairs = [(e.text, e.text2) for e in setup.task.train if e.label == "correct"]
    return pairs or everything


class ProgressLines(keras.callbacks.Callback):
    """A line about every tenth of `total` steps: the step, the loss and masked accuracy
    of the last execution, and the seconds since `started`."""

    def __init__(self, total: int, started: float, parts: int = 10):
        super().__init__()
        self.total, self.started, self.every = total, started, max(1, -(-total // parts))
        self.shown = 0

    def on_train_batch_end(self, batch, logs=None):
        done, logs = batch + 1, logs or {}
        if done // self.every > self.shown // self.every or done == self.total:
            self.shown = done
            accuracy = logs.get("masked_accuracy", float("nan"))
            say(
                f"  pretraining step {done}/{self.total}: loss {logs.get('loss', float('nan')):.4f}, "
                f"masked accuracy {accuracy:.4f}, {time.perf_counter() - self.started:.0f} s"
            )


def pretrain_masked_lm(
    backbone: EncoderOnly,
    setup: FamilySetup,
    steps: int,
    batch_size: int,
    warmup_steps: int,
    strategy: tf.distribute.Strategy,
    seed: int = 0,
    steps_per_execution: int = 1,
    jit_compile: bool = False,
    verbose: int = 2,
) -> dict:
    """Trains `backbone` (in place) to predict masked tokens for `steps` steps.

    Args:
        backbone: the classifier's `EncoderOnly`, built in `strategy`'s scope.
        setup: the task and its shared tokenizer (which has a `<mask>` piece).
        steps: optimizer steps.
        batch_size: examples per step.
        warmup_steps: steps of linear warmup (at most a fifth of `steps`).
        strategy: the run's distribution strategy.
        seed: the shuffle and masking seed.
        steps_per_execution: train steps per `tf.function` call.
        jit_compile: compile the train step with XLA (the run's `--jit`).
        verbose: Keras verbosity.

    Returns:
        `{"steps", "seconds", "masked_accuracy"}` of the pretraining.
    """
    data = masked_lm_dataset(
        pretraining_texts(setup),
        setup.tokenizer,
        batch_size=batch_size,
        max_length=backbone.max_length,
        type_vocabulary_size=backbone.type_vocabulary_size,
        shuffle=True,
        seed=seed,
    )
    if strategy.num_replicas_in_sync > 1:
        data = even_batches(data, strategy.num_replicas_in_sync)
    with strategy.scope():
        model = EncoderOnlyMaskedLM(backbone)
        model.compile(
            optimizer=adamw_cosine(
                PRETRAIN_RATE, max(steps, 2), warmup_steps=min(warmup_steps, steps // 5)
            ),
            loss=MaskedSparseCategoricalCrossentropy(label_smoothing=0.0),
            metrics=[MaskedAccuracy()],
            steps_per_execution=steps_per_execution,
            jit_compile=jit_compile,
        )
        model.optimizer.build(model.trainable_variables)
    started = time.perf_counter()
    say(f"Masked-LM pretraining of the encoder: {steps} steps.")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*`shuffle=True` was passed")
        # The pooler serves the classifier only; masked-LM gives it no gradient.
        warnings.filterwarnings("ignore", message="Gradients do not exist for variables")
        # Without a terminal (verbose 2), Keras would print one line, at the end: a line
        # per tenth of the steps instead says how far it is.
        lines = [ProgressLines(steps, started)] if verbose == 2 else []
        with fit_scope(model, strategy):
            history = model.fit(
                data.repeat(),
                steps_per_epoch=steps,
                epochs=1,
                verbose=verbose if verbose != 2 else 0,
                callbacks=lines,
            )
    return {
        "steps": steps,
        "seconds": round(time.perf_counter() - started, 1),
        "masked_accuracy": round(float(history.history["masked_accuracy"][-1]), 4),
    }
