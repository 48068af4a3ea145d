"""`SavedModelRunner`: the graph signatures of an exported SavedModel, behind the runner
interface of `CachedEngine` and `ServedModel`: the SavedModel engine."""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf

from transformer_zoo.errors import ModelDirectoryError, first_line


class SavedModelRunner:
    """Runs the signatures of an exported SavedModel.

    Args:
        path: the `saved_model` directory.
        graphs: graph name → signature name (`export.saved_model.graphs` in config.json).

    Raises:
        ModelDirectoryError: `path` is not a SavedModel that TensorFlow can load (a missing
            or truncated `saved_model.pb` or variables file), or lacks one of `graphs`.
    """

    def __init__(self, path: str, graphs: dict[str, str]):
        try:
            self.loaded = tf.saved_model.load(os.fspath(path))
        except Exception as error:  # TensorFlow raises OSError, IndexError, OpError …
            raise ModelDirectoryError(
                f"{path} is not a SavedModel that TensorFlow can load ({first_line(error)}); "
                "export it again with `transformer-zoo export --format saved_model`."
            ) from None
        missing = sorted(set(graphs.values()) - set(self.loaded.signatures))
        if missing:
            raise ModelDirectoryError(
                f"{path} lacks the signatures {', '.join(missing)} that config.json names; "
                "export it again with `transformer-zoo export --format saved_model`."
            )
        self.signatures = {name: self.loaded.signatures[sig] for name, sig in graphs.items()}
        # Per graph, each input's ONNX name (`past_key_values.0.key`) → its keyword and
        # dtype: TensorFlow keeps the name in the spec and takes the keyword with "_" for
        # ".", which it would otherwise sanitize, with a warning, on every call.
        self.keywords = {
            name: {spec.name: (keyword, spec.dtype) for keyword, spec in inputs.items()}
            for name, function in self.signatures.items()
            for inputs in [function.structured_input_signature[1]]
        }

    def run(self, graph: str, feeds: dict, numpy_outputs: tuple[str, ...] = ()) -> dict:
        keywords = self.keywords[graph]
        arguments = {}
        for name, value in feeds.items():
            keyword, dtype = keywords.get(name, (name, None))
            arguments[keyword] = tf.convert_to_tensor(value, dtype)
        outputs = self.signatures[graph](**arguments)
        return {
            k: v.numpy() if not numpy_outputs or k in numpy_outputs else v
            for k, v in outputs.items()
        }

    def accepts(self, graph: str, name: str) -> bool:
        return name in self.keywords[graph]

    def padding_free(self, graph: str) -> bool:
        return False  # the model computes every position

    def take(self, value, indices: np.ndarray):
        return tf.gather(value, tf.constant(indices, tf.int32))
