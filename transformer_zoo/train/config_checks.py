"""What each of `TrainConfig`'s settings may be, and its checks: `check_settings` on the
settings as given, `check_settings_with_defaults` on those that need the defaults filled in.

`train.config` re-exports the tables of choices (`PRECISIONS`, `SCORES`, ...). Like it, this
module imports no TensorFlow, and no data package at the top: the command line reads the
tables for its --help.
"""

from __future__ import annotations

import os

from transformer_zoo.errors import check_flag, check_size, is_number, with_article
from transformer_zoo.run_directory import FAMILIES
from transformer_zoo.text.tokenizer_training import MODEL_TYPES

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
STRATEGIES = ("default", "mirrored", "multiworker")
OPTIMIZERS = ("paper-adam", "adamw-cosine")
# How a decoder-only model reads a plain-text file: as one token stream cut into windows
# of its context (random windows per batch, as nanoGPT's `get_batch`, or an epoch of the
# stream's windows, shuffled), or line by line (a line is an example).
WINDOWS = ("random", "epoch", "lines")
# What early stopping may watch: the validation loss, or one of the task's scores (which way
# is better), on the first `score_examples` validation examples at each epoch's end (a
# classifier's accuracy: Keras' val_accuracy, over every validation example).
SCORES = {"accuracy": "max", "exact_match": "max", "bleu": "max", "wer": "min", "per": "min"}
FAMILY_SCORES = {
    "encoder-only": ("accuracy",),
    "encoder-decoder": ("wer", "per", "exact_match", "bleu"),
    # Completions of prompts (built-in data); a plain-text file, read as a token stream or
    # by lines, has none: it is scored on its loss, perplexity and token accuracy.
    "decoder-only": ("exact_match", "bleu"),
}
# Constructor arguments `overrides` may not set: the tokenizers size them.
SIZED_BY_TOKENIZER = ("vocabulary_size", "target_vocabulary_size")


def _choice(name: str, value, choices) -> None:
    if value not in choices:
        raise ValueError(f"`{name}` must be one of {choices}. Received: {name}={value!r}")


# The settings' checks. Each takes numpy's numbers as Python's (`errors.check_size`,
# `errors.is_number`) but never a bool, and keeps the setting as a plain Python value,
# which config.json and the run's identity hold.


def _integer(cfg, name: str, minimum: int = 1, optional: bool = True) -> None:
    """The setting `name`: an integer ≥ `minimum` (0 or 1), or None if `optional`."""
    value = getattr(cfg, name)
    if value is None and optional:
        return
    setattr(cfg, name, check_size(name, value, minimum))


def _number(cfg, name: str, expected: str, within) -> None:
    """The optional setting `name`: a finite number for which `within` holds, or None;
    `expected` says which ("a positive number", "in [0, 1)")."""
    value = getattr(cfg, name)
    if value is None:
        return
    if not is_number(value) or not within(value):
        raise ValueError(f"`{name}` must be {expected}. Received: {name}={value!r}")
    setattr(cfg, name, float(value))


def _flag(cfg, name: str) -> None:
    """The setting `name`: True or False (numpy's too); any non-empty string is truthy,
    so `evaluate="no"` would evaluate."""
    setattr(cfg, name, check_flag(name, getattr(cfg, name)))


def _path(cfg, name: str, what: str, optional: bool = True) -> None:
    """The setting `name`: a non-empty path (str or `os.PathLike`), kept as a str; or None
    if `optional`."""
    value = getattr(cfg, name)
    if value is None and optional:
        return
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise ValueError(f"`{name}` must be {what}. Received: {name}={value!r}")
    setattr(cfg, name, os.fspath(value))


def check_settings(cfg) -> None:
    """The settings of `cfg` (a `TrainConfig`) as given, before the defaults: raise
    ValueError naming the first that is out of place, and keep each as a plain value."""
    _choice("family", cfg.family, FAMILIES)
    if not isinstance(cfg.preset, str) or not cfg.preset:
        raise ValueError(f"`preset` must be a non-empty string. Received: preset={cfg.preset!r}")
    _path(cfg, "data", "a file path or a built-in task (builtin:NAME)", optional=False)
    for name in ("valid", "test", "pretrain_data"):
        _path(cfg, name, "a file path")
    _path(cfg, "init", "a run directory")
    _path(cfg, "out", "a directory path")
    for name in ("jit_compile", "evaluate"):
        _flag(cfg, name)
    for name in ("tokenizer", "target_tokenizer"):
        if getattr(cfg, name) is not None:
            _choice(name, getattr(cfg, name), MODEL_TYPES)
    for kind, size in (
        ("tokenizer", "vocabulary_size"),
        ("target_tokenizer", "target_vocabulary_size"),
    ):
        if getattr(cfg, kind) == "char" and getattr(cfg, size) is not None:
            raise ValueError(
                f"`{size}` does not apply to a char tokenizer: it has one piece per character "
                f"of its text. Received: {kind}='char', {size}={getattr(cfg, size)!r}"
            )
    if cfg.target_tokenizer is not None and cfg.family != "encoder-decoder":
        raise ValueError(
            "`target_tokenizer` applies to the encoder-decoder family; the others share one "
            f"vocabulary (`tokenizer`). Received: family={cfg.family!r}"
        )
    for name in ("valid", "test"):
        value = getattr(cfg, name)
        if value is not None and cfg.data.startswith("builtin:"):
            raise ValueError(f"{cfg.data} has its own splits: `{name}` takes a file of yours.")
    _check_data_options(cfg)
    _choice("precision", cfg.precision, PRECISIONS)
    _choice("strategy", cfg.strategy, STRATEGIES)
    if cfg.optimizer is not None:
        _choice("optimizer", cfg.optimizer, OPTIMIZERS)
    for name in ("weight_decay", "min_learning_rate"):
        if cfg.optimizer == "paper-adam" and getattr(cfg, name) is not None:
            raise ValueError(
                f"`{name}` is a setting of adamw-cosine; paper-adam (Adam and the paper's "
                f"schedule) has none. Received: {name}={getattr(cfg, name)!r}"
            )
    names = ("epochs", "max_examples", "backup_every", "early_stopping_patience", "steps")
    for name in names + ("eval_every", "vocabulary_size", "target_vocabulary_size"):
        _integer(cfg, name)
    _integer(cfg, "pretrain_steps", minimum=0)
    if cfg.pretrain_data is not None and not cfg.pretrain_steps:
        raise ValueError(
            "`pretrain_data` is read by masked-LM pretraining: give `pretrain_steps` too. "
            f"Received: pretrain_data={cfg.pretrain_data!r}, pretrain_steps={cfg.pretrain_steps!r}"
        )
    if cfg.pretrain_steps and cfg.family != "encoder-only":
        raise ValueError(
            "`pretrain_steps` (masked-LM pretraining) applies to the encoder-only family. "
            f"Received: family={cfg.family!r}"
        )
    for name in ("batch_size", "steps_per_execution"):
        _integer(cfg, name, optional=False)
    if cfg.steps is not None and cfg.epochs is not None:
        raise ValueError("Give `steps` or `epochs`, not both: they both say how long to train.")
    if cfg.eval_every is not None and cfg.steps is None:
        raise ValueError(
            "`eval_every` applies with `steps`; with `epochs`, a run validates per epoch."
        )
    for name in ("time_budget", "learning_rate", "clip_norm"):
        _number(cfg, name, "a positive number", lambda value: value > 0)
    for name in ("weight_decay", "min_learning_rate"):
        _number(cfg, name, "a number ≥ 0", lambda value: value >= 0)
    for name in ("label_smoothing", "dropout"):
        _number(cfg, name, "in [0, 1)", lambda value: 0 <= value < 1)
    _number(cfg, "ema_momentum", "in (0, 1)", lambda value: 0 < value < 1)
    _integer(cfg, "warmup_steps", minimum=0)
    _integer(cfg, "seed", minimum=0, optional=False)


def _check_data_options(cfg) -> None:
    """The settings of what is read and how: windows, columns, init, overrides."""
    builtin = cfg.data.startswith("builtin:") if isinstance(cfg.data, str) else False
    if cfg.label_smoothing is not None and cfg.family == "encoder-only":
        raise ValueError(
            "`label_smoothing` applies to the generative families' token loss; an "
            "encoder-only classifier trains with plain cross-entropy. Received: "
            f"label_smoothing={cfg.label_smoothing!r}"
        )
    if cfg.windows is not None:
        _choice("windows", cfg.windows, WINDOWS)
        if cfg.family != "decoder-only" or builtin:
            raise ValueError(
                "`windows` applies to a decoder-only model trained on a plain-text file. "
                f"Received: family={cfg.family!r}, data={cfg.data!r}"
            )
    if cfg.columns is not None:
        # Here, not at the top: the command line reads this module's tables (through
        # `train.config`) for its --help, which should not wait for the data package.
        from transformer_zoo.data.user_files import check_columns

        if isinstance(cfg.columns, tuple):
            cfg.columns = list(cfg.columns)
        check_columns(cfg.family, cfg.columns)
        if builtin:
            raise ValueError(f"`columns` picks columns of your TSV files, not of {cfg.data}.")
    if cfg.init is not None:
        if cfg.family == "encoder-decoder":
            raise ValueError(
                "`init` starts an encoder-only classifier from an encoder's run directory, "
                "or fine-tunes a decoder-only run on a text; an encoder-decoder trains from "
                "scratch. Received: family='encoder-decoder'"
            )
        if cfg.family == "decoder-only" and (builtin or cfg.windows == "lines"):
            # A window of a token stream holds no padding, so a tokenizer whose id 0 is a
            # token (GPT-2's `!`) trains as it is; examples padded with 0 would not.
            raise ValueError(
                "A decoder-only run started from `init` fine-tunes on windows of a "
                "plain-text file (--windows random or epoch). "
                f"Received: data={cfg.data!r}, windows={cfg.windows!r}"
            )
        if cfg.vocabulary_size is not None or cfg.tokenizer is not None:
            raise ValueError(
                "A run started from `init` keeps that run's tokenizer: `tokenizer` and "
                "`vocabulary_size` do not apply."
            )
        if cfg.overrides and set(cfg.overrides) - {"dropout"}:
            raise ValueError(
                "A run started from `init` keeps that run's architecture; `overrides` may "
                f"set only dropout. Received: {sorted(cfg.overrides)}"
            )
        if cfg.pretrain_steps:
            raise ValueError(
                "A run started from `init` is already pretrained: drop `pretrain_steps`."
            )
    if cfg.target_vocabulary_size is not None and cfg.family != "encoder-decoder":
        raise ValueError(
            "`target_vocabulary_size` applies to the encoder-decoder family; the others "
            "share one vocabulary (`vocabulary_size`)."
        )
    if cfg.overrides is not None:
        if not isinstance(cfg.overrides, dict) or not all(
            isinstance(k, str) for k in cfg.overrides
        ):
            raise ValueError(
                f"`overrides` must map argument names to values. Received: {cfg.overrides!r}"
            )
        if "dropout" in cfg.overrides:
            if cfg.dropout is not None:
                raise ValueError(
                    "`dropout` is given twice (as a setting and in `overrides`); give one."
                )
            # One setting, checked and reported as one, which the recipe's default does not
            # replace (`--set dropout=0.3` is `--dropout 0.3`).
            overrides = dict(cfg.overrides)
            cfg.dropout = overrides.pop("dropout")
            cfg.overrides = overrides or None
        sized = sorted(set(cfg.overrides or ()) & set(SIZED_BY_TOKENIZER))
        if sized:
            raise ValueError(
                f"{sized[0]} is the tokenizer's vocabulary size: set it with "
                f"--{sized[0].replace('_', '-')} (`{sized[0]}`), not as a model argument."
            )


def check_settings_with_defaults(cfg) -> None:
    """The settings of `cfg` (a `TrainConfig`) that the defaults complete: the floor of the
    learning rate under its peak, the tokenizer of a token stream (`windows`), the score
    early stopping watches."""
    floor, peak = cfg.min_learning_rate, cfg.learning_rate
    if floor is not None and peak is not None and floor > peak:  # was clamped to the peak
        raise ValueError(
            f"`min_learning_rate` ({floor:g}) is above the peak `learning_rate` ({peak:g}); "
            "give a floor at most the peak."
        )
    if cfg.stream and cfg.tokenizer == "word":  # before the data is read
        from transformer_zoo.data.task import STREAM_WORDS

        raise ValueError(STREAM_WORDS)
    _check_score(cfg)


def _check_score(cfg) -> None:
    """`early_stopping_on` and `score_examples`, once the defaults (`windows`) are set."""
    _integer(cfg, "score_examples")
    if cfg.early_stopping_on is None:
        if cfg.score_examples is not None:
            raise ValueError("`score_examples` applies with `early_stopping_on` (a score).")
        return
    _choice("early_stopping_on", cfg.early_stopping_on, tuple(SCORES))
    if not cfg.early_stopping_patience:
        raise ValueError(
            "`early_stopping_on` says what early stopping watches: give "
            "`early_stopping_patience` (--early-stopping PATIENCE) too."
        )
    plain_text = cfg.family == "decoder-only" and cfg.windows is not None  # no prompts
    scores = () if plain_text else FAMILY_SCORES[cfg.family]
    if cfg.early_stopping_on not in scores:
        what = with_article(cfg.family) + " model"
        if plain_text:
            what = "a token stream" if cfg.stream else "a plain-text file read by lines"
        offered = ", ".join(scores) or "none: its score is the validation loss"
        raise ValueError(
            f"The evaluation of {what} has no {cfg.early_stopping_on!r} score (it has "
            f"{offered}). Received: early_stopping_on={cfg.early_stopping_on!r}"
        )
