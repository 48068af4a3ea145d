"""A run's model scored as `evaluate` scores any model: `served_model` puts a model of
the run behind the text interface with the run's tokenizers, and `validation_score`
makes early stopping's callback that scores it on the validation split."""

from __future__ import annotations

import contextlib
import logging

import keras

from transformer_zoo.evaluation.evaluate import evaluate
from transformer_zoo.generation.keras_runner import KerasRunner
from transformer_zoo.models.family import float32_copy
from transformer_zoo.progress import say
from transformer_zoo.serving import ServedModel
from transformer_zoo.train.callbacks.validation_score import ValidationScore
from transformer_zoo.train.config import DEFAULT_SCORE_EXAMPLES
from transformer_zoo.train.prepared import Prepared, run_config_of


def served_model(prepared: Prepared, model: keras.Model) -> ServedModel:
    """`model` (a float32 model of the run, for example the one training, or its copy)
    behind the text interface that `evaluate` scores, with the run's tokenizers."""
    runner = KerasRunner(model)
    setup = prepared.setup
    config = run_config_of(prepared, model, "training")
    return ServedModel(config, runner.dims, runner, setup.tokenizer, setup.target_tokenizer)


# The loggers of the warnings about examples cut to the model's length, which the run
# gave once before its first step (`data_warnings.warn_cut`, the validation split's
# count included): the scoring at each validation would repeat them.
CUT_WARNINGS = ("transformer_zoo.evaluation.evaluate", "transformer_zoo.serving.input_checks")


@contextlib.contextmanager
def _without_cut_warnings():
    loggers = [logging.getLogger(name) for name in CUT_WARNINGS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def validation_score(prepared: Prepared) -> ValidationScore | None:
    """The callback that scores the model being trained on the first `score_examples`
    validation examples at each epoch's end (greedy, as `evaluate`), when early stopping
    watches a score; None when it watches the loss. A classifier's accuracy is Keras' own
    `val_accuracy` (the metric it is compiled with, `FamilySetup.loss_and_metrics`), over
    every validation example at the training precision: no pass of its own."""
    config = prepared.config
    if config.early_stopping_on is None:
        return None
    if config.early_stopping_on == "accuracy":  # encoder-only: a score Keras logs
        if config.score_examples is not None:  # not refused: runs recorded it before 5c71e2a
            say(
                f"--score-examples {config.score_examples} is not read: early stopping on "
                "accuracy watches Keras' val_accuracy, over every validation example."
            )
        return ValidationScore("accuracy", None)
    name, limit = config.early_stopping_on, config.score_examples or DEFAULT_SCORE_EXAMPLES

    def score(model: keras.Model) -> float:
        if config.precision != "float32":  # scored as it will be saved and served
            policy = keras.config.dtype_policy()
            keras.config.set_dtype_policy("float32")
            try:
                model = float32_copy(model)
            finally:
                keras.config.set_dtype_policy(policy)
        served = served_model(prepared, model)
        with _without_cut_warnings():  # no bars of its own between the epochs' Keras bars
            scores = evaluate(served, prepared.setup.task, "valid", limit, 0, progress=False)
        return scores[name]["all"]

    return ValidationScore(name, score)
