"""An existing run directory (`run_directory`): which run it holds (`run_identity`, the
same for the run and its exports), the state `transformer-zoo train --out` finds it in
(`inspect_run_directory`: `run_directory.FRESH`, `RESUME` or `FINISHED`), the history a
resumed run continues (`trim_history`) and whether its model file is whole
(`check_model_file`).

Like `run_directory`, this module imports only the standard library and the project's own
`errors`, `files` and `run_directory`.
"""

from __future__ import annotations

import csv
import os
import zipfile
from typing import Any

from transformer_zoo.errors import ModelDirectoryError, RunError, first_line
from transformer_zoo.files import atomic_path
from transformer_zoo.run_directory import (
    BACKUP_DIR,
    BACKUP_METADATA_FILE,
    CONFIG_FILE,
    FINISHED,
    FRESH,
    METRICS_FILE,
    MODEL_FILE,
    RESUME,
    RunConfig,
    load_run_config,
)

# What tells two runs apart in their configs (an export's config.json copies its run's):
# these fields, and `extra`'s training settings and imported checkpoint.
RUN_IDENTITY = ("family", "preset", "task", "data", "seed")
RUN_IDENTITY_EXTRA = ("train", "imported_from")


def run_identity(config: RunConfig) -> dict[str, Any]:
    """What names the run `config` describes, the same for the run and its exports; JSON,
    so that a Hugging Face export (whose config.json is transformers') can record it."""
    identity = {key: getattr(config, key) for key in RUN_IDENTITY}
    identity.update({key: config.extra.get(key) for key in RUN_IDENTITY_EXTRA})
    return identity


def run_differences(identity: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """What two `run_identity`s differ in, in words for a message ("seed", "training
    settings"): nothing for a run and its exports."""
    return [
        _IDENTITY_WORDS.get(key, key)
        for key in (*RUN_IDENTITY, *RUN_IDENTITY_EXTRA)
        if identity.get(key) != other.get(key)
    ]


_IDENTITY_WORDS = {"train": "training settings", "imported_from": "imported checkpoint"}


# Stored absolute since 2026-12-03 (pretrain_data since it came).
PATH_SETTINGS = ("data", "valid", "test", "init", "pretrain_data")


def _absolute(key: str, value):
    """A file setting of a run written before paths were stored absolute, read as the
    rerun (from the same directory) would: relative to the working directory."""
    if key in PATH_SETTINGS and isinstance(value, str) and not value.startswith("builtin:"):
        return os.path.abspath(value)
    return value


def _moved(key: str, before, now) -> bool:
    """Whether a setting names a data file at another path, the one it names gone from
    where the run recorded it: the same run, whose files moved (not a new --valid, other
    data, or another --init checkpoint)."""
    files = [v for v in (before, now) if isinstance(v, str) and not v.startswith("builtin:")]
    return (
        key in ("data", "valid", "test", "pretrain_data")
        and len(files) == 2
        and not os.path.exists(before)
    )


def copy_source(directory: str, config: RunConfig) -> str:
    """Where the quantized copy `directory` (its `config`) came from, for messages: "the
    export in PARENT" where its parent directory holds an export of the same weights (the
    command line's DIR/int8), else "the export it was quantized from"."""
    parent = os.path.dirname(os.path.abspath(directory))
    try:
        weights = load_run_config(parent).export.get("weights")
    except RunError:
        weights = None
    if weights is not None and weights == config.export.get("weights"):
        return f"the export in {parent}"
    return "the export it was quantized from"


def inspect_run_directory(out: str, identity: dict) -> str:
    """`"fresh"`, `"resume"` (the same run, unfinished) or `"finished"` (the same run, done).

    Raises:
        RunError: `out` is a file, a directory of other files, an export, or holds a
            different run.
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
    if config.export:  # an export copies its run's config.json, `extra.train` included
        raise RunError(
            f"--out {out!r} holds an export, not a run (its config.json has an `export` "
            "entry); choose another --out"
        )
    previous = config.extra.get("train")
    if not isinstance(previous, dict):
        raise RunError(
            f"--out {out!r} holds a model that `transformer-zoo train` did not write; "
            "choose another --out"
        )
    previous = {k: _absolute(k, v) for k, v in previous.items()}
    if previous.get("steps") is not None:  # before 2026-12-05 a --steps run on built-in
        previous["epochs"] = None  # data recorded the data's default epochs beside it
    changed = sorted(k for k in set(identity) | set(previous) if identity.get(k) != previous.get(k))
    backed_up = os.path.isfile(os.path.join(out, BACKUP_DIR, BACKUP_METADATA_FILE))
    if changed and config.extra.get("status") == "training" and not backed_up:
        # A start that stopped before its first backup (a NaN loss, Ctrl-C) trained
        # nothing to keep: a rerun with other settings starts afresh there.
        return FRESH
    if changed:
        details = ", ".join(
            f"{k}={previous.get(k)!r} there, {identity.get(k)!r} now" for k in changed
        )
        if all(_moved(k, previous.get(k), identity.get(k)) for k in changed):
            raise RunError(
                f"--out {out!r} holds a run of files at other paths ({details}): a run "
                "reads its data where it recorded it, so to resume it put the files back "
                "there (or link them there) and give those paths; or choose another --out"
            )
        raise RunError(
            f"--out {out!r} holds a different run ({details}); choose another --out, or "
            "delete that directory to start over"
        )
    done = config.extra.get("status") == "finished"
    if done and all(os.path.isfile(os.path.join(out, f)) for f in (MODEL_FILE, METRICS_FILE)):
        try:
            check_model_file(os.path.join(out, MODEL_FILE))
        except ModelDirectoryError as error:
            raise RunError(
                f"--out {out!r} holds this run, finished, but {error} Delete the directory "
                "to train the run again."
            ) from None
        return FINISHED
    return RESUME


def trim_history(path: str, epochs: int) -> float | None:
    """Keeps the rows of the first `epochs` epochs of a `CSVLogger` file (a resumed run
    repeats the epoch that was interrupted) and returns their lowest `val_loss`."""
    if not os.path.isfile(path):
        return None
    with open(path, newline="", encoding="utf-8") as file:
        reader = csv.DictReader(file)
        fields, rows = reader.fieldnames, list(reader)
    kept = [row for row in rows if row.get("epoch", "").isdigit() and int(row["epoch"]) < epochs]
    with atomic_path(path) as temporary:
        with open(temporary, "w", newline="", encoding="utf-8") as file:
            if kept and fields:
                # CSVLogger's line ends (the csv module's "\r\n"), so that the rows a
                # resumed run appends end as these do.
                writer = csv.DictWriter(file, fieldnames=fields)
                writer.writeheader()
                writer.writerows(kept)
    losses = [float(row["val_loss"]) for row in kept if row.get("val_loss") not in (None, "", "NA")]
    return min(losses) if losses else None


def check_model_file(path: str) -> None:
    """Raises `ModelDirectoryError` unless `path` is a whole `.keras` archive (a zip whose
    members all read back): a truncated or overwritten file is named as damaged, where
    Keras would report it as "File not found"."""
    try:
        with zipfile.ZipFile(path) as archive:
            broken = archive.testzip()
    except (zipfile.BadZipFile, OSError, EOFError) as error:
        raise ModelDirectoryError(
            f"{path} is damaged: not a whole .keras archive ({first_line(error)})."
        ) from None
    if broken is not None:
        raise ModelDirectoryError(f"{path} is damaged: its member {broken} does not read back.")
