"""What `transformer-zoo train` writes in a run directory, and whether a rerun may resume.

model.keras            the trained model, float32, uncompiled (export and serving)
config.json            `transformer_zoo.run.RunConfig`; `extra.train` = the settings
tokenizer.model        (source) SentencePiece model; `target_tokenizer.model` too
                       when an encoder-decoder has a separate target vocabulary
metrics.json           the final evaluation and the training summary
history.csv            one row per epoch (Keras `CSVLogger`)
curves.png             loss and metric curves
checkpoints/best.keras lowest validation loss so far; checkpoints/last.keras the
                       last finished epoch (both with the optimizer state)
backup/                `BackupAndRestore` state while training; gone once finished
logs/                  TensorBoard
"""

from __future__ import annotations

import csv
import json
import os

from transformer_zoo.run import CONFIG_FILE, MODEL_FILE, RunError, atomic_path, load_run_config

METRICS_FILE = "metrics.json"
HISTORY_FILE = "history.csv"
CURVES_FILE = "curves.png"
CHECKPOINT_DIR = "checkpoints"
BACKUP_DIR = "backup"
LOG_DIR = "logs"
FRESH, RESUME, FINISHED = "fresh", "resume", "finished"


def inspect_run_directory(out: str, identity: dict) -> str:
    """`"fresh"`, `"resume"` (the same run, unfinished) or `"finished"` (the same run, done).

    Raises:
        RunError: `out` is a file, a directory of other files, or holds a different run.
    """
    if not os.path.exists(out):
        return FRESH
    if not os.path.isdir(out):
        raise RunError(f"--out {out!r} is a file, not a directory")
    if not os.listdir(out):
        return FRESH
    if not os.path.isfile(os.path.join(out, CONFIG_FILE)):
        raise RunError(
            f"--out {out!r} is not empty and holds no run (no {CONFIG_FILE}); choose another --out"
        )
    config = load_run_config(out)
    previous = config.extra.get("train")
    if not isinstance(previous, dict):
        raise RunError(
            f"--out {out!r} holds a model that `transformer-zoo train` did not write; "
            "choose another --out"
        )
    changed = sorted(k for k in set(identity) | set(previous) if identity.get(k) != previous.get(k))
    if changed:
        details = ", ".join(
            f"{k}={previous.get(k)!r} there, {identity.get(k)!r} now" for k in changed
        )
        raise RunError(
            f"--out {out!r} holds a different run ({details}); choose another --out or delete it"
        )
    done = config.extra.get("status") == "finished"
    if done and all(os.path.isfile(os.path.join(out, f)) for f in (MODEL_FILE, METRICS_FILE)):
        return FINISHED
    return RESUME


def write_json(path: str, data) -> None:
    """Writes JSON atomically (a temporary file in the same directory, then a rename)."""
    with atomic_path(path, ".json") as temporary, open(temporary, "w", encoding="utf-8") as file:
        json.dump(data, file, indent=2, ensure_ascii=False)
        file.write("\n")


def read_json(path: str):
    with open(path, encoding="utf-8") as file:
        return json.load(file)


def trim_history(path: str, epochs: int) -> float | None:
    """Keeps the rows of the first `epochs` epochs of a `CSVLogger` file (a resumed run
    repeats the epoch that was interrupted) and returns their lowest `val_loss`."""
    if not os.path.isfile(path):
        return None
    with open(path, newline="", encoding="utf-8") as file:
        reader = csv.DictReader(file)
        fields, rows = reader.fieldnames, list(reader)
    kept = [row for row in rows if row.get("epoch", "").isdigit() and int(row["epoch"]) < epochs]
    with atomic_path(path, ".csv") as temporary:
        with open(temporary, "w", newline="", encoding="utf-8") as file:
            if kept and fields:
                writer = csv.DictWriter(file, fieldnames=fields, lineterminator="\n")
                writer.writeheader()
                writer.writerows(kept)
    losses = [float(row["val_loss"]) for row in kept if row.get("val_loss")]
    return min(losses) if losses else None
