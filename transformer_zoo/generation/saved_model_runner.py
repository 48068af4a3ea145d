"""`SavedModelRunner`: the graph signatures of an exported SavedModel, behind the runner
interface of `CachedEngine` and `ServedModel`: the SavedModel engine."""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf


class SavedModelRunner:
    """Runs the signatures of an exported SavedModel.

    Args:
        path: the `saved_model` directory.
        graphs: graph name → signature name (`export.saved_model.graphs` in config.json).
    """

    def __init__(self, path: str, graphs: dict[str, str]):
        self.loaded = tf.saved_model.load(os.fspath(path))
        self.signatures = {name: self.loaded.signatures[sig] for name, sig in graphs.items()}

    def run(self, graph: str, feeds: dict, numpy_outputs: tuple[str, ...] = ()) -> dict:
        function = self.signatures[graph]
        dtypes = {k: v.dtype for k, v in function.structured_input_signature[1].items()}
        outputs = function(**{k: tf.convert_to_tensor(v, dtypes.get(k)) for k, v in feeds.items()})
        return {
            k: v.numpy() if not numpy_outputs or k in numpy_outputs else v
            for k, v in outputs.items()
        }

    def accepts(self, graph: str, name: str) -> bool:
        return name in self.signatures[graph].structured_input_signature[1]

    def padding_free(self, graph: str) -> bool:
        return False  # the model computes every position

    def take(self, value, indices: np.ndarray):
        return tf.gather(value, tf.constant(indices, tf.int32))
