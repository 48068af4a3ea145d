"""Loading a run directory's `model.keras`, with one clear error for every way it fails."""

from __future__ import annotations

import os

from transformer_zoo.errors import ModelDirectoryError, first_line
from transformer_zoo.run_directory import MODEL_FILE, RunError, load_run_config
from transformer_zoo.run_state import check_model_file


def load_run_model(directory: str | os.PathLike, compile: bool = False):
    """The Keras model of `directory/model.keras` (the classes register on import).

    Raises:
        ModelDirectoryError: the file is missing, damaged (truncated, corrupted), or
            Keras cannot load it (written by an incompatible version).
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
        raise ModelDirectoryError(f"Cannot load {path}: {first_line(error)}") from None


def _is_export(directory) -> bool:
    try:
        return bool(load_run_config(directory).export)
    except (RunError, OSError):
        return False
