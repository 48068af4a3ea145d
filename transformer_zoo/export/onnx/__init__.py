"""ONNX export: tf2onnx conversion of the step graphs (`export`), our graph rewrites
(`rewrites`, `layer_norm`) and onnxruntime-genai's config (`genai_config`)."""
