"""Generation with the Keras models: `generate()` and `KerasEngine`, the compiled,
cached step that plugs the models into the numpy search code (`transformer_zoo.search`).

Kept apart from `transformer_zoo.models`, which speaks `keras.ops` only: the engine
compiles its step with TensorFlow (see `keras_engine`).
"""

from transformer_zoo.generation.decoding import generate, keras_engine
from transformer_zoo.generation.keras_engine import KerasEngine

__all__ = ["KerasEngine", "generate", "keras_engine"]
