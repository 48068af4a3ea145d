"""Exporters to SavedModel and ONNX. `runtime/` serves ONNX files without TensorFlow.

Nothing here imports TensorFlow at package import time, so that
`transformer_zoo.export.runtime` stays importable on a machine without it; the exporters
below load on first use.
"""

from __future__ import annotations

_LAZY = {
    "export_onnx": "transformer_zoo.export.onnx_export",
    "export_saved_model": "transformer_zoo.export.saved_model_export",
    "export_run": "transformer_zoo.export.run_export",
    "ExportError": "transformer_zoo.export.validation",
    "load_served_model": "transformer_zoo.export.serving",
    "quantize_onnx": "transformer_zoo.export.quantize",
    "QuantizationError": "transformer_zoo.export.quantize",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'transformer_zoo.export' has no attribute {name!r}")
