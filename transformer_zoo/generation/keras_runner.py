"""`KerasRunner`: a Keras model's step graphs (`generation.graphs`) as `tf.function`s, behind
the runner interface of `CachedEngine` and `ServedModel`: the Keras engine.

The graphs are traced once per model with dynamic batch and length dimensions, so the
growing cache does not retrace them; XLA (`jit_compile=True`) would recompile for every
new cache length, which measured slower (benchmarks/generation.py).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from transformer_zoo.generation.graphs import step_graphs
from transformer_zoo.models.family import dimensions_of


class KerasRunner:
    """Runs `graphs.step_graphs(model)`: the same functions the exporters write.

    Args:
        model: a model of any family.
        normalize_embeddings: L2-normalise an encoder-only graph's `sentence_embedding`
            (`RunConfig.normalizes_embeddings`).

    Attributes:
        model: the Keras model.
        dims: its `ModelDimensions`.
    """

    def __init__(self, model, normalize_embeddings: bool = True):
        self.model = model
        self.dims = dimensions_of(model)
        graphs = step_graphs(model, normalize_embeddings)
        self.graphs = {graph.name: graph for graph in graphs}

    def run(self, graph: str, feeds: dict, numpy_outputs: tuple[str, ...] = ()) -> dict:
        graph = self.graphs[graph]
        args = [tf.convert_to_tensor(feeds[spec.name], dtype=spec.dtype) for spec in graph.inputs]
        outputs = graph.function(*args)
        return {
            k: v.numpy() if not numpy_outputs or k in numpy_outputs else v
            for k, v in outputs.items()
        }

    def accepts(self, graph: str, name: str) -> bool:
        return any(spec.name == name for spec in self.graphs[graph].inputs)

    def padding_free(self, graph: str) -> bool:
        return False  # the model computes every position

    def take(self, value, indices: np.ndarray):
        """Rows `indices` of a cache tensor (beam search reorders them)."""
        return tf.gather(value, tf.constant(indices, tf.int32))
