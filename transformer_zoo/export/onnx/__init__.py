"""ONNX export: the fused graphs of onnxruntime's contrib operators (`fused`, the default),
tf2onnx conversion of the step graphs (`export`, `--plain`), our graph rewrites
(`rewrites`, `layer_norm`) and onnxruntime-genai's config (`genai_config`)."""
