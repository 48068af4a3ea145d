"""`TrainConfig`: every setting of one training run, as the CLI and `train()` take it."""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from typing import Any

from transformer_zoo.run_directory import FAMILIES
from transformer_zoo.text.tokenizer import MODEL_TYPES

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
STRATEGIES = ("default", "mirrored", "multiworker")
OPTIMIZERS = ("paper-adam", "adamw-cosine")
# Defaults of the settings left as None: the quality-bar recipe of benchmarks/quality.py,
# on any data. A short run whose rate anneals to 0 (AdamW + cosine) beats the paper's
# step^-0.5 decay, and dropout only slows a tiny model down on a task it cannot overfit.
RECIPE = {"optimizer": "adamw-cosine", "learning_rate": 2e-3, "dropout": 0.0}
# On the built-in data (30,000 examples, 235 steps of 128 per epoch): 4 epochs, as measured.
BUILTIN_DEFAULTS = {**RECIPE, "epochs": 4, "warmup_steps": 100}
# A classifier that tells a translation from a near miss stays at chance for 1,000+
# steps from scratch (benchmarks/dates_zh_baseline.py); masked-LM pretraining on the
# pairs first, and a gentler rate after it, lift it well above.
BUILTIN_FAMILY_DEFAULTS = {"encoder-only": {"learning_rate": 3e-4, "pretrain_steps": 1500}}
# On user data the run is sized to the data (`trainer.plan_steps`): without --epochs,
# enough epochs for about TARGET_STEPS steps; without --warmup-steps, WARMUP_SHARE of the
# planned steps. (The paper's schedule with a fixed warmup of 400 steps never left its
# warmup on a 3,000-line file: 63% exact match, against 100% with this recipe.)
USER_DEFAULTS = dict(RECIPE)
TARGET_STEPS = 1000
MAX_EPOCHS = 500
WARMUP_SHARE = 0.1
# Settings that do not change what is trained, so a rerun may change them freely.
NOT_IDENTITY = ("out", "evaluate")


@dataclass
class TrainConfig:
    """The settings of a training run.

    Attributes:
        family: `"encoder-decoder"`, `"decoder-only"` or `"encoder-only"`.
        preset: a preset name (`transformer_zoo.models.PRESETS`) or `"tiny"`.
        data: `"builtin:dates-zh"` or a path (TSV for translation and classification,
            plain text for language modelling).
        out: the run directory; None gives `runs/<family>-<preset>`.
        epochs: passes over the training split.
        time_budget: stop training after this many seconds (checked every
            `steps_per_execution` steps); the epoch in progress is cut short.
        batch_size: examples per step (over all replicas).
        precision: `"float32"`, `"mixed_bfloat16"` or `"mixed_float16"`.
        jit_compile: compile the train step with XLA.
        strategy: `"default"` (one device), `"mirrored"` (all local devices) or
            `"multiworker"` (`TF_CONFIG`).
        optimizer: `"paper-adam"` (Adam β₂ = 0.98, ε = 1e-9, warmup then step^-0.5) or
            `"adamw-cosine"` (AdamW, warmup then a cosine to 0 at the last step, or at
            the end of `time_budget` if that comes first).
        learning_rate: adamw-cosine's peak rate, or a factor on the paper schedule.
        warmup_steps: steps of warmup of either schedule.
        dropout: replaces the preset's dropout, if given.

    Settings left None take `BUILTIN_DEFAULTS` (and `BUILTIN_FAMILY_DEFAULTS`) on
    `builtin:` data, the quality-bar recipe, and `USER_DEFAULTS` on user files.
        seed: seeds the data, the initial weights, the shuffles and dropout.
        steps_per_execution: train steps per `tf.function` call (1 under `multiworker`,
            see `distribution.steps_per_execution`).
        max_examples: use only this many training examples (and a tenth as many,
            at least 8, of valid and test): for quick trials and tests.
        backup_every: back up for crash recovery every this many steps; None: at the
            end of every epoch.
        early_stopping_patience: stop after this many epochs without a better
            validation loss; None: never.
        evaluate: evaluate the final model on the test split.
        pretrain_steps: encoder-only: masked-LM steps on the training texts (the correct
            pairs of a built-in task) before the classifier trains; 0 or None: none.
        valid, test: files of the validation and test splits (the family's format of
            `data`); a split not given is cut from `data`.
        tokenizer: how the (source, or shared) text becomes pieces: `"unigram"`
            (default), `"bpe"`, `"char"` or `"word"` (whitespace-separated symbols).
        target_tokenizer: the same for an encoder-decoder's targets (default: the
            task's, unigram on files).
    """

    family: str
    preset: str = "tiny"
    data: str = "builtin:dates-zh"
    out: str | None = None
    epochs: int | None = None
    time_budget: float | None = None
    batch_size: int = 128
    precision: str = "mixed_bfloat16"
    jit_compile: bool = False
    strategy: str = "default"
    optimizer: str | None = None
    learning_rate: float | None = None
    warmup_steps: int | None = None
    dropout: float | None = None
    seed: int = 0
    steps_per_execution: int = 10
    max_examples: int | None = None
    backup_every: int | None = None
    early_stopping_patience: int | None = None
    pretrain_steps: int | None = None
    valid: str | None = None
    test: str | None = None
    tokenizer: str | None = None
    target_tokenizer: str | None = None
    evaluate: bool = True

    def __post_init__(self) -> None:
        _validate(self)
        if self.out is None:
            self.out = os.path.join("runs", f"{self.family}-{self.preset}")
        builtin = self.data.startswith("builtin:")
        defaults = USER_DEFAULTS
        if builtin:
            defaults = {**BUILTIN_DEFAULTS, **BUILTIN_FAMILY_DEFAULTS.get(self.family, {})}
        for name, value in defaults.items():
            if getattr(self, name) is None:
                setattr(self, name, value)

    def identity(self) -> dict[str, Any]:
        """The settings that define what is trained: a run directory holds one run, and a
        rerun with the same identity resumes it."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in NOT_IDENTITY}


def _choice(name: str, value, choices) -> None:
    if value not in choices:
        raise ValueError(f"`{name}` must be one of {choices}. Received: {name}={value!r}")


def _positive(name: str, value, kind=int, optional: bool = False) -> None:
    if value is None and optional:
        return
    valid = isinstance(value, kind) and not isinstance(value, bool)
    if kind is float:
        valid = isinstance(value, (int, float)) and not isinstance(value, bool)
        valid = valid and math.isfinite(value)
    if not valid or value <= 0:
        what = "integer" if kind is int else "number"
        raise ValueError(f"`{name}` must be a positive {what}. Received: {name}={value!r}")


def _validate(cfg: TrainConfig) -> None:
    _choice("family", cfg.family, FAMILIES)
    for name in ("tokenizer", "target_tokenizer"):
        if getattr(cfg, name) is not None:
            _choice(name, getattr(cfg, name), MODEL_TYPES)
    if cfg.target_tokenizer is not None and cfg.family != "encoder-decoder":
        raise ValueError(
            "`target_tokenizer` applies to the encoder-decoder family; the others share one "
            f"vocabulary (`tokenizer`). Received: family={cfg.family!r}"
        )
    for name in ("valid", "test"):
        value = getattr(cfg, name)
        if value is not None and (not isinstance(value, str) or not value):
            raise ValueError(f"`{name}` must be a file path. Received: {value!r}")
        if value is not None and cfg.data.startswith("builtin:"):
            raise ValueError(f"{cfg.data} has its own splits: `{name}` takes a file of yours.")
    _choice("precision", cfg.precision, PRECISIONS)
    _choice("strategy", cfg.strategy, STRATEGIES)
    if cfg.optimizer is not None:
        _choice("optimizer", cfg.optimizer, OPTIMIZERS)
    for name in ("preset", "data"):
        if not isinstance(getattr(cfg, name), str) or not getattr(cfg, name):
            raise ValueError(
                f"`{name}` must be a non-empty string. Received: {getattr(cfg, name)!r}"
            )
    for name in ("epochs", "max_examples", "backup_every", "early_stopping_patience"):
        _positive(name, getattr(cfg, name), optional=True)
    if cfg.pretrain_steps is not None and (
        not isinstance(cfg.pretrain_steps, int) or cfg.pretrain_steps < 0
    ):
        raise ValueError(
            f"`pretrain_steps` must be a non-negative integer. Received: {cfg.pretrain_steps!r}"
        )
    if cfg.pretrain_steps and cfg.family != "encoder-only":
        raise ValueError(
            "`pretrain_steps` (masked-LM pretraining) applies to the encoder-only family. "
            f"Received: family={cfg.family!r}"
        )
    for name in ("batch_size", "steps_per_execution"):
        _positive(name, getattr(cfg, name))
    for name in ("time_budget", "learning_rate"):
        _positive(name, getattr(cfg, name), kind=float, optional=True)
    if cfg.warmup_steps is not None and (
        not isinstance(cfg.warmup_steps, int) or cfg.warmup_steps < 0
    ):
        raise ValueError(
            f"`warmup_steps` must be a non-negative integer. Received: warmup_steps={cfg.warmup_steps!r}"
        )
    if cfg.dropout is not None and not (
        isinstance(cfg.dropout, (int, float)) and 0 <= cfg.dropout < 1
    ):
        raise ValueError(f"`dropout` must be in [0, 1). Received: dropout={cfg.dropout!r}")
    if not isinstance(cfg.seed, int) or isinstance(cfg.seed, bool) or cfg.seed < 0:
        raise ValueError(f"`seed` must be a non-negative integer. Received: seed={cfg.seed!r}")
    if cfg.out is not None and (
        not isinstance(cfg.out, (str, os.PathLike)) or not os.fspath(cfg.out)
    ):
        raise ValueError(f"`out` must be a directory path. Received: out={cfg.out!r}")
    if cfg.out is not None:
        cfg.out = os.fspath(cfg.out)
