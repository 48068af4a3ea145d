"""The runtime's errors: ValueError subclasses with one-line messages, raised before any
input reaches onnxruntime (whose own errors are long C++ traces)."""

from __future__ import annotations

from transformer_zoo.run import RunError


class ModelDirectoryError(RunError):
    """An exported directory is missing a file, or holds an unreadable or corrupted one."""


class InputError(ValueError):
    """An input has the wrong type, dtype, rank or values, or does not fit the model."""
