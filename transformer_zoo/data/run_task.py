"""The task a run trained on, as its `config.json` names it (`run_task`: what `evaluate`
and `export --quantize` score; `trained_on_pairs`: whether a classifier read text pairs),
the fingerprints of the run's data files and `--init` weights (`data_digests`, recorded
when it trains; `check_data_files`), and where those files are now when they moved
(`relocate`)."""

from __future__ import annotations

import dataclasses
import os

from transformer_zoo.data.task import Task
from transformer_zoo.data.tasks import limit_task, load_task, read_split
from transformer_zoo.data.user_files import classification_file_holds_pairs
from transformer_zoo.errors import RunError
from transformer_zoo.run_state import digested_file, file_digest, holds_recorded_file, setting_file

# A run's data files are fingerprinted when it trains (`extra.data_digests`): its splits
# are drawn from their contents, so a file changed since then would give other splits.


def data_digests(
    data: str | None, valid: str | None = None, test: str | None = None, init: str | None = None
) -> dict:
    """`{setting: SHA-256 of the file}` for the run's data files (none for built-in data)
    and the weights of the run directory it starts from (`init`: `run_state.digested_file`)."""
    files = {"data": data, "valid": valid, "test": test, "init": init}
    return {
        name: file_digest(digested_file(name, path))
        for name, path in files.items()
        if path
        and not str(path).startswith("builtin:")
        and os.path.isfile(digested_file(name, path))
    }


def relocate(config, data: str | None = None, valid: str | None = None, test: str | None = None):
    """`config` (a `RunConfig`) with its data files read where they are now (`data`, and
    the run's `--valid` and `--test` files): a run directory copied to another machine, or
    whose data moved, keeps the paths it recorded where it trained. A file whose SHA-256
    the run recorded must hold those contents (its splits are drawn from them); one the
    run recorded no digest of (before 6215e95) is taken as given. A path the run records
    already (absolute, the same file) is left as it is; an export records base names, so
    a file named by its name only is the one at that name here.

    Raises:
        RunError: the run names no such file (built-in data, no `--valid` file, a model
            not trained here), there is no file at the path, or it holds other contents.
    """
    settings = config.extra.get("train") or {}
    recorded = _recorded_files(config)
    moved = {}
    for name, path in {"data": data, "valid": valid, "test": test}.items():
        if path is None:
            continue
        path = os.fspath(path)
        if not path.startswith("builtin:"):  # an export's bare name is read from here
            path = os.path.abspath(path)
        if path == recorded[name]:  # absolute, or `builtin:NAME`: what the run records
            continue
        if not recorded[name] or recorded[name].startswith("builtin:"):
            trained = (
                f"trained on {recorded['data']}" if recorded["data"] else "was not trained here"
            )
            raise RunError(
                f"--{name} {path} gives the new place of a file the run trained on, and this "
                f"run {trained if name == 'data' else f'named no --{name} file'}"
            )
        if not os.path.isfile(path):
            raise RunError(f"--{name} {path}: no such file")
        if name in (config.extra.get("data_digests") or {}) and not holds_recorded_file(
            config, name, path
        ):
            raise RunError(
                f"--{name} {path} is not the {setting_file(name)} this run trained on "
                f"({recorded[name]}, as its config.json records it): its SHA-256 is not the "
                "one recorded"
            )
        moved[name] = path
    if not moved:
        return config
    extra = {**config.extra, "train": {**settings, **moved}}
    return dataclasses.replace(config, data=moved.get("data", config.data), extra=extra)


def _recorded_files(config) -> dict:
    """`{setting: path}` of the data files `config`'s run records: its data, `--valid` and
    `--test` files (None where it has none)."""
    settings = config.extra.get("train") or {}
    return {"data": config.data, "valid": settings.get("valid"), "test": settings.get("test")}


def split_source(config, split: str) -> str:
    """The setting (`"data"`, `"valid"` or `"test"`) whose recorded file `config`'s run
    reads its `split` ("valid" or "test") from: the split's own file, or else the data
    file it is cut from, except a token stream's test split without a `--test` file,
    which is its validation text: the `--valid` file where there is one."""
    settings = config.extra.get("train") or {}
    if settings.get(split):
        return split
    if split == "test" and _reads_stream(config) and settings.get("valid"):
        return "valid"
    return "data"


def _reads_stream(config) -> bool:
    """Whether the run reads its files as one token stream (a decoder-only run on plain
    text, or an imported language model)."""
    settings = config.extra.get("train") or {}
    imported_language_model = not config.data and config.family == "decoder-only"
    return settings.get("windows") in ("random", "epoch") or imported_language_model


def check_data_files(config, split: str | None = None) -> None:
    """Raises `RunError` when a data file of the run is gone from the path its config.json
    records (or an export names it by its name only: `run_state.without_places`), or
    differs from the one it trained on (runs trained before the digests were recorded are
    not checked for that). `relocate` gives the files' new places. Every file the run
    names is checked (a resumed `train` reads them all); with `split` ("valid" or
    "test"), only the one that split is read from (`split_source`)."""
    recorded = config.extra.get("data_digests") or {}
    paths = _recorded_files(config)
    needed = set(paths) if split is None else {split_source(config, split)}
    for name, path in paths.items():
        if not path or str(path).startswith("builtin:") or name not in needed:
            continue
        flag = f"the {setting_file(name)}"
        if config.export and not os.path.isabs(path):  # `run_state.without_places`
            raise RunError(
                f"This export names {flag} its run trained on by its name only, {path} (an "
                "export carries no paths of the machine that trained): "
                + (
                    "score it with --test FILE"
                    if name == "test"
                    else f"give its place with --{name} FILE"
                )
            )
        if not os.path.isfile(path):
            raise RunError(
                f"{path} ({flag} this run trained on, as its config.json records it) is not "
                f"there: {_new_place(name)}"
            )
        if name in recorded and not holds_recorded_file(config, name, path):
            raise RunError(
                f"{path} ({flag}) has changed since this run trained on it, so the splits "
                "drawn from it would hold other examples, some of them trained on: restore "
                "the file (to score another file: evaluate --test FILE; to train on this "
                "one: a new --out)"
            )


def _new_place(name: str) -> str:
    """How to read a data file that moved: `--data` and `--valid` give its new place on
    each command; `--test FILE` does on a resuming `train`, but on `evaluate` and `export
    --quantize` it scores a file instead of the run's test split."""
    if name == "test":
        return (
            "put it back at that path; or, on train, give its new place with --test FILE "
            "(on evaluate and export --quantize, --test FILE scores that file, yours or the "
            "moved one, instead of the run's test split)"
        )
    return (
        f"give its new place with --{name} FILE, or put it back at that path (--test FILE "
        "scores a file of yours instead)"
    )


def scores_files(config) -> bool:
    """Whether a file of the user's (`run_task`'s `test`) can score the model: not an
    encoder without labels (an imported embedding model)."""
    return config.family != "encoder-only" or bool(config.label_names)


def run_task(config, test: str | None = None, split: str = "test") -> Task:
    """The task a run was trained on, as its `RunConfig` names it: data, its splits,
    columns and windows, seed and the `train` example limit; with `test`, a task of that
    file alone as its test split (read as the training data was, with the run's labels),
    so the training data need not be at hand. A decoder-only run that names no data (an
    imported GPT-2) reads a `test` file as plain text, in windows of its context. Of the
    held-out splits only `split` ("test" or "valid") is filled, and only the file it is
    read from is read and needed (`split_source`): its own `--valid` or `--test` file
    alone (no training split then), or else the data file it is cut from, as training
    cut it.

    Raises:
        RunError: the config names no data (an imported checkpoint) and no `test` file
            can stand in for it.
        DataError: the data is unreadable.
    """
    scorable = scores_files(config)
    if not config.data and not (test is not None and scorable):
        raise RunError(
            "This model names no task (config.json has no `data`): it was not trained "
            "here, so there is no test split to score it on"
            + ("; give one with --test FILE." if scorable else ".")
        )
    settings = config.extra.get("train") or {}
    stream = _reads_stream(config)
    columns, labels = settings.get("columns"), tuple(config.label_names or ())
    if test is not None:
        if (config.data or "").startswith("builtin:") and config.family == "decoder-only":
            raise ValueError(
                f"A decoder-only run on {config.data} learnt its prompt => completion pairs, "
                "which a file of yours (plain text) does not hold: without --test, evaluate "
                "and export --quantize score the built-in test split."
            )
        examples = read_split(test, config.family, columns, labels or None, stream)
        return Task(config.data or test, config.family, [], [], examples, labels)
    if split not in ("test", "valid"):
        raise ValueError(f"`split` must be 'test' or 'valid'. Received: split={split!r}")
    check_data_files(config, split)
    source = split_source(config, split)
    if source != "data":  # a file of its own: read alone, as `load_task` reads it
        examples = read_split(settings[source], config.family, columns, labels or None, stream)
        task = Task(config.data, config.family, [], [], [], labels)
        task = dataclasses.replace(task, **{split: examples})
        return limit_task(task, settings.get("max_examples"))
    # Cut from the data file. The other split's file is not read: the cut depends only on
    # there being one, which the data file stands in for (a token stream's validation text
    # does not depend on its --test file at all).
    other = "test" if split == "valid" else "valid"
    stand_in = config.data if settings.get(other) and not stream else None
    task = load_task(
        config.data,
        config.family,
        seed=config.seed or 0,
        columns=columns,
        stream=stream,
        **{other: stand_in},
    )
    task = dataclasses.replace(task, **{other: []})
    return limit_task(task, settings.get("max_examples"))


def trained_on_pairs(config) -> bool | None:
    """Whether a classifier trained here read text pairs: as its config records it
    (`extra.text_pairs`) or, trained before that was recorded (69b2c7e, 2026-12-04), as its
    `--columns` (three: a pair) or else its training data says; None where nothing says:
    a model not trained here (an imported checkpoint), or an older run whose data is gone
    or, in an export, named by its name only (`run_state.without_places`)."""
    if "text_pairs" in config.extra:
        return config.extra["text_pairs"]
    settings = config.extra.get("train")
    if settings is None:
        return None
    if settings.get("columns"):
        return len(settings["columns"]) == 3
    builtin = str(config.data).startswith("builtin:")
    if config.export and not builtin and not os.path.isabs(str(config.data)):
        return None  # not a file of the working directory that bears the same name
    try:
        if builtin:
            return run_task(config).pairs
        return classification_file_holds_pairs(config.data)
    except (ValueError, OSError):  # DataError, RunError
        return None
