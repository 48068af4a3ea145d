"""Exporters to SavedModel and ONNX. `runtime/` serves ONNX files without TensorFlow.

Nothing here imports TensorFlow at package import time, so that
`transformer_zoo.export.runtime` stays importable on a machine without it.
"""
