"""Opening a directory's graphs with one of the three engines: the table of engines.

- `"onnx"`: an exported directory's `.onnx` files on onnxruntime (no TensorFlow);
- `"saved_model"`: an exported directory's `saved_model/` signatures (TensorFlow);
- `"keras"`: a run directory's `model.keras` (or an export that kept one), through its
  step graphs (TensorFlow).

TensorFlow is imported only for the last two, when asked for.
"""

from __future__ import annotations

import os

from transformer_zoo.errors import ModelDirectoryError
from transformer_zoo.generation import ENGINES
from transformer_zoo.generation.onnx_runner import DEFAULT_SPINNING, DEFAULT_THREADS, OnnxRunner
from transformer_zoo.run_directory import MODEL_FILE, ModelDimensions, RunConfig
from transformer_zoo.run_state import copy_source


def open_runner(
    directory: str,
    config: RunConfig,
    engine: str = "onnx",
    intra_op_num_threads: int = DEFAULT_THREADS,
    allow_spinning: bool = DEFAULT_SPINNING,
    in_graph_greedy: bool = True,
):
    """`(runner, ModelDimensions)` of `directory` for `engine`; the thread settings and
    `in_graph_greedy` (see `OnnxRunner`) apply to the ONNX engine.

    Raises:
        ValueError: an unknown engine.
        ModelDirectoryError: the directory lacks, or holds a corrupted copy of, what the
            engine needs.
    """
    if engine not in ENGINES:
        raise ValueError(f"`engine` must be one of {ENGINES}. Received: engine={engine!r}")
    has_model_file = os.path.isfile(os.path.join(directory, MODEL_FILE))
    if engine == "keras":
        exported = [name for name in ENGINES if name != "keras" and config.export.get(name)]
        if not has_model_file and exported:  # an export given for its run directory
            raise ModelDirectoryError(
                f"{directory!r} lacks {MODEL_FILE}: it is an export, which the "
                f"{' or '.join(exported)} engine serves; the keras engine reads a run directory."
            )
        return _keras_runner(directory, config)
    entry = config.export.get(engine)
    quantized = (config.export.get("onnx") or {}).get("quantization")
    if engine != "onnx" and quantized:  # exporting into it would replace the copy
        raise ModelDirectoryError(
            f"{directory!r} is the {quantized} ONNX copy of an export, which the onnx "
            f"engine serves; the {engine} engine serves {copy_source(directory, config)}."
        )
    if not entry or not config.export.get("model"):
        keras_hint = f", or serve its {MODEL_FILE} with the keras engine" if has_model_file else ""
        raise ModelDirectoryError(
            f"{directory!r} holds no {engine} export (config.json has no export.{engine} "
            f"entry); run `transformer-zoo export --format {engine}` first{keras_hint}."
        )
    dims = ModelDimensions.from_dict(config.export["model"])
    if engine == "onnx":
        files = {name: os.path.join(directory, g["file"]) for name, g in entry["graphs"].items()}
        missing = [os.path.basename(p) for p in files.values() if not os.path.isfile(p)]
        if missing:
            raise ModelDirectoryError(f"{directory!r} lacks {', '.join(missing)}.")
        return OnnxRunner(files, intra_op_num_threads, allow_spinning, in_graph_greedy), dims
    path = os.path.join(directory, entry.get("directory", "saved_model"))
    if not os.path.isdir(path):
        raise ModelDirectoryError(f"{directory!r} lacks its SavedModel directory {path}.")
    from transformer_zoo.generation.saved_model_runner import SavedModelRunner

    return SavedModelRunner(path, entry["graphs"]), dims


def _keras_runner(directory: str, config: RunConfig):
    from transformer_zoo.generation.keras_runner import KerasRunner
    from transformer_zoo.models.saving import load_run_model

    runner = KerasRunner(load_run_model(directory), config.normalizes_embeddings)
    return runner, runner.dims
