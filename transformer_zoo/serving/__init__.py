"""Serving exported models with numpy, onnxruntime and the tokenizers only.

Nothing here imports tensorflow, keras, or `transformer_zoo.layers`, `models`, `data` or
`train`; a test runs it where importing tensorflow fails. (`load_served_model` with the
`"keras"` or `"saved_model"` engine loads TensorFlow through `transformer_zoo.generation`.)

Example:
    model = load_onnx("exports/dates")
    model.translate(["March 5, 2021"])            # encoder-decoder
    model.generate(["Once"], max_new_tokens=20)   # decoder-only
    model.embed(["a sentence"])                   # encoder-only, (N, D) float32
"""

from transformer_zoo.errors import InputError, ModelDirectoryError
from transformer_zoo.serving.encoding import mean_pool
from transformer_zoo.serving.loading import load_onnx, load_served_model
from transformer_zoo.serving.served_model import ServedModel
from transformer_zoo.serving.text_batches import Completion

__all__ = [
    "Completion",
    "InputError",
    "ModelDirectoryError",
    "ServedModel",
    "load_onnx",
    "load_served_model",
    "mean_pool",
]
