"""`ModelCheckpoint` that never leaves a half-written file behind."""

from __future__ import annotations

import glob
import os
import re

import keras

PARTIAL_PREFIX = ".partial."


class AtomicModelCheckpoint(keras.callbacks.ModelCheckpoint):
    """Keras' `ModelCheckpoint`, writing each checkpoint to a temporary file in the same
    directory and renaming it over the previous one.

    Keras saves in place, so a process killed while it writes (SIGKILL, a full disk)
    leaves a truncated `.keras` file where the last good checkpoint was. Here Keras
    writes `.partial.<name>` and the file takes its real name only once complete
    (`os.replace` is atomic within a file system): the checkpoint on disk is always
    whole, the old one or the new one. Every argument is `ModelCheckpoint`'s.

    Args:
        filepath: the checkpoint path (`.keras`, or `.weights.h5` with
            `save_weights_only`); `{epoch}`-style placeholders are allowed.
        **kwargs: `monitor`, `save_best_only`, `mode`, `save_freq`,
            `initial_value_threshold`, ... as for `keras.callbacks.ModelCheckpoint`.

    Example:
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> callback = AtomicModelCheckpoint(f"{folder}/last.keras")
    >>> callback.filepath.endswith(".partial.last.keras")
    True
    """

    def __init__(self, filepath, **kwargs):
        filepath = os.fspath(filepath)
        self.final_filepath = filepath
        directory, name = os.path.split(filepath)
        super().__init__(os.path.join(directory, PARTIAL_PREFIX + name), **kwargs)

    def _partials(self) -> list[str]:
        """This callback's partial files: its path with `{...}` placeholders as `*`."""
        directory, name = os.path.split(self.filepath)
        pattern = re.sub(r"\{[^}]*\}", "*", glob.escape(name))
        return glob.glob(os.path.join(glob.escape(directory or "."), pattern))

    def on_train_begin(self, logs=None):
        # A partial file left by a killed process is incomplete by definition.
        for partial in self._partials():
            os.remove(partial)
        super().on_train_begin(logs)

    def _save_model(self, epoch, batch, logs):
        # Keras' one saving hook (as `AtomicBackupAndRestore` uses its own): the partial
        # file it just wrote, if it wrote one, takes its real name. Nothing runs on the
        # steps that save nothing.
        super()._save_model(epoch, batch, logs)
        partial = self._get_file_path(epoch, batch, logs)
        if os.path.exists(partial):
            directory, name = os.path.split(partial)
            os.replace(partial, os.path.join(directory, name[len(PARTIAL_PREFIX) :]))
