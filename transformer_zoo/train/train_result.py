"""`TrainResult`, what `train` did, and the end of a run that makes it: the float32
`model.keras` saved, `metrics.json`, `curves.png` and `config.json` written and the backup
removed (`finish_run`), then the test evaluation (`evaluate_run`), which a rerun of a run
interrupted in it does again."""

from __future__ import annotations

import os
from dataclasses import dataclass

import keras

from transformer_zoo import run_directory as rd
from transformer_zoo.evaluation.evaluate import evaluate
from transformer_zoo.files import (
    atomic_path,
    check_free_space,
    interruptions_deferred,
    variables_bytes,
    write_json,
)
from transformer_zoo.models.family import float32_copy
from transformer_zoo.run_directory import MODEL_FILE, save_run_config
from transformer_zoo.train.callbacks.backup import remove_backup
from transformer_zoo.train.prepared import TRAINED, Prepared, run_config_of
from transformer_zoo.train.scoring import served_model
from transformer_zoo.visualize.curves import epoch_axis_label, plot_curves, read_history


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


def finish_run(prepared: Prepared, model: keras.Model, summary: dict, resumed) -> TrainResult:
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
        xlabel = epoch_axis_label(summary["steps_per_epoch"], summary["steps"], len(history))
        plot_curves(history, os.path.join(out, rd.CURVES_FILE), title, xlabel)
    metrics = {"training": summary}
    write_json(os.path.join(out, rd.METRICS_FILE), metrics)
    save_run_config(out, run_config_of(prepared, serving, TRAINED))
    remove_backup(os.path.join(out, rd.BACKUP_DIR))
    return evaluate_run(prepared, serving, metrics, resumed)


def evaluate_run(prepared: Prepared, serving: keras.Model, metrics: dict, resumed) -> TrainResult:
    """Scores the saved model on the test split and marks the run finished."""
    config, out, setup = prepared.config, prepared.write_dir, prepared.setup
    if config.evaluate:
        metrics["test"] = evaluate(served_model(prepared, serving), setup.task)
    write_json(os.path.join(out, rd.METRICS_FILE), metrics)
    save_run_config(out, run_config_of(prepared, serving, "finished"))
    history = read_history(os.path.join(out, rd.HISTORY_FILE))
    return TrainResult(out, history, metrics, resumed_from=resumed)


def _save_model(model: keras.Model, out: str) -> None:
    check_free_space(out, variables_bytes(model), MODEL_FILE)
    with interruptions_deferred(), atomic_path(os.path.join(out, MODEL_FILE)) as temporary:
        model.save(temporary)
