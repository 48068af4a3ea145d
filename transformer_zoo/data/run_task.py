"""The task a run trained on, as its `config.json` names it (`run_task`: what `evaluate`
and `export --quantize` score; `trained_on_pairs`: whether a classifier read text pairs),
and the fingerprints of the run's data files (`data_digests`, recorded when it trains;
`check_data_files`)."""

from __future__ import annotations

import functools
import hashlib
import os

from transformer_zoo.data.task import Task
from transformer_zoo.data.tasks import limit_task, load_task, read_split
from transformer_zoo.data.user_files import classification_file_holds_pairs
from transformer_zoo.errors import RunError

# A run's data files are fingerprinted when it trains (`extra.data_digests`): its splits
# are drawn from their contents, so a file changed since then would give other splits.


def data_digests(data: str | None, valid: str | None = None, test: str | None = None) -> dict:
    """`{setting: SHA-256 of the file}` for the run's data files (none for built-in data)."""
    files = {"data": data, "valid": valid, "test": test}
    return {
        name: _file_digest(path)
        for name, path in files.items()
        if path and not str(path).startswith("builtin:") and os.path.isfile(path)
    }


def _file_digest(path: str) -> str:
    stat = os.stat(path)
    return _digest(os.path.abspath(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _digest(path: str, size: int, mtime_ns: int) -> str:  # size, mtime: the cache's key
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def check_data_files(config) -> None:
    """Raises `RunError` when a data file of the run is gone from the path its config.json
    records, or differs from the one it trained on (runs trained before the digests were
    recorded are not checked for that)."""
    recorded = config.extra.get("data_digests") or {}
    settings = config.extra.get("train") or {}
    paths = {"data": config.data, "valid": settings.get("valid"), "test": settings.get("test")}
    for name, path in paths.items():
        if not path or str(path).startswith("builtin:"):
            continue
        flag = "the data file" if name == "data" else f"the --{name} file"
        if not os.path.isfile(path):
            raise RunError(
                f"{path} ({flag} this run trained on, as its config.json records it) is not "
                "there: put it back at that path (to score another file: evaluate --test "
                "FILE; to quantize an export unscored: --max-accuracy-drop none)"
            )
        if name in recorded and _file_digest(path) != recorded[name]:
            raise RunError(
                f"{path} ({flag}) has changed since this run trained on it, so the splits "
                "drawn from it would hold other examples, some of them trained on: restore "
                "the file (to score another file: evaluate --test FILE; to train on this "
                "one: a new --out)"
            )


def run_task(config, test: str | None = None) -> Task:
    """The task a run was trained on, as its `RunConfig` names it: data, its splits,
    columns and windows, seed and the `train` example limit; with `test`, a task of that
    file alone as its test split (read as the training data was, with the run's labels),
    so the training data need not be at hand. A decoder-only run that names no data (an
    imported GPT-2) reads a `test` file as plain text, in windows of its context.

    Raises:
        RunError: the config names no data (an imported checkpoint) and no `test` file
            can stand in for it.
        DataError: the data is unreadable.
    """
    imported_language_model = not config.data and config.family == "decoder-only"
    scorable = config.family != "encoder-only" or bool(config.label_names)
    if not config.data and not (test is not None and scorable):
        raise RunError(
            "This model names no task (config.json has no `data`): it was not trained "
            "here, so there is no test split to score it on"
            + ("; give one with --test FILE." if scorable else ".")
        )
    settings = config.extra.get("train") or {}
    stream = settings.get("windows") in ("random", "epoch") or imported_language_model
    if test is not None:
        if (config.data or "").startswith("builtin:") and config.family == "decoder-only":
            raise ValueError(
                f"A decoder-only run on {config.data} learnt its prompt => completion pairs, "
                "which a file of yours (plain text) does not hold: evaluate scores the "
                "built-in test split without --test."
            )
        labels = tuple(config.label_names or ())
        examples = read_split(test, config.family, settings.get("columns"), labels or None, stream)
        return Task(config.data or test, config.family, [], [], examples, labels)
    check_data_files(config)
    task = load_task(
        config.data,
        config.family,
        seed=config.seed or 0,
        valid=settings.get("valid"),
        test=settings.get("test"),
        columns=settings.get("columns"),
        stream=stream,
    )
    return limit_task(task, settings.get("max_examples"))


def trained_on_pairs(config) -> bool | None:
    """Whether a classifier trained here read text pairs: as its config records it
    (`extra.text_pairs`) or, trained before that was recorded (69b2c7e, 2026-12-04), as its
    `--columns` (three: a pair) or else its training data says; None where nothing says:
    a model not trained here (an imported checkpoint), or an older run whose data is gone."""
    if "text_pairs" in config.extra:
        return config.extra["text_pairs"]
    settings = config.extra.get("train")
    if settings is None:
        return None
    if settings.get("columns"):
        return len(settings["columns"]) == 3
    try:
        if str(config.data).startswith("builtin:"):
            return run_task(config).pairs
        return classification_file_holds_pairs(config.data)
    except (ValueError, OSError):  # DataError, RunError
        return None
