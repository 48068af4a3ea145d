"""`train(config)`: one run of `model.fit`, from the data to a complete run directory.

The steps: check the settings, the data and `--out` (`prepare`); train or reload the
tokenizers; build and compile the model under the strategy and precision; `fit` with the
callbacks (best and last checkpoints, crash backup, CSV log, TensorBoard, NaN guard,
optional early stopping and time budget); save a float32 `model.keras`; evaluate on the
test split; write `metrics.json`, `history.csv`, `curves.png` and `config.json`.
Rerunning the same settings on the same `--out` resumes an interrupted run from its backup
(a run that stopped before its first backup starts afresh; one interrupted in its test
evaluation, with its model saved, is evaluated again).

Its stages live beside it: `prepared` (the checks, the data and the tokenizers),
`step_plan` (how long the run trains), `scoring` (the validation score), `train_result`
(the model saved and evaluated) and `data_warnings`.
"""

from __future__ import annotations

import os
import random
import shutil
import sys
import time
import warnings

import keras
import numpy as np

from transformer_zoo import run_directory as rd
from transformer_zoo.files import read_json, remove_stale_staging
from transformer_zoo.models.saving import load_run_model
from transformer_zoo.progress import say
from transformer_zoo.run_directory import MODEL_FILE, load_run_config, save_run_config
from transformer_zoo.run_state import trim_history
from transformer_zoo.text import save_tokenizers
from transformer_zoo.text.files import copy_tokenizers
from transformer_zoo.train import distribution
from transformer_zoo.train.callbacks.backup import (
    backup_seconds,
    remove_backup,
    restore_backup,
    resumed_early_stopping,
)
from transformer_zoo.train.callbacks.budget import Budget
from transformer_zoo.train.callbacks.resumed_epoch import ResumedEpoch
from transformer_zoo.train.callbacks.run_callbacks import run_callbacks
from transformer_zoo.train.config import TrainConfig
from transformer_zoo.train.data_warnings import warn_cut, warn_unknown
from transformer_zoo.train.prepared import TRAINED, Prepared, prepare, run_config_of
from transformer_zoo.train.pretraining import pretrain_masked_lm
from transformer_zoo.train.recipe.optimizers import make_optimizer
from transformer_zoo.train.scoring import validation_score
from transformer_zoo.train.step_plan import plan_steps
from transformer_zoo.train.train_result import TrainResult, evaluate_run, finish_run
from transformer_zoo.visualize.curves import read_history

PRETRAINING_KEY = "pretraining"  # config.json's extra, while a run trains: its summary


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
        model = load_run_model(out)
        return evaluate_run(prepared, model, read_json(os.path.join(out, rd.METRICS_FILE)), None)
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
        head = model.dropout if model is not setup.backbone(model) else None  # a classifier's
        say(plan.describe(config, setup.backbone(model).dropout, head))
        warn_cut(setup, setup.max_length)
        if config.init is not None:
            warn_unknown(setup, config.init)
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
        best = trim_history(os.path.join(out, rd.HISTORY_FILE), resumed or 0)
        spent = backup_seconds(os.path.join(out, rd.BACKUP_DIR))
        step = int(model.optimizer.iterations.numpy())
        ended = None if resumed is None else _ended_by(config, plan, resumed, stopping, spent, step)
        rest_of_epoch = None  # a mid-epoch backup's epoch, ended where it would have ended
        if resumed is not None and not ended and step > resumed * plan.steps_per_epoch:
            rest_of_epoch = ResumedEpoch(min((resumed + 1) * plan.steps_per_epoch, total_steps))
        if ended:
            say(f"{out}: its training had ended before it was interrupted.")
        elif resumed is not None:
            say(f"Resuming {out} from its backup at epoch {resumed + 1}.")
            # The batches the uninterrupted run would see next: the pipeline's order is
            # fixed by the seed, pass after pass, and a resumed `fit` starts it afresh.
            train_data = train_data.skip(step)
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
            resumed_epoch=rest_of_epoch,
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
        "train_seconds": round(spent + seconds, 1),  # the whole run's, as the budget counts
        "stopped_by": ended
        or (budget and budget.stopped_by)
        or ("steps" if config.steps else "epochs"),
        "resumed_from_epoch": resumed,
        "load_average": [round(load, 2), round(os.getloadavg()[0], 2)],
        "precision": config.precision,
        "strategy": config.strategy,
        "replicas": strategy.num_replicas_in_sync,
        "pretraining": pretraining,
        "early_stopping": _restored(all_callbacks),
    }
    return finish_run(prepared, model, summary, resumed)


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


def _ended_by(config, plan, resumed: int, stopping, spent: float, step: int) -> str | None:
    """What ended a resumed run's training before its backup was written (killed while it
    saved its model), as `metrics.json`'s `stopped_by`: every epoch done (`"epochs"`, or
    `"steps"` with `config.steps`), early stopping's patience run out, or the step or time
    budget used up; None: it had not ended. Its rerun trains no further epoch."""
    patience = config.early_stopping_patience
    if config.steps and step >= plan.total_steps:
        return "steps"
    if resumed >= plan.epochs:
        return "epochs"
    if patience and stopping is not None and stopping.wait >= patience:
        return "early_stopping"
    if config.time_budget and spent >= config.time_budget:
        return "time_budget"
    return None


def _write_start(prepared: Prepared, model: keras.Model) -> None:
    """A fresh run's config (status "training") and tokenizers, before the first step."""
    out, setup = prepared.write_dir, prepared.setup
    save_run_config(out, run_config_of(prepared, model, "training"))
    if prepared.config.init is not None:  # its files as they are (WordPiece's casing too)
        copy_tokenizers(
            prepared.config.init, out, load_run_config(prepared.config.init).tokenizer_files
        )
        return
    target = setup.target_tokenizer if setup.separate_target else None
    save_tokenizers(out, setup.tokenizer, target)
