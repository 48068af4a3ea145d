"""An existing run directory (`run_directory`): which run it holds (`run_identity`, the
same for the run and its exports wherever they are; `without_places`, what an export
records of it), whether a file is the data file it trained on, or a run directory the
`--init` weights it started from (`file_digest`, `holds_recorded_file`), the state
`transformer-zoo train --out` finds it in (`inspect_run_directory`: `run_directory.FRESH`,
`RESUME` or `FINISHED`; `kept_nothing`: a start with nothing trained yet), the history a resumed run continues (`trim_history`) and whether
its model file is whole (`check_model_file`).

Like `run_directory`, this module imports only the standard library and the project's own
`errors`, `files` and `run_directory`.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import hashlib
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
# these fields, and `extra`'s training settings, imported checkpoint and file digests.
RUN_IDENTITY = ("family", "preset", "task", "data", "seed")
RUN_IDENTITY_EXTRA = ("train", "imported_from", "data_digests")


def run_identity(config: RunConfig) -> dict[str, Any]:
    """What names the run `config` describes, the same for the run and its exports, and
    wherever they are: its files named by their base names (`without_places`); JSON, so
    that a Hugging Face export (whose config.json is transformers') can record it."""
    config = without_places(config)
    identity = {key: getattr(config, key) for key in RUN_IDENTITY}
    identity.update({key: config.extra.get(key) for key in RUN_IDENTITY_EXTRA})
    return identity


def run_differences(identity: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """What two `run_identity`s differ in, in words for a message ("seed", "training
    settings"): nothing for a run and its exports, nor for a run whose files moved. Where
    both record a file's SHA-256 (`DIGESTED_FILES`: a data file, the weights of the
    `--init` run), those tell the files apart, not their names; a file one side recorded
    none of (an identity recorded before: a Hugging Face export's, with whole paths; a run
    from `--init` before its weights were digested) is compared by its name."""
    sides = [_named_files(identity), _named_files(other)]
    digests = [side.get("data_digests") or {} for side in sides]
    both = set(digests[0]) & set(digests[1])
    sides = [
        _by_contents(side, {k: v for k, v in recorded.items() if k in both})
        for side, recorded in zip(sides, digests, strict=True)
    ]
    changed = [
        key
        for key in (*RUN_IDENTITY, *RUN_IDENTITY_EXTRA)
        if sides[0].get(key) != sides[1].get(key)
    ]
    if changed == ["train"] and _only_init_differs(*(side["train"] for side in sides)):
        return ["--init checkpoints"]
    return [_IDENTITY_WORDS.get(key, key) for key in changed]


_IDENTITY_WORDS = {"train": "training settings", "imported_from": "imported checkpoint"}


def _only_init_differs(train: Any, other: Any) -> bool:
    """Whether two runs' training settings differ in their `--init` run only."""
    return (
        isinstance(train, dict)
        and isinstance(other, dict)
        and {k: v for k, v in train.items() if k != "init"}
        == {k: v for k, v in other.items() if k != "init"}
    )


def without_places(config: RunConfig) -> RunConfig:
    """`config` with the files and directories it names (`PATH_SETTINGS`: data files, an
    `--init` run; an imported checkpoint) by their base names: what an export records of
    its run, whose paths are of the machine that trained and mean nothing where the
    export is served or shared (runs keep their paths, to read their data again)."""
    return dataclasses.replace(
        config, data=_base_name(config.data), extra=_named_files(config.extra)
    )


def _named_files(mapping: dict[str, Any]) -> dict[str, Any]:
    """A config's `extra` or a `run_identity` (one recorded before with whole paths too)
    with base names: its `data` and `imported_from`, and its training settings' files."""
    mapping = _named(mapping, ("data", "imported_from"))
    if isinstance(mapping.get("train"), dict):
        mapping["train"] = _named(mapping["train"], PATH_SETTINGS)
    return mapping


def _by_contents(identity: dict[str, Any], digests: dict[str, str]) -> dict[str, Any]:
    """A `run_identity` whose files `digests` names (of its `data_digests`) are named by
    their SHA-256, the others by their names."""
    identity = {**identity, "data": digests.get("data", identity.get("data")), "data_digests": None}
    if isinstance(identity.get("train"), dict):
        identity["train"] = {
            **identity["train"],
            **{k: v for k, v in digests.items() if k in identity["train"]},
        }
    return identity


def _named(mapping: dict[str, Any], keys) -> dict[str, Any]:
    return {k: _base_name(v) if k in keys else v for k, v in mapping.items()}


def _base_name(value):
    """A path's last component ("corpus.txt"); anything else (`builtin:NAME`, None) as is."""
    if isinstance(value, str) and value and not value.startswith("builtin:"):
        return os.path.basename(os.path.normpath(value))
    return value


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


# The files whose SHA-256 a run records when it trains (`extra.data_digests`): its data
# files, whose contents its splits are drawn from (a file changed since then would give
# other splits, and a file at another path with the recorded contents is the run's file,
# moved); and the model file of the run it starts from (`init`, `digested_file`), since
# two checkpoints in folders of one name are other runs' starts (/a/minilm, /b/minilm).
DIGESTED_FILES = ("data", "valid", "test", "init")


def digested_file(key: str, path: str) -> str:
    """The file whose SHA-256 a run records for its setting `key` (`DIGESTED_FILES`): the
    file it names; for `init`, a run directory (trained, or imported with import-hf), its
    `model.keras`, which holds the weights the run starts from."""
    return os.path.join(path, MODEL_FILE) if key == "init" else path


def file_digest(path: str) -> str:
    """The SHA-256 of the file at `path` (hex)."""
    stat = os.stat(path)
    return _digest(os.path.abspath(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _digest(path: str, size: int, mtime_ns: int) -> str:  # size, mtime: the cache's key
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def setting_file(key: str) -> str:
    """The words for the file a setting names: "data file", "--valid file", ..."""
    return "data file" if key == "data" else f"--{key} file"


def holds_recorded_file(config: RunConfig, key: str, path) -> bool:
    """Whether `path` holds the file that `config`'s run recorded as its `key` wherever it
    trained (`DIGESTED_FILES`: a data file, or the `init` run directory it started from):
    the file's SHA-256 (`digested_file`'s) is the one recorded. False where the run
    recorded none (trained before the digests were recorded, 6215e95; an `init`'s, before
    2026-12-06) or there is no such file."""
    recorded = (config.extra.get("data_digests") or {}).get(key)
    if recorded is None or not isinstance(path, str):
        return False
    path = digested_file(key, path)
    return os.path.isfile(path) and file_digest(path) == recorded


def _at_new_place(config: RunConfig, key: str, before, now) -> bool:
    """Whether `now` names the run's data file `key` at a new place: the file with the
    SHA-256 the run recorded; or, where the run recorded none (before 6215e95), a file
    taken as given (as `run_task.relocate` takes it), the one at `before` gone."""
    if key in (config.extra.get("data_digests") or {}):
        return holds_recorded_file(config, key, now)
    return _moved(key, before, now) and os.path.isfile(now)


def _other_weights(config: RunConfig, init: str) -> bool:
    """Whether the run directory `init` holds other weights than the run `config` started
    from there: its model file is there, and not the SHA-256 the run recorded (a run that
    recorded none cannot be told)."""
    return (
        "init" in (config.extra.get("data_digests") or {})
        and os.path.isfile(digested_file("init", init))
        and not holds_recorded_file(config, "init", init)
    )


def kept_nothing(out: str, config: RunConfig) -> bool:
    """Whether the run in `out` (its `config`) is a start that stopped before its first
    backup (a NaN loss, Ctrl-C): training, with nothing trained to keep."""
    backed_up = os.path.isfile(os.path.join(out, BACKUP_DIR, BACKUP_METADATA_FILE))
    return config.extra.get("status") == "training" and not backed_up


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
    changed = sorted(
        k
        for k in set(identity) | set(previous)
        if identity.get(k) != previous.get(k)
        # The run's data file at its new place (copied to another machine, say): the same run.
        and not (k in DIGESTED_FILES and _at_new_place(config, k, previous.get(k), identity.get(k)))
    )
    init = identity.get("init")
    if init is not None and init == previous.get("init") and _other_weights(config, init):
        changed.append("init")  # the run resumes on the tokenizer it reads there too
    if changed and kept_nothing(out, config):
        # A start that stopped before its first backup (a NaN loss, Ctrl-C) trained
        # nothing to keep: a rerun with other settings starts afresh there.
        return FRESH
    if changed == ["init"] and init == previous.get("init"):
        raise RunError(
            f"--out {out!r} holds a run started from --init {init}, whose weights have "
            f"changed since ({digested_file('init', init)} is not the SHA-256 the run "
            "recorded): put back the checkpoint it started from, or choose another --out"
        )
    if changed:
        details = ", ".join(
            f"{k}={previous.get(k)!r} there, {identity.get(k)!r} now"
            if previous.get(k) != identity.get(k)
            else f"{k}={identity.get(k)!r} holding other weights now"
            for k in changed
        )
        moved = all(_moved(k, previous.get(k), identity.get(k)) for k in changed)
        digested = config.extra.get("data_digests") or {}
        if moved and any(k in digested for k in changed):
            wrong = "; ".join(
                f"{identity[k]} is not there"
                if not os.path.isfile(identity[k])
                else f"{identity[k]} is not the {setting_file(k)} it trained on (not the "
                "SHA-256 the run recorded)"
                for k in changed
                if k in digested
            )
            raise RunError(
                f"--out {out!r} holds a run of files at other paths ({details}): {wrong}. "
                "Give the files it trained on, at their new place; or choose another --out"
            )
        if moved:  # no digest recorded (a run before 6215e95): the files cannot be checked
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
