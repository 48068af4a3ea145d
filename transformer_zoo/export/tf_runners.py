"""Runners of the exported graphs on TensorFlow: the Keras model itself, or a reloaded
SavedModel. With them `ServedModel` serves a run directory (`--engine keras`) or the
SavedModel of an export (`--engine saved_model`) exactly as it serves ONNX files."""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf

from transformer_zoo.export.graphs import export_graphs


def _run(function, feeds, numpy_outputs, dtypes=None) -> dict:
    args = {k: tf.convert_to_tensor(v, dtype=(dtypes or {}).get(k)) for k, v in feeds.items()}
    outputs = function(**args)
    return {
        k: v.numpy() if not numpy_outputs or k in numpy_outputs else v for k, v in outputs.items()
    }


class KerasRunner:
    """Runs `graphs.export_graphs(model)` (the exported functions, not yet exported)."""

    def __init__(self, model):
        self.graphs = {graph.name: graph for graph in export_graphs(model)}

    def run(self, graph: str, feeds: dict, numpy_outputs: tuple[str, ...] = ()) -> dict:
        graph = self.graphs[graph]
        args = [tf.convert_to_tensor(feeds[spec.name], dtype=spec.dtype) for spec in graph.inputs]
        outputs = graph.function(*args)
        return {
            k: v.numpy() if not numpy_outputs or k in numpy_outputs else v
            for k, v in outputs.items()
        }

    def take(self, value, indices: np.ndarray):
        return tf.gather(value, tf.constant(indices, tf.int32))


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
        return _run(function, feeds, numpy_outputs, dtypes)

    def take(self, value, indices: np.ndarray):
        return tf.gather(value, tf.constant(indices, tf.int32))
