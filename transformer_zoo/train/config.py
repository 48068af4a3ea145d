"""`TrainConfig`: every setting of one training run, as the CLI and `train()` take it."""

from __future__ import annotations

import copy
import dataclasses
import os
from dataclasses import dataclass
from typing import Any

from transformer_zoo.train.config_checks import (
    FAMILY_SCORES,
    OPTIMIZERS,
    PRECISIONS,
    SCORES,
    SIZED_BY_TOKENIZER,
    STRATEGIES,
    WINDOWS,
    check_settings,
    check_settings_with_defaults,
)

# The tables of what each setting may be live with their checks (`config_checks`); the
# command line and the trainer read them from here, with the defaults.
__all__ = [
    "BUILTIN_DEFAULTS",
    "BUILTIN_FAMILY_DEFAULTS",
    "DEFAULT_SCORE_EXAMPLES",
    "FAMILY_SCORES",
    "INIT_DEFAULTS",
    "MAX_EPOCHS",
    "NOT_IDENTITY",
    "OPTIMIZERS",
    "PAPER_ADAM_FACTOR",
    "PRECISIONS",
    "RECIPE",
    "SCORES",
    "SIZED_BY_TOKENIZER",
    "STRATEGIES",
    "TARGET_STEPS",
    "USER_DEFAULTS",
    "WARMUP_SHARE",
    "WINDOWS",
    "TrainConfig",
    "as_recorded",
]

DEFAULT_SCORE_EXAMPLES = 1000
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
# On user data the run is sized to the data (`step_plan.plan_steps`): without --epochs,
# enough epochs for about TARGET_STEPS steps; without --warmup-steps, WARMUP_SHARE of the
# planned steps. (The paper's schedule with a fixed warmup of 400 steps never left its
# warmup on a 3,000-line file: 63% exact match, against 100% with this recipe.)
USER_DEFAULTS = dict(RECIPE)
# Fine-tuning a pretrained model (`init`), over the data's defaults above: a small rate, the
# model's own dropout and no pretraining (None: left unset, whatever the data's defaults say).
INIT_DEFAULTS = {
    "optimizer": "adamw-cosine",
    "learning_rate": 1e-4,
    "dropout": None,
    "pretrain_steps": None,
}
# paper-adam's `learning_rate` is a factor on the paper's schedule (D^-0.5 · min(step^-0.5,
# step · warmup^-1.5)), not a rate: the tables' rates above are AdamW's peaks.
PAPER_ADAM_FACTOR = 1.0
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
    `builtin:` data, the quality-bar recipe, `USER_DEFAULTS` on user files, and when
    fine-tuning from `init`, `INIT_DEFAULTS` over either (the model's own dropout, no
    pretraining; the data's epochs and warmup).
        seed: seeds the data, the initial weights, the shuffles and dropout.
        steps_per_execution: train steps per `tf.function` call (1 over several replicas
            or under `multiworker`, see `distribution.steps_per_execution`).
        max_examples: use only this many training examples (and a tenth as many,
            at least 8, of valid and test): for quick trials and tests.
        backup_every: back up for crash recovery every this many steps; None: at the
            end of every epoch.
        early_stopping_patience: stop after this many epochs without a better
            validation loss (or `early_stopping_on` score); None: never. The best epoch's
            weights are the run's model.
        early_stopping_on: None (the validation loss) or a score of the task that
            early stopping watches instead: `"accuracy"` (encoder-only), `"wer"`, `"per"`
            (encoder-decoder), `"exact_match"`, `"bleu"` (encoder-decoder; decoder-only on
            built-in data); it is logged each epoch as
            `val_<score>`.
        score_examples: how many validation examples that score reads (default 1000);
            not accuracy, which Keras computes over all of them.
        evaluate: evaluate the final model on the test split.
        pretrain_steps: encoder-only: masked-LM steps on the training texts (the correct
            pairs of a built-in task) before the classifier trains; 0 or None: none.
        pretrain_data: encoder-only, with `pretrain_steps`: a plain-text file (a text per
            line, no labels) that masked-LM pretraining reads besides the training texts,
            and that the tokenizer is trained on too.
        valid, test: files of the validation and test splits (the family's format of
            `data`); a split not given is cut from `data`. These paths, `data`'s and
            `init`'s are stored absolute.
        tokenizer: how the (source, or shared) text becomes pieces: `"unigram"`
            (default), `"bpe"`, `"char"` or `"word"` (whitespace-separated symbols).
        target_tokenizer: the same for an encoder-decoder's targets (default: the
            task's, unigram on files).
        vocabulary_size, target_vocabulary_size: the (source, or shared) and target
            tokenizers' vocabulary sizes (a soft limit for unigram and BPE; default 8,000
            on files); character and word tokenizers take every symbol they see.
        overrides: constructor arguments that replace the preset's (`--set
            num_layers=4`), checked against the family's constructor by `prepare`.
        steps: train this many optimizer steps (rounded up to whole executions)
            instead of `epochs`; the run is cut into evaluation periods of
            `eval_every` steps, which Keras counts as epochs.
        eval_every: with `steps`, validate (into `history.csv` and TensorBoard) every
            this many steps; default: once per pass over the training split, at most
            10 times a run.
        windows: decoder-only plain text: `"random"` (default) or `"epoch"` windows of
            one token stream (`data.pipelines.stream_dataset`), or `"lines"`.
        columns: the header names of a TSV's columns to read, in the family's order:
            `source,target`, or `text[,text2],label`; None: headerless files.
        init: a run directory (trained or imported) the run starts from, keeping its
            tokenizer: encoder-only, its encoder, under a fresh classifier head;
            decoder-only, the whole language model, fine-tuned on windows of a
            plain-text file (GPT-2 on your text, as nanoGPT's `init_from`).
        weight_decay: AdamW's decoupled weight decay (default 0.01).
        min_learning_rate: adamw-cosine's floor at the end of the cosine, at most the
            peak `learning_rate` (default 0).
        clip_norm: clip the gradients' global norm to this (default: no clipping).
        label_smoothing: of the generative families' loss (default 0.1, and 0 for
            windows of a token stream, whose loss is then the per-token cross-entropy).
        ema_momentum: keep an exponential moving average of the weights with this
            momentum (for example 0.999), which validation, the checkpoints, early
            stopping and the saved model use (`callbacks.averaged_weights`); None: none.
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
    early_stopping_on: str | None = None
    score_examples: int | None = None
    pretrain_steps: int | None = None
    valid: str | None = None
    test: str | None = None
    tokenizer: str | None = None
    target_tokenizer: str | None = None
    vocabulary_size: int | None = None
    target_vocabulary_size: int | None = None
    overrides: dict[str, Any] | None = None
    steps: int | None = None
    eval_every: int | None = None
    windows: str | None = None
    columns: list[str] | None = None
    init: str | None = None
    weight_decay: float | None = None
    min_learning_rate: float | None = None
    clip_norm: float | None = None
    label_smoothing: float | None = None
    ema_momentum: float | None = None
    evaluate: bool = True
    pretrain_data: str | None = None

    def __post_init__(self) -> None:
        check_settings(self)
        if self.out is None:
            self.out = os.path.join("runs", f"{self.family}-{self.preset}")
        builtin = self.data.startswith("builtin:")
        # Absolute, so that `evaluate RUN` and `export --quantize` read the run's files
        # from any directory.
        if not builtin:
            self.data = os.path.abspath(self.data)
        for name in ("valid", "test", "init", "pretrain_data"):
            if getattr(self, name) is not None:
                setattr(self, name, os.path.abspath(getattr(self, name)))
        defaults = USER_DEFAULTS
        if builtin:
            defaults = {**BUILTIN_DEFAULTS, **BUILTIN_FAMILY_DEFAULTS.get(self.family, {})}
        if self.init is not None:  # the settings given, then init's, then the data's
            defaults = {**defaults, **INIT_DEFAULTS}
        if self.optimizer == "paper-adam":
            defaults = {**defaults, "learning_rate": PAPER_ADAM_FACTOR}
        if self.steps is not None:  # they say how long to train: the default epochs do not
            defaults = {k: v for k, v in defaults.items() if k != "epochs"}
        for name, value in defaults.items():
            if getattr(self, name) is None:
                setattr(self, name, value)
        if self.family == "decoder-only" and not builtin and self.windows is None:
            self.windows = "random"
        check_settings_with_defaults(self)

    @property
    def stream(self) -> bool:
        """Whether the training text is read as one token stream cut into windows."""
        return self.windows in ("random", "epoch")

    def identity(self) -> dict[str, Any]:
        """The settings that define what is trained: a run directory holds one run, and a
        rerun with the same identity resumes it."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in NOT_IDENTITY}


def as_recorded(config: TrainConfig, recorded: dict[str, Any] | None) -> TrainConfig:
    """`config`, a rerun on a run directory whose run recorded the settings `recorded` (its
    `extra.train`), with the defaults that run took where they have changed since: the
    same command resumes it as it was recorded. Before e24dd34 (2026-12-06) a run from
    `init` on built-in data took the data's `learning_rate`, `dropout` and
    `pretrain_steps`, not `INIT_DEFAULTS`; a recorded `pretrain_steps` marks such a run
    (`init` refused one given). A setting given otherwise now is left as given: another
    run's, as `run_state.inspect_run_directory` then says."""
    if (
        not recorded
        or config.init is None
        or recorded.get("init") is None
        or not config.data.startswith("builtin:")
        or not recorded.get("pretrain_steps")
    ):
        return config
    before = {**BUILTIN_DEFAULTS, **BUILTIN_FAMILY_DEFAULTS.get(config.family, {})}
    kept = {
        name: recorded.get(name)
        for name, default in INIT_DEFAULTS.items()
        if getattr(config, name) == default and recorded.get(name) == before.get(name)
    }
    if all(getattr(config, name) == value for name, value in kept.items()):
        return config
    # A copy, not `dataclasses.replace`, whose checks refuse `pretrain_steps` with `init`:
    # the run's settings were checked when it started.
    config = copy.copy(config)
    for name, value in kept.items():
        setattr(config, name, value)
    return config
