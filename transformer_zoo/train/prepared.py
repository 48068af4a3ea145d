"""`prepare(config)`: a run checked before any training starts (its settings, its data,
its tokenizers and `--out`), as a `Prepared`; the states its directory can be in
(`TRAINED`, `is_trained`) and the config.json the run writes (`run_config_of`)."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

import keras

from transformer_zoo import run_directory as rd
from transformer_zoo.data.run_task import check_data_files, data_digests, relocate
from transformer_zoo.data.tasks import limit_task, load_task
from transformer_zoo.data.user_files import read_lines
from transformer_zoo.errors import RunError
from transformer_zoo.progress import say
from transformer_zoo.run_directory import MODEL_FILE, RunConfig, load_run_config
from transformer_zoo.run_state import check_model_file, inspect_run_directory, kept_nothing
from transformer_zoo.text import load_tokenizers
from transformer_zoo.train import distribution
from transformer_zoo.train.callbacks.backup import backup_epoch
from transformer_zoo.train.config import INIT_DEFAULTS, TrainConfig, as_recorded
from transformer_zoo.train.data_warnings import warn_training_file_reused
from transformer_zoo.train.family_setup import FamilySetup, check_model_arguments, one_vocabulary

# A run's state beside run_directory's FRESH, RESUME and FINISHED: trained, its model.keras
# saved, and its test evaluation interrupted; a rerun evaluates that model again.
TRAINED = "trained"


@dataclass
class Prepared:
    """A checked run: its settings, its data and tokenizers, and its directory's state."""

    config: TrainConfig
    setup: FamilySetup | None
    state: str  # run_directory.FRESH, RESUME or FINISHED, or TRAINED
    chief: bool
    write_dir: str  # the run directory, or a worker's scratch directory


def check_config(config) -> None:
    """Refuses anything but a `TrainConfig` (a dict is pointed to `TrainConfig(**config)`),
    before `prepare` or `train` reads it."""
    if isinstance(config, dict):
        raise ValueError(
            "`config` must be a TrainConfig: pass `TrainConfig(**config)`. "
            f"Received a dict with keys {list(config)}"
        )
    if not isinstance(config, TrainConfig):
        raise ValueError(f"`config` must be a TrainConfig. Received: config={config!r}")


def prepare(config: TrainConfig) -> Prepared:
    """Checks everything that a user can get wrong before any training starts, and
    writes nothing.

    Raises:
        ValueError (`DataError`, `RunError` are ValueErrors): bad settings, an unknown
            preset, unreadable data (a token stream shorter than one context window
            included), text SentencePiece cannot train on, or an `--out` that holds
            something else; `config` is not a `TrainConfig`.
    """
    check_config(config)
    distribution.check_strategy(config.strategy)
    chief = distribution.is_chief(config.strategy)
    out = config.out
    write_dir = out if chief else os.path.join(out, f".worker-{distribution.worker_index()}")
    given, config = config, _as_recorded(config)
    state = inspect_run_directory(out, config.identity()) if chief else rd.FRESH
    if config is not given and chief:
        changed = ", ".join(
            f"{name} {getattr(config, name)!r}"
            for name in INIT_DEFAULTS
            if getattr(config, name) != getattr(given, name)
        )
        say(
            f"{out} holds a run started before e24dd34 (2026-12-06), when a run from --init "
            f"on built-in data took the data's defaults: it keeps the settings it recorded "
            f"({changed})."
        )
    if state == rd.FINISHED:
        return Prepared(config, None, state, chief, write_dir)
    from transformer_zoo.models.presets import resolve_preset

    resolve_preset(config.preset, config.family)  # fails fast, before the data is read
    # A run from `init` keeps that model's architecture. The check builds a model, which
    # starts TensorFlow's runtime: a multiworker run must configure its collective ops
    # first (`make_strategy`), so there the constructor checks run when the model is built.
    if config.init is None and config.strategy != "multiworker":
        check_model_arguments(config.preset, config.family, config.overrides)
    if config.init is None:
        _check_shared_vocabulary(config)
    if not config.data.startswith("builtin:"):  # a large file takes a while: say what runs
        say(f"Reading {config.data} …")
    task = load_task(
        config.data,
        config.family,
        config.seed,
        config.valid,
        config.test,
        columns=config.columns,
        stream=config.stream,
    )
    task = limit_task(task, config.max_examples)
    warn_training_file_reused(config)
    if config.pretrain_data is not None:
        task = dataclasses.replace(task, pretraining=tuple(read_lines(config.pretrain_data)))
    if state == rd.RESUME and is_trained(out):
        state = TRAINED
    elif state == rd.RESUME and backup_epoch(os.path.join(out, rd.BACKUP_DIR)) is None:
        # A start that failed before its first backup has nothing to resume: it starts
        # afresh, with tokenizers trained on the data as it is now, and rewrites its files.
        state = rd.FRESH
    tokenizers = None
    resumes = state in (rd.RESUME, TRAINED)
    if resumes:
        # The splits it trained on, unchanged, where this rerun reads them (its files moved).
        recorded = relocate(rd.load_run_config(out), config.data, config.valid, config.test)
        check_data_files(recorded)
    if os.path.isfile(os.path.join(out, "tokenizer.model")) and (resumes or not chief):
        tokenizers = load_tokenizers(out)  # the rerun must see the ids the backup learnt
    if tokenizers is None and config.init is None:
        say(f"Training the {_tokenizers(config)} on {_training_text(task)} …")
    setup = FamilySetup.create(
        task,
        config.preset,
        tokenizers,
        kinds=(config.tokenizer, config.target_tokenizer),
        sizes=(config.vocabulary_size, config.target_vocabulary_size),
        overrides=config.overrides,
        windows=config.windows,
        init=config.init,
    )
    if tokenizers is None and config.init is None:  # trained just now
        _say_vocabulary_sizes(config, setup)
    return Prepared(config, setup, state, chief, write_dir)


def _as_recorded(config: TrainConfig) -> TrainConfig:
    """`config` with the defaults that the run in its `--out` took where they have changed
    since (`config.as_recorded`), where that run has training to resume or is trained: a
    start that failed before its first backup starts afresh, on today's defaults."""
    try:
        recorded = load_run_config(config.out)
    except RunError:  # no run there, or no run of ours: `inspect_run_directory` says which
        return config
    if recorded.export or kept_nothing(config.out, recorded):
        return config
    return as_recorded(config, recorded.extra.get("train"))


def _tokenizers(config: TrainConfig) -> str:
    """ "tokenizers" where an encoder-decoder's sides get one each, else "tokenizer"."""
    from transformer_zoo.models.presets import resolve_preset

    shared = one_vocabulary(resolve_preset(config.preset, config.family), config.overrides)
    return "tokenizers" if config.family == "encoder-decoder" and not shared else "tokenizer"


def _check_shared_vocabulary(config: TrainConfig) -> None:
    """Refuses a target tokenizer's settings where the model ties all its weights
    (`tie_weights="all"`, the preset's or `--set`'s): its encoder-decoder has one vocabulary
    for both sides, so the run trains one shared tokenizer, sized by `vocabulary_size`."""
    from transformer_zoo.models.presets import resolve_preset

    if config.family != "encoder-decoder":
        return
    if not one_vocabulary(resolve_preset(config.preset, config.family), config.overrides):
        return
    given = [
        name for name in ("target_vocabulary_size", "target_tokenizer") if getattr(config, name)
    ]
    if given:
        raise ValueError(
            f"tie_weights='all' shares one vocabulary between source and target, so the run "
            f"trains one tokenizer for both (`vocabulary_size`, `tokenizer`): drop "
            f"{' and '.join(f'`{name}`' for name in given)}, or set tie_weights='decoder' "
            "to keep a target vocabulary of its own."
        )


def _training_text(task) -> str:
    """What the tokenizers train on, for the line that says so: "the 900,000 training
    examples", or a token stream's characters."""
    if task.stream:
        return f"the training text ({len(task.train[0].text):,} characters)"
    more = f" and {len(task.pretraining):,} pretraining texts" if task.pretraining else ""
    return f"the {len(task.train):,} training examples{more}"


def _say_vocabulary_sizes(config: TrainConfig, setup: FamilySetup) -> None:
    """One line with the pieces each trained tokenizer has, when that is not what was
    asked: SentencePiece keeps fewer than `--vocabulary-size` when the text holds fewer
    (a character tokenizer has one per character; a word vocabulary too small for its
    text's words is `train_tokenizer`'s warning)."""
    options = setup.task.tokenizer_options
    sides = [("", setup.tokenizer, config.vocabulary_size, config.tokenizer, "", "unigram")]
    if setup.separate_target:
        target_kind = options.get("target_model_type", "unigram")
        sides.append(
            ("target ", setup.target_tokenizer, config.target_vocabulary_size,
             config.target_tokenizer, "target_", target_kind)
        )  # fmt: skip
    for side, tokenizer, asked, kind, option, default_kind in sides:
        if (kind or default_kind) == "char":  # as many as the text has characters
            continue
        asked = asked or options.get(f"{option}vocabulary_size")
        if asked and tokenizer.vocabulary_size != asked:
            say(
                f"The {side}tokenizer has {tokenizer.vocabulary_size:,} pieces ({asked:,} "
                "asked: as many as its training text holds)"
            )


def is_trained(out: str) -> bool:
    """Whether `out` holds a run that finished training and saved its model, whose test
    evaluation was interrupted (status `TRAINED`)."""
    if load_run_config(out).extra.get("status") != TRAINED:
        return False
    try:
        check_model_file(os.path.join(out, MODEL_FILE))
    except (ValueError, OSError):  # ModelDirectoryError: the rerun trains again
        return False
    return os.path.isfile(os.path.join(out, rd.METRICS_FILE))


def run_config_of(prepared: Prepared, model: keras.Model, status: str) -> RunConfig:
    """The run's config.json for `model`, marked `status` ("training", `TRAINED` or
    "finished")."""
    setup, config = prepared.setup, prepared.config
    length = setup.max_length  # an `init` run's own, which may be below its positions
    extra = {
        "train": config.identity(),
        "status": status,
        "parameters": int(model.count_params()),
        "vocabulary_sizes": [setup.tokenizer.vocabulary_size]
        + ([setup.target_tokenizer.vocabulary_size] if setup.separate_target else []),
    }
    if setup.task.shared_targets is not None:
        extra["shared_test_targets"] = setup.task.shared_targets
    digests = data_digests(config.data, config.valid, config.test, config.init)
    if digests:
        extra["data_digests"] = digests
    if setup.task.label_names:  # what `classify` reads: a text, or a pair (`--pairs`)
        extra["text_pairs"] = setup.task.pairs
    kept = {}  # a run from `init` keeps its tokenizer files (`trainer._write_start` copies them)
    if config.init is not None:
        kept = {"tokenizer": load_run_config(config.init).tokenizer}
    return RunConfig(
        family=setup.family,
        preset=setup.preset,
        task=setup.task_name,
        special_ids=setup.tokenizer.special_ids,
        **kept,
        target_tokenizer="target_tokenizer.model" if setup.separate_target else None,
        max_length=length,
        max_target_length=length if setup.family == "encoder-decoder" else None,
        label_names=list(setup.task.label_names) or None,
        data=config.data,
        seed=config.seed,
        extra=extra,
    )
