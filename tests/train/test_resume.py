"""Crash recovery: `transformer-zoo train` killed with SIGKILL mid-epoch, then the same
command again, resumes from the backup and finishes every epoch exactly once, as the
uninterrupted run does."""

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time

import keras
import pytest

import transformer_zoo.models  # noqa: F401  (registers the classes model.keras names)

EPOCHS = 3


def _command(out) -> list[str]:
    return [
        sys.executable,
        "-m",
        "transformer_zoo.cli",
        "train",
        "--family",
        "encoder-decoder",
        "--max-examples",
        "128",
        "--batch-size",
        "16",
        "--steps-per-execution",
        "1",
        "--epochs",
        str(EPOCHS),
        "--precision",
        "float32",
        "--dropout",  # the resumed epochs draw the masks the uninterrupted ones draw
        "0.1",
        "--no-evaluate",
        "--verbose",
        "2",
        "--out",
        str(out),
    ]


def _backed_up_epoch(out) -> int:
    try:
        with open(out / "backup" / "training_metadata.json", encoding="utf-8") as file:
            return json.load(file)["epoch"]
    except (OSError, ValueError):  # not there yet, or being replaced
        return 0


@pytest.mark.slow  # 56 s; the backup and its restore are tested fast in test_fit_callbacks.py
def test_a_run_killed_mid_epoch_resumes_from_its_backup_and_finishes(tmp_path):
    out = tmp_path / "run"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1"}
    first = subprocess.Popen(
        _command(out), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    deadline = time.monotonic() + 120
    while _backed_up_epoch(out) < 1 and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    # Epoch 1 is backed up and epoch 2 has begun: kill without any cleanup.
    first.send_signal(signal.SIGKILL)
    log = first.communicate()[0]
    assert first.returncode == -signal.SIGKILL, log
    killed_at = _backed_up_epoch(out)
    assert 1 <= killed_at < EPOCHS, log
    assert json.loads((out / "config.json").read_text())["extra"]["status"] == "training"
    # Whatever the kill interrupted, the checkpoint on disk is a whole model.
    keras.saving.load_model(out / "checkpoints" / "last.keras", compile=False)

    second = subprocess.run(_command(out), env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stdout + second.stderr
    assert f"from its backup at epoch {killed_at + 1}" in second.stdout
    with open(out / "history.csv", newline="", encoding="utf-8") as file:
        epochs = [int(row["epoch"]) for row in csv.DictReader(file)]
    assert epochs == list(range(EPOCHS))  # each epoch once, though one was interrupted
    metrics = json.loads((out / "metrics.json").read_text())["training"]
    assert metrics["resumed_from_epoch"] == killed_at and metrics["epochs"] == EPOCHS
    # The epochs' summary lines ("N/N - 3s - loss ..."): the resumed run prints its own; the
    # killed one may have died between epoch 1's backup and its line.
    steps_per_epoch = int(re.search(r"^(\d+)/\1 - ", second.stdout, re.M).group(1))
    assert metrics["steps"] == EPOCHS * steps_per_epoch  # the optimizer's step came back too
    assert not (out / "backup").exists()
    leftovers = [
        n for _, dirs, files in os.walk(out) for n in dirs + files if n.startswith(".partial")
    ]
    assert not leftovers  # no staging folder (files.atomic_path) is left behind

    # The resumed epochs saw the batches the uninterrupted run sees (a resumed `fit`
    # started the pipeline's passes afresh: other batches, another loss, another epoch for
    # early stopping to keep).
    whole = tmp_path / "whole"
    subprocess.run(_command(whole), env=env, capture_output=True, text=True, timeout=300)
    assert _losses(out) == _losses(whole)


def _losses(out) -> list[tuple[str, str]]:
    with open(out / "history.csv", newline="", encoding="utf-8") as file:
        return [(row["loss"], row["val_loss"]) for row in csv.DictReader(file)]
