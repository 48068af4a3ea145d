"""`load_served_model(directory, engine)`: one text interface over the three engines.

- `"onnx"`: an exported directory, through `transformer_zoo.export.runtime` (no TensorFlow).
- `"saved_model"`: an exported directory's `saved_model/`, through its signatures.
- `"keras"`: a run directory's `model.keras` (or an exported directory that kept one),
  generating through `KerasEngine`.
"""

from __future__ import annotations

import os

from transformer_zoo.export.runtime import ModelDirectoryError, ServedModel, load_onnx
from transformer_zoo.export.runtime.model_directory import load_tokenizers
from transformer_zoo.export.runtime.onnx_session import DEFAULT_SPINNING, DEFAULT_THREADS
from transformer_zoo.run import MODEL_FILE, load_run_config

ENGINES = ("onnx", "keras", "saved_model")


def load_served_model(
    directory: str | os.PathLike,
    engine: str = "onnx",
    intra_op_num_threads: int = DEFAULT_THREADS,
    allow_spinning: bool = DEFAULT_SPINNING,
) -> ServedModel:
    """Loads `directory` for serving with `engine` (`"onnx"`, `"keras"`, `"saved_model"`).
    The thread settings apply to the ONNX engine.

    Raises:
        ModelDirectoryError / RunError (ValueErrors): a missing or malformed directory.
    """
    if engine not in ENGINES:
        raise ValueError(f"`engine` must be one of {ENGINES}. Received: engine={engine!r}")
    directory = os.fspath(directory)
    if engine == "onnx":
        return load_onnx(directory, intra_op_num_threads, allow_spinning)
    config = load_run_config(directory)
    tokenizer, target = load_tokenizers(directory, config)
    if engine == "saved_model":
        from transformer_zoo.export.tf_runners import SavedModelRunner

        entry = config.export.get("saved_model")
        path = os.path.join(directory, (entry or {}).get("directory", "saved_model"))
        if not entry or not os.path.isdir(path):
            raise ModelDirectoryError(
                f"{directory!r} holds no SavedModel; run `transformer-zoo export --format "
                "saved_model` first."
            )
        runner = SavedModelRunner(path, entry["graphs"])
        return ServedModel(config, config.export["model"], runner, None, tokenizer, target)
    path = os.path.join(directory, MODEL_FILE)
    if not os.path.isfile(path):
        raise ModelDirectoryError(f"{directory!r} lacks {MODEL_FILE} (the Keras engine needs it).")
    import keras

    from transformer_zoo.export.graphs import model_dimensions
    from transformer_zoo.export.tf_runners import KerasRunner
    from transformer_zoo.generation import keras_engine

    try:
        model = keras.saving.load_model(path)
    except Exception as error:
        message = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ModelDirectoryError(f"Cannot load {path}: {message}") from None
    engine_ = None if config.family == "encoder-only" else keras_engine(model)
    runner = KerasRunner(model)
    return ServedModel(config, model_dimensions(model), runner, engine_, tokenizer, target)
