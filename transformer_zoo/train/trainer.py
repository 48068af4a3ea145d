"""`train(config)`: one run of `model.fit`, from the data to a complete run directory.

The steps: check the settings, the data and `--out` (`prepare`); train or reload the
tokenizers; build and compile the model under the strategy and precision; `fit` with the
callbacks (best and last checkpoints, crash backup, CSV log, TensorBoard, NaN guard,
optional early stopping and time budget); save a float32 `model.keras`; evaluate on the
test split; write `metrics.json`, `history.csv`, `curves.png` and `config.json`.
Rerunning the same settings on the same `--out` resumes an interrupted run from its backup
(a run that stopped before its first backup starts afresh; one interrupted in its test
evaluation, with its model saved, is evaluated again).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import random
import shutil
import sys
import time
import warnings
from dataclasses import dataclass

import keras
import numpy as np

from transformer_zoo import run_directory as rd
from transformer_zoo.data.task import SPLIT_NAMES
from transformer_zoo.data.tasks import check_data_files, data_digests, limit_task, load_task
from transformer_zoo.data.user_files import read_lines
from transformer_zoo.errors import count
from transformer_zoo.evaluation.evaluate import evaluate
from transformer_zoo.files import (
    atomic_path,
    check_free_space,
    interruptions_deferred,
    read_json,
    remove_stale_staging,
    variables_bytes,
    write_json,
)
from transformer_zoo.generation.keras_runner import KerasRunner
from transformer_zoo.models.family import float32_copy
from transformer_zoo.progress import say
from transformer_zoo.run_directory import MODEL_FILE, RunConfig, load_run_config, save_run_config
from transformer_zoo.serving import ServedModel
from transformer_zoo.text import load_tokenizers, save_tokenizers
from transformer_zoo.text.files import copy_tokenizers
from transformer_zoo.train import distribution
from transformer_zoo.train.callbacks.backup import (
    backup_epoch,
    backup_seconds,
    remove_backup,
    restore_backup,
    resumed_early_stopping,
)
from transformer_zoo.train.callbacks.budget import Budget
from transformer_zoo.train.callbacks.run_callbacks import run_callbacks
from transformer_zoo.train.callbacks.validation_score import ValidationScore
from transformer_zoo.train.config import (
    DEFAULT_SCORE_EXAMPLES,
    MAX_EPOCHS,
    TARGET_STEPS,
    WARMUP_SHARE,
    TrainConfig,
)
from transformer_zoo.train.family_setup import FamilySetup, check_model_arguments, one_vocabulary
from transformer_zoo.train.pretraining import pretrain_masked_lm
from transformer_zoo.train.recipe.optimizers import capped_warmup, make_optimizer
from transformer_zoo.visualize.curves import plot_curves, read_history

log = logging.getLogger(__name__)  # warnings; the command line shows them
MAX_VALIDATIONS = 10  # a run of `--steps` without `--eval-every` validates at most this often
# A run's state beside run_directory's FRESH, RESUME and FINISHED: trained, its model.keras
# saved, and its test evaluation interrupted; a rerun evaluates that model again.
TRAINED = "trained"
PRETRAINING_KEY = "pretraining"  # config.json's extra, while a run trains: its summary


@dataclass
class Prepared:
    """A checked run: its settings, its data and tokenizers, and its directory's state."""

    config: TrainConfig
    setup: FamilySetup | None
    state: str  # run_directory.FRESH, RESUME or FINISHED, or TRAINED
    chief: bool
    write_dir: str  # the run directory, or a worker's scratch directory


@dataclass(frozen=True)
class StepPlan:
    """How long a run trains: `epochs` of `steps_per_epoch` steps, with `warmup_steps`.

    An epoch is one pass over the training batches rounded up to whole executions of
    `steps_per_execution` steps (the data repeats), so that the progress bar, the
    optimizer's step count and the cosine schedule agree.
    """

    epochs: int
    steps_per_epoch: int
    warmup_steps: int
    batches: int  # in one pass over the training split
    chosen: tuple[str, ...]  # the settings sized to the data
    total_steps: int = 0  # the run's steps (with `--steps`, the last epoch may be cut short)

    def __post_init__(self):
        if not self.total_steps:
            object.__setattr__(self, "total_steps", self.epochs * self.steps_per_epoch)

    def describe(self, config: TrainConfig, dropout: float) -> str:
        """One line: what the run will do, and which settings were chosen for the data.
        `dropout` is the model's (with `init` and no `dropout` set, the initial model's)."""
        total = self.total_steps
        rate = config.learning_rate
        peak = f"peak {rate:g}" if config.optimizer == "adamw-cosine" else f"factor {rate or 1:g}"
        if config.steps is not None:
            rounded = (
                f" (--steps {config.steps} in whole executions)" if total != config.steps else ""
            )
            asked = config.eval_every
            rounded_too = (
                f" (--eval-every {asked} in whole executions)"
                if asked is not None and asked != self.steps_per_epoch
                else ""
            )
            length = (
                f"{count(total, 'step')}{rounded}, validating every {self.steps_per_epoch}"
                f"{rounded_too} (batch"
            )
        else:
            length = f"{count(self.epochs, 'epoch')} of {self.steps_per_epoch} steps ({count(total, 'step')}, batch"
        own = " (the initial model's)" if config.init is not None and config.dropout is None else ""
        line = (
            f"Training {length} {config.batch_size}): {config.optimizer}, {peak}, warmup "
            f"{count(self.warmup_steps, 'step')}, dropout {dropout:g}{own}, {config.precision}."
        )
        if config.ema_momentum:
            line = line[:-1] + f", weights averaged (EMA {config.ema_momentum:g})."
        if self.chosen:
            line += (
                f" Chosen for the data ({count(self.batches, 'batch', 'batches')} per pass): "
                + " and ".join(self.chosen)
                + "; --epochs (or --steps, --eval-every) and --warmup-steps set them."
            )
        return line


def plan_steps(config: TrainConfig, batches: int, steps_per_execution: int) -> StepPlan:
    """The run's `StepPlan` for `batches` training batches per pass: the given epochs and
    warmup, or (left None, on user data) about `TARGET_STEPS` steps and `WARMUP_SHARE` of
    them as warmup. With `config.steps`, that many steps (whole executions) in epochs of
    `eval_every` steps (default: a pass over the data, at most `MAX_VALIDATIONS` a run);
    the last epoch ends at the step count (`callbacks.budget.Budget`)."""
    execution = max(1, steps_per_execution)

    def whole(steps: int) -> int:  # whole executions
        return max(1, math.ceil(steps / execution)) * execution

    steps_per_epoch = whole(batches)
    chosen = []
    epochs = config.epochs
    total = None
    if config.steps is not None:
        total = whole(config.steps)
        period = config.eval_every
        if period is None:
            period = max(steps_per_epoch, math.ceil(total / MAX_VALIDATIONS))
            if total < batches:
                chosen.append("one validation, at the end (the run is shorter than a pass)")
            else:
                chosen.append(f"a validation every pass over the data, at most {MAX_VALIDATIONS}")
        steps_per_epoch = min(whole(period), total)
        epochs = math.ceil(total / steps_per_epoch)
    elif epochs is None:
        epochs = min(MAX_EPOCHS, max(1, math.ceil(TARGET_STEPS / steps_per_epoch)))
        chosen.append(f"{epochs} epochs for about {TARGET_STEPS} steps")
    total = total or epochs * steps_per_epoch
    warmup = config.warmup_steps
    if warmup is None:
        warmup = round(WARMUP_SHARE * total)
        chosen.append(f"warmup {WARMUP_SHARE:.0%} of the steps")
    if config.optimizer == "adamw-cosine" and capped_warmup(warmup, total) < warmup:
        warmup = capped_warmup(warmup, total)
        chosen.append(f"warmup cut to a fifth of the {total} steps, for the decay")
    return StepPlan(epochs, steps_per_epoch, warmup, batches, tuple(chosen), total)


@dataclass
class TrainResult:
    """What `train` did.

    Attributes:
        run_dir: the run directory.
        history: the rows of `history.csv`, one per epoch, of the whole run.
        metrics: the content of `metrics.json` (None on a non-chief worker).
        resumed_from: the epoch a backup resumed from, or None.
        already_finished: the directory held this run, finished; nothing was done.
    """

    run_dir: str
    history: list[dict]
    metrics: dict | None
    resumed_from: int | None = None
    already_finished: bool = False


def _check_config(config) -> None:
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
    _check_config(config)
    distribution.check_strategy(config.strategy)
    chief = distribution.is_chief(config.strategy)
    out = config.out
    write_dir = out if chief else os.path.join(out, f".worker-{distribution.worker_index()}")
    state = rd.inspect_run_directory(out, config.identity()) if chief else rd.FRESH
    if state == rd.FINISHED:
        return Prepared(config, None, state, chief, write_dir)
    from transformer_zoo.models.presets import resolve_preset

    resolve_preset(config.preset, config.family)  # fails fast, before the data is read
    # A run from `init` keeps that model's architecture. The check builds a model, which
    # starts TensorFlow's runtime: a multiworker run must configure its collective ops
    # first (`make_strategy`), so there the constructor checks run when the model is built.
    if config.init is None and config.strategy != "multiworker":
        check_model_arguments(config.preset, config.family, config.overrides)
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
    _warn_training_file_reused(config)
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
        check_data_files(rd.load_run_config(out))  # the splits it trained on, unchanged
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


def _tokenizers(config: TrainConfig) -> str:
    """ "tokenizers" where an encoder-decoder's sides get one each, else "tokenizer"."""
    from transformer_zoo.models.presets import resolve_preset

    shared = one_vocabulary(resolve_preset(config.preset, config.family))
    return "tokenizers" if config.family == "encoder-decoder" and not shared else "tokenizer"


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
        rd.check_model_file(os.path.join(out, MODEL_FILE))
    except (ValueError, OSError):  # ModelDirectoryError: the rerun trains again
        return False
    return os.path.isfile(os.path.join(out, rd.METRICS_FILE))


def _run_config(prepared: Prepared, model: keras.Model, status: str) -> RunConfig:
    setup, config = prepared.setup, prepared.config
    length = setup.backbone(model).max_length
    extra = {
        "train": config.identity(),
        "status": status,
        "parameters": int(model.count_params()),
        "vocabulary_sizes": [setup.tokenizer.vocabulary_size]
        + ([setup.target_tokenizer.vocabulary_size] if setup.separate_target else []),
    }
    if setup.task.shared_targets is not None:
        extra["shared_test_targets"] = setup.task.shared_targets
    digests = data_digests(config.data, config.valid, config.test)
    if digests:
        extra["data_digests"] = digests
    if setup.task.label_names:  # what `classify` reads: a text, or a pair (`--pairs`)
        extra["text_pairs"] = any(e.text2 is not None for e in setup.task.train)
    kept = {}  # a run from `init` keeps its tokenizer files (`_write_start` copies them)
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


def served_model(prepared: Prepared, model: keras.Model) -> ServedModel:
    """`model` (a float32 model of the run, for example the one training, or its copy)
    behind the text interface that `evaluate` scores, with the run's tokenizers."""
    runner = KerasRunner(model)
    setup = prepared.setup
    config = _run_config(prepared, model, "training")
    return ServedModel(config, runner.dims, runner, setup.tokenizer, setup.target_tokenizer)


def validation_score(prepared: Prepared) -> ValidationScore | None:
    """The callback that scores the model being trained on the first `score_examples`
    validation examples at each epoch's end (greedy, as `evaluate`), when early stopping
    watches a score; None when it watches the loss."""
    config = prepared.config
    if config.early_stopping_on is None:
        return None
    name, limit = config.early_stopping_on, config.score_examples or DEFAULT_SCORE_EXAMPLES

    def score(model: keras.Model) -> float:
        if config.precision != "float32":  # scored as it will be saved and served
            policy = keras.config.dtype_policy()
            keras.config.set_dtype_policy("float32")
            try:
                model = float32_copy(model)
            finally:
                keras.config.set_dtype_policy(policy)
        # No bars of its own between the epochs' Keras progress bars.
        served = served_model(prepared, model)
        scores = evaluate(served, prepared.setup.task, "valid", limit, 0, progress=False)
        return scores[name]["all"]

    return ValidationScore(name, score)


def _training_ended(config, plan, resumed: int, stopping, spent: float, step: int) -> bool:
    """Whether a resumed run's backup was written after its training had ended (killed
    while it saved its model): every epoch done, early stopping's patience run out, or
    the step or time budget used up. Its rerun trains no further epoch."""
    patience = config.early_stopping_patience
    return (
        resumed >= plan.epochs
        or bool(patience and stopping is not None and stopping.wait >= patience)
        or bool(config.steps and step >= plan.total_steps)
        or bool(config.time_budget and spent >= config.time_budget)
    )


def _save_model(model: keras.Model, out: str) -> None:
    check_free_space(out, variables_bytes(model), MODEL_FILE)
    with interruptions_deferred(), atomic_path(os.path.join(out, MODEL_FILE)) as temporary:
        model.save(temporary)


def train(config: TrainConfig, callbacks=(), verbose: int | None = None) -> TrainResult:
    """Trains, evaluates and writes the run directory `config.out` (see `run_directory`).

    The run is reproducible from `config.seed`, which seeds TensorFlow's and Keras' global
    generators (`keras.utils.set_random_seed`); the caller's Python and numpy global
    generators get their state back when it returns or raises (a notebook drawing with
    `np.random` between two runs drew the same numbers after each).

    Args:
        config: the settings, a `TrainConfig` (a dict of them: `TrainConfig(**settings)`).
        callbacks: more Keras callbacks for `fit`.
        verbose: Keras verbosity; None: a progress bar on a terminal, else a line per epoch.

    Raises:
        ValueError: `config` is not a `TrainConfig`, or as `prepare`.
        NaNLossError: the loss became NaN or infinite (the last good checkpoint is kept).
    """
    if not isinstance(config, Prepared):
        _check_config(config)
    generators = random.getstate(), np.random.get_state()
    try:
        return _train(config, callbacks, verbose)
    finally:
        random.setstate(generators[0])
        np.random.set_state(generators[1])


def _train(config, callbacks, verbose) -> TrainResult:
    prepared = config if isinstance(config, Prepared) else prepare(config)
    config, out, setup = prepared.config, prepared.write_dir, prepared.setup
    if prepared.state == rd.FINISHED:
        metrics = read_json(os.path.join(out, rd.METRICS_FILE))
        history = read_history(os.path.join(out, rd.HISTORY_FILE))
        return TrainResult(out, history, metrics, already_finished=True)
    if prepared.state == TRAINED:
        say(f"{out} holds this run, trained; evaluating its {MODEL_FILE} again.")
        remove_backup(os.path.join(out, rd.BACKUP_DIR))  # killed before it was removed
        model = keras.saving.load_model(os.path.join(out, MODEL_FILE), compile=False)
        return _evaluate(prepared, model, read_json(os.path.join(out, rd.METRICS_FILE)), None)
    if verbose is None:
        verbose = 1 if sys.stdout.isatty() else 2
    os.makedirs(out, exist_ok=True)
    for folder in (out, os.path.join(out, rd.CHECKPOINT_DIR), os.path.join(out, rd.BACKUP_DIR)):
        remove_stale_staging(folder)  # what a killed run was writing
    keras.utils.set_random_seed(config.seed)  # TensorFlow's, Keras', Python's and numpy's
    strategy = distribution.make_strategy(config.strategy)
    policy = keras.config.dtype_policy()
    keras.config.set_dtype_policy(config.precision)
    try:
        with strategy.scope():
            model = setup.build_model(config.dropout)
        replicas = strategy.num_replicas_in_sync
        train_data = setup.dataset(
            "train", model, config.batch_size, shuffle=True, seed=config.seed, replicas=replicas
        )
        execution = distribution.steps_per_execution(
            config.strategy, config.steps_per_execution, replicas
        )
        # Bucketing hides the epoch length from tf.data; counting one pass (which fills the
        # pipeline's cache, so the first epoch is not slower) sizes the run. A token
        # stream's pipeline knows it (a pass over a 100 MB text: 5 s to count at batch
        # 128, more at smaller ones).
        batches = int(train_data.cardinality())
        if batches < 0:
            say("Counting the training batches (one pass over the data) …")
            batches = sum(1 for _ in train_data)
        plan = plan_steps(config, batches, execution)
        say(plan.describe(config, setup.backbone(model).dropout))
        _warn_cut(setup, setup.backbone(model).max_length)
        if config.init is not None:
            _warn_unknown(setup, config.init)
        train_data = train_data.repeat()  # epochs of plan.steps_per_epoch steps each
        total_steps = plan.total_steps
        with strategy.scope():
            loss, metrics = setup.loss_and_metrics(config.label_smoothing)
            optimizer, rate_callbacks = make_optimizer(
                config.optimizer,
                setup.backbone(model).hidden_dim,
                total_steps,
                plan.warmup_steps,
                config.learning_rate,
                config.time_budget,
                weight_decay=config.weight_decay,
                min_learning_rate=config.min_learning_rate,
                clip_norm=config.clip_norm,
                ema_momentum=config.ema_momentum,
            )
            model.compile(
                optimizer=optimizer,
                loss=loss,
                metrics=metrics,
                steps_per_execution=execution,
                jit_compile=config.jit_compile,
            )
            # Made here, the optimizer's variables are not created inside the first
            # train step, which TensorFlow would then trace twice (half the start-up).
            model.optimizer.build(model.trainable_variables)
        if prepared.chief and prepared.state == rd.FRESH:
            _write_start(prepared, model)
        resumed = restore_backup(os.path.join(out, rd.BACKUP_DIR), model)
        stopping = resumed_early_stopping(os.path.join(out, rd.BACKUP_DIR)) if resumed else None
        best = rd.trim_history(os.path.join(out, rd.HISTORY_FILE), resumed or 0)
        spent = backup_seconds(os.path.join(out, rd.BACKUP_DIR))
        ended = resumed is not None and _training_ended(
            config, plan, resumed, stopping, spent, int(model.optimizer.iterations.numpy())
        )
        if ended:
            say(f"{out}: its training had ended before it was interrupted.")
        elif resumed is not None:
            say(f"Resuming {out} from its backup at epoch {resumed + 1}.")
            # The batches the uninterrupted run would see next: the pipeline's order is
            # fixed by the seed, pass after pass, and a resumed `fit` starts it afresh.
            train_data = train_data.skip(resumed * plan.steps_per_epoch)
        pretraining = None
        if config.pretrain_steps and resumed is None:  # a backup holds pretrained weights
            pretraining = pretrain_masked_lm(
                model.backbone,
                setup,
                config.pretrain_steps,
                config.batch_size,
                plan.warmup_steps,
                strategy,
                seed=config.seed,
                steps_per_execution=model.steps_per_execution,
                jit_compile=config.jit_compile,
                verbose=verbose,
            )
            if prepared.chief:  # for the metrics of a run that resumes after it
                run_config = load_run_config(out)
                run_config.extra[PRETRAINING_KEY] = pretraining
                save_run_config(out, run_config)
        elif config.pretrain_steps and prepared.chief:
            pretraining = load_run_config(out).extra.get(PRETRAINING_KEY)
        budget = None
        if config.time_budget or config.steps:
            budget = Budget(config.time_budget, total_steps if config.steps else None)
        all_callbacks = run_callbacks(
            out,
            best if resumed else None,
            budget,
            config.early_stopping_patience,
            config.backup_every,
            extra=[*rate_callbacks, *callbacks],
            score=validation_score(prepared),
            averaged=config.ema_momentum is not None,
            resumed_early_stopping=stopping,
        )
        for callback in all_callbacks:  # the clocks (budget, schedule, backup) go on
            if hasattr(callback, "spent"):
                callback.spent = spent
        valid_batch = setup.validation_batch_size(config.batch_size)
        valid_data = setup.dataset("valid", model, valid_batch, replicas=replicas)
        started = time.perf_counter()
        load = os.getloadavg()[0]
        with warnings.catch_warnings():
            # The pipelines shuffle; Keras' `shuffle` does not apply to a tf.data dataset.
            warnings.filterwarnings("ignore", message=".*`shuffle=True` was passed")
            # The validation pipeline has no known length; Keras warns at its end.
            warnings.filterwarnings("ignore", message="Your input ran out of data")
            with distribution.fit_scope(model, strategy):
                model.fit(  # no epoch when the training had ended: the callbacks' ends
                    train_data,  # still run (early stopping's best weights, the average)
                    validation_data=valid_data,
                    epochs=resumed if ended else plan.epochs,
                    steps_per_epoch=plan.steps_per_epoch,
                    initial_epoch=resumed or 0,
                    callbacks=all_callbacks,
                    verbose=verbose,
                )
        seconds = time.perf_counter() - started
    finally:
        keras.config.set_dtype_policy(policy)
    if not prepared.chief:
        shutil.rmtree(out, ignore_errors=True)
        return TrainResult(config.out, [], None, resumed_from=resumed)
    summary = {
        "epochs": None,
        "planned_epochs": plan.epochs,
        "steps_per_epoch": plan.steps_per_epoch,
        "planned_steps": plan.total_steps,
        "warmup_steps": plan.warmup_steps,
        "steps": int(model.optimizer.iterations.numpy()),
        "train_seconds": round(seconds, 1),
        "stopped_by": (budget and budget.stopped_by) or ("steps" if config.steps else "epochs"),
        "resumed_from_epoch": resumed,
        "load_average": [round(load, 2), round(os.getloadavg()[0], 2)],
        "precision": config.precision,
        "strategy": config.strategy,
        "replicas": strategy.num_replicas_in_sync,
        "pretraining": pretraining,
        "early_stopping": _restored(all_callbacks),
    }
    return _finish(prepared, model, summary, resumed)


def _restored(callbacks) -> dict | None:
    """What early stopping watched and the epoch whose weights it restored (the model
    saved), or None without it."""
    for callback in callbacks:
        if isinstance(callback, keras.callbacks.EarlyStopping) and callback.best is not None:
            return {
                "monitor": callback.monitor,
                "best": float(callback.best),
                "best_epoch": int(callback.best_epoch) + 1,
            }
    return None


def _warn_cut(setup: FamilySetup, max_length: int) -> None:
    """One line, where any example is cut: how many of each split the pipelines cut to
    the model's `max_length` tokens (the held-out ones too: the validation loss and the
    test scores read them cut)."""
    counts = {split: setup.longer_than(max_length, split) for split in SPLIT_NAMES}
    if any(counts.values()):
        train, valid, test = (
            f"{counts[split]} of {len(getattr(setup.task, split))} {name}"
            for split, name in SPLIT_NAMES.items()
        )
        log.warning(
            "%s, %s and %s examples are longer than the model's %d tokens and are cut to it "
            "(a preset with a larger max_length keeps them whole)",
            train,
            valid,
            test,
            max_length,
        )


def _warn_training_file_reused(config: TrainConfig) -> None:
    """One line when `--valid` or `--test` holds the training file's very contents: its
    scores would say what the model memorised, not how it does on text it has not seen."""
    digests = data_digests(config.data, config.valid, config.test)
    for name in ("valid", "test"):
        if "data" in digests and digests.get(name) == digests["data"]:
            log.warning(
                "--%s %s holds the same contents as --data: the %s scores will measure "
                "what the model memorised, not how it does on unseen text",
                name,
                getattr(config, name),
                "validation" if name == "valid" else "test",
            )


UNKNOWN_SHARE = 0.01  # of the training tokens: past it, `_warn_unknown` says so
UNKNOWN_SAMPLE = 2000  # training examples read for it


def _warn_unknown(setup: FamilySetup, init: str) -> None:
    """One line when more than `UNKNOWN_SHARE` of the training text's tokens (the first
    `UNKNOWN_SAMPLE` examples') are unknown to the tokenizer that `--init` brings: a model
    pretrained on other text (another script or language) sees them all as one `<unk>`."""
    unknown, total = setup.unknown_tokens(UNKNOWN_SAMPLE)
    if unknown > UNKNOWN_SHARE * total:
        log.warning(
            "%.1f%% of the training text's tokens (%d of %d) are unknown to the tokenizer "
            "of --init %s: the model reads each as the one <unk> token (was it pretrained "
            "on another language or script?)",
            100 * unknown / total,
            unknown,
            total,
            init,
        )


def _write_start(prepared: Prepared, model: keras.Model) -> None:
    """A fresh run's config (status "training") and tokenizers, before the first step."""
    out, setup = prepared.write_dir, prepared.setup
    save_run_config(out, _run_config(prepared, model, "training"))
    if prepared.config.init is not None:  # its files as they are (WordPiece's casing too)
        copy_tokenizers(
            prepared.config.init, out, load_run_config(prepared.config.init).tokenizer_files
        )
        return
    target = setup.target_tokenizer if setup.separate_target else None
    save_tokenizers(out, setup.tokenizer, target)


def _finish(prepared: Prepared, model: keras.Model, summary: dict, resumed) -> TrainResult:
    """Saves the trained model and what training measured, marks the run `TRAINED`
    (the backup is no longer needed: a rerun goes straight to the test evaluation), and
    evaluates."""
    config, out, setup = prepared.config, prepared.write_dir, prepared.setup
    serving = float32_copy(model)
    _save_model(serving, out)
    history = read_history(os.path.join(out, rd.HISTORY_FILE))
    summary["epochs"] = len(history)
    ended = (
        summary["stopped_by"] in ("epochs", "steps") and summary["steps"] < summary["planned_steps"]
    )
    if len(history) < summary["planned_epochs"] and ended:
        summary["stopped_by"] = "early_stopping"
    if history:
        data = config.data  # a file by its name: a long path did not fit the title
        data = data if data.startswith("builtin:") else os.path.basename(data)
        title = f"{setup.family} {setup.preset} on {data}"
        xlabel = f"epoch ({summary['steps_per_epoch']} steps each)"
        plot_curves(history, os.path.join(out, rd.CURVES_FILE), title, xlabel)
    metrics = {"training": summary}
    write_json(os.path.join(out, rd.METRICS_FILE), metrics)
    save_run_config(out, _run_config(prepared, serving, TRAINED))
    remove_backup(os.path.join(out, rd.BACKUP_DIR))
    return _evaluate(prepared, serving, metrics, resumed)


def _evaluate(prepared: Prepared, serving: keras.Model, metrics: dict, resumed) -> TrainResult:
    """Scores the saved model on the test split and marks the run finished."""
    config, out, setup = prepared.config, prepared.write_dir, prepared.setup
    if config.evaluate:
        metrics["test"] = evaluate(served_model(prepared, serving), setup.task)
    write_json(os.path.join(out, rd.METRICS_FILE), metrics)
    save_run_config(out, _run_config(prepared, serving, "finished"))
    history = read_history(os.path.join(out, rd.HISTORY_FILE))
    return TrainResult(out, history, metrics, resumed_from=resumed)
