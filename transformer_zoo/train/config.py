"""`TrainConfig`: every setting of one training run, as the CLI and `train()` take it."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

from transformer_zoo.errors import check_flag, is_integer, is_number, with_article
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
# is better), on the first `score_examples` validation examples at each epoch's end.
SCORES = {"accuracy": "max", "exact_match": "max", "bleu": "max", "wer": "min", "per": "min"}
FAMILY_SCORES = {
    "encoder-only": ("accuracy",),
    "encoder-decoder": ("wer", "per", "exact_match", "bleu"),
    "decoder-only": ("exact_match", "bleu"),  # completions of prompts; a token stream has none
}
DEFAULT_SCORE_EXAMPLES = 1000
# Constructor arguments `overrides` may not set: the tokenizers size them.
SIZED_BY_TOKENIZER = ("vocabulary_size", "target_vocabulary_size")
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
# Fine-tuning a pretrained encoder (`init`): a small rate, and the encoder's own dropout.
INIT_DEFAULTS = {"optimizer": "adamw-cosine", "learning_rate": 1e-4}
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
    `builtin:` data, the quality-bar recipe, `USER_DEFAULTS` on user files, and
    `INIT_DEFAULTS` when fine-tuning from `init` (dropout stays the encoder's).
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
            (encoder-decoder), `"exact_match"`, `"bleu"`; it is logged each epoch as
            `val_<score>`.
        score_examples: how many validation examples that score reads (default 1000).
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
        _validate(self)
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
        defaults = INIT_DEFAULTS if self.init is not None else USER_DEFAULTS
        if builtin:
            defaults = {**BUILTIN_DEFAULTS, **BUILTIN_FAMILY_DEFAULTS.get(self.family, {})}
        if self.optimizer == "paper-adam":
            defaults = {**defaults, "learning_rate": PAPER_ADAM_FACTOR}
        if self.steps is not None:  # they say how long to train: the default epochs do not
            defaults = {k: v for k, v in defaults.items() if k != "epochs"}
        for name, value in defaults.items():
            if getattr(self, name) is None:
                setattr(self, name, value)
        floor, peak = self.min_learning_rate, self.learning_rate
        if floor is not None and peak is not None and floor > peak:  # was clamped to the peak
            raise ValueError(
                f"`min_learning_rate` ({floor:g}) is above the peak `learning_rate` ({peak:g}); "
                "give a floor at most the peak."
            )
        if self.family == "decoder-only" and not builtin and self.windows is None:
            self.windows = "random"
        if self.stream and self.tokenizer == "word":  # before the data is read
            from transformer_zoo.data.task import STREAM_WORDS

            raise ValueError(STREAM_WORDS)
        _validate_score(self)

    @property
    def stream(self) -> bool:
        """Whether the training text is read as one token stream cut into windows."""
        return self.windows in ("random", "epoch")

    def identity(self) -> dict[str, Any]:
        """The settings that define what is trained: a run directory holds one run, and a
        rerun with the same identity resumes it."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in NOT_IDENTITY}


def _choice(name: str, value, choices) -> None:
    if value not in choices:
        raise ValueError(f"`{name}` must be one of {choices}. Received: {name}={value!r}")


# The settings' checks. Each takes numpy's numbers as Python's (`errors.is_integer`,
# `errors.is_number`) but never a bool, and keeps the setting as a plain Python value,
# which config.json and the run's identity hold.


def _integer(cfg: TrainConfig, name: str, minimum: int = 1, optional: bool = True) -> None:
    """The setting `name`: an integer ≥ `minimum` (0 or 1), or None if `optional`."""
    value = getattr(cfg, name)
    if value is None and optional:
        return
    if not is_integer(value) or value < minimum:
        kind = "a positive integer" if minimum == 1 else "a non-negative integer"
        raise ValueError(f"`{name}` must be {kind}. Received: {name}={value!r}")
    setattr(cfg, name, int(value))


def _number(cfg: TrainConfig, name: str, expected: str, within) -> None:
    """The optional setting `name`: a finite number for which `within` holds, or None;
    `expected` says which ("a positive number", "in [0, 1)")."""
    value = getattr(cfg, name)
    if value is None:
        return
    if not is_number(value) or not within(value):
        raise ValueError(f"`{name}` must be {expected}. Received: {name}={value!r}")
    setattr(cfg, name, float(value))


def _flag(cfg: TrainConfig, name: str) -> None:
    """The setting `name`: True or False (numpy's too); any non-empty string is truthy,
    so `evaluate="no"` would evaluate."""
    setattr(cfg, name, check_flag(name, getattr(cfg, name)))


def _path(cfg: TrainConfig, name: str, what: str, optional: bool = True) -> None:
    """The setting `name`: a non-empty path (str or `os.PathLike`), kept as a str; or None
    if `optional`."""
    value = getattr(cfg, name)
    if value is None and optional:
        return
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise ValueError(f"`{name}` must be {what}. Received: {name}={value!r}")
    setattr(cfg, name, os.fspath(value))


def _validate(cfg: TrainConfig) -> None:
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
    _validate_data_options(cfg)
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


def _validate_score(cfg: TrainConfig) -> None:
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
    scores = () if cfg.stream else FAMILY_SCORES[cfg.family]
    if cfg.early_stopping_on not in scores:
        what = "a token stream" if cfg.stream else with_article(cfg.family) + " model"
        offered = ", ".join(scores) or "none: its score is the validation loss"
        raise ValueError(
            f"The evaluation of {what} has no {cfg.early_stopping_on!r} score (it has "
            f"{offered}). Received: early_stopping_on={cfg.early_stopping_on!r}"
        )


def _validate_data_options(cfg: TrainConfig) -> None:
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
        # Here, not at the top: the command line reads this module's defaults for its
        # --help, which should not wait for the data package.
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
