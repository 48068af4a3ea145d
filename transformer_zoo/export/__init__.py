"""Exporters to SavedModel and ONNX (and Hugging Face's layout, `hf`).

Nothing here imports TensorFlow at package import time; the exporters below load it on
first use. Serving the files is `transformer_zoo.serving`'s (no TensorFlow).
"""

from __future__ import annotations

FORMATS = ("onnx", "saved_model")  # what `export_run` writes by default ("all")
HF_FORMAT = "hf"  # Hugging Face layout: a directory of its own, not with the others
WEIGHT_TYPES = ("int8", "int4")  # what `quantize_onnx` writes (`--quantize`)

_LAZY = {
    "export_onnx": "transformer_zoo.export.onnx.export",
    "export_saved_model": "transformer_zoo.export.saved_model.export",
    "export_run": "transformer_zoo.export.run_export",
    "export_hf": "transformer_zoo.export.hf",
    "ExportError": "transformer_zoo.export.validation",
    "quantize_onnx": "transformer_zoo.export.quantize",
    "QuantizationError": "transformer_zoo.export.quantize",
}

__all__ = ["FORMATS", "HF_FORMAT", "WEIGHT_TYPES", *sorted(_LAZY)]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'transformer_zoo.export' has no attribute {name!r}")
