"""Serving exported ONNX models with numpy, onnxruntime and sentencepiece only.

Nothing here (or below) imports tensorflow, keras, or `transformer_zoo.models`, `layers`
or `train`; a test runs it where importing tensorflow fails.

Example:
    model = load_onnx("exports/dates")
    model.translate(["March 5, 2021"])            # encoder-decoder
    model.generate(["Once"], max_new_tokens=20)   # decoder-only
    model.embed(["a sentence"])                   # encoder-only, (N, D) float32
"""

from transformer_zoo.export.runtime.cached_engine import CachedEngine
from transformer_zoo.export.runtime.errors import InputError, ModelDirectoryError
from transformer_zoo.export.runtime.model_directory import load_onnx, load_tokenizers
from transformer_zoo.export.runtime.onnx_session import (
    DEFAULT_SPINNING,
    DEFAULT_THREADS,
    OnnxRunner,
    make_session,
)
from transformer_zoo.export.runtime.served_model import ServedModel, mean_pool

__all__ = [
    "DEFAULT_SPINNING",
    "DEFAULT_THREADS",
    "CachedEngine",
    "InputError",
    "ModelDirectoryError",
    "OnnxRunner",
    "ServedModel",
    "load_onnx",
    "load_tokenizers",
    "make_session",
    "mean_pool",
]
