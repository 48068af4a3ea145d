"""Loading a run directory's `model.keras`, with one clear error for every way it fails,
and the words for the saved weights of older versions that this one cannot load
(`weights_predate_this_version`), which a backup's load (`restore_backup`) uses too."""

from __future__ import annotations

import os

from transformer_zoo.errors import ModelDirectoryError, first_line
from transformer_zoo.run_directory import MODEL_FILE, RunError, load_run_config
from transformer_zoo.run_state import check_model_file


def load_run_model(directory: str | os.PathLike, compile: bool = False):
    """The Keras model of `directory/model.keras` (the classes register on import).

    Raises:
        ModelDirectoryError: the file is missing, damaged (truncated, corrupted), or
            Keras cannot load it (written by an incompatible version; one that this
            version knows says so, with what to do).
    """
    import keras

    import transformer_zoo.models  # noqa: F401  (registers the classes the file names)

    path = os.path.join(os.fspath(directory), MODEL_FILE)
    if not os.path.isfile(path):
        hint = ""
        if _is_export(directory):  # given for the run it came from
            hint = ": it is an export (ONNX, SavedModel), and this needs its run directory"
        raise ModelDirectoryError(f"{os.fspath(directory)!r} lacks {MODEL_FILE}{hint}.")
    check_model_file(path)
    try:
        return keras.saving.load_model(path, compile=compile)
    except Exception as error:  # Keras raises many types for a damaged file
        why = weights_predate_this_version(error)
        if why is not None:
            raise ModelDirectoryError(
                f"Cannot load {path}: {why}; train the run again under another --out, or "
                "export it with the version that made it (`transformer-zoo export RUN "
                "--format onnx`), which this version serves."
            ) from None
        raise ModelDirectoryError(f"Cannot load {path}: {first_line(error)}") from None


# Keras' words when a saved model has no weights for an untied `LMHead`'s `projection`
# sublayer: before 121f1b1 (2026-12-05), the untied head held its (D, V) kernel itself.
_UNTIED_HEAD_WITHOUT_PROJECTION = "Layer 'projection' expected 1 variables, but received 0"


def weights_predate_this_version(error: BaseException) -> str | None:
    """Why Keras' `error`, loading saved weights (a `.keras` file, a backup's
    `.weights.h5`), comes from an older version's layout this version cannot read, as a
    clause ("its weights were saved ..."); None for any other error."""
    if _UNTIED_HEAD_WITHOUT_PROJECTION in str(error):
        return (
            "its weights were saved before 2026-12-05 (commit 121f1b1), when an untied "
            'output layer (tie_weights="none") held its kernel itself, and this version '
            "keeps it in a `projection` sublayer"
        )
    return None


def _is_export(directory) -> bool:
    try:
        return bool(load_run_config(directory).export)
    except (RunError, OSError):
        return False
