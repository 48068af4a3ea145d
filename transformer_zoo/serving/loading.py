"""Loading a directory for serving: `load_onnx` (no TensorFlow) and `load_served_model`."""

from __future__ import annotations

import os

from transformer_zoo.generation.onnx_runner import DEFAULT_SPINNING, DEFAULT_THREADS
from transformer_zoo.generation.runners import open_runner
from transformer_zoo.run_directory import load_run_config
from transformer_zoo.serving.served_model import ServedModel
from transformer_zoo.text.files import load_tokenizers


def load_served_model(
    directory: str | os.PathLike,
    engine: str = "onnx",
    intra_op_num_threads: int = DEFAULT_THREADS,
    allow_spinning: bool = DEFAULT_SPINNING,
    in_graph_greedy: bool = True,
) -> ServedModel:
    """Loads `directory` for serving with `engine` (`generation.ENGINES`):
    `"onnx"` (an exported directory, numpy + onnxruntime only), `"saved_model"` (its
    SavedModel) or `"keras"` (a run directory's `model.keras`); the last two need
    TensorFlow.

    Args:
        directory: an exported directory (`transformer-zoo export`) or, for the Keras
            engine, a run directory.
        engine: `"onnx"`, `"saved_model"` or `"keras"`.
        intra_op_num_threads: onnxruntime threads per session (2 suits a 2-core machine).
        allow_spinning: idle onnxruntime threads busy-wait (fastest on cores of one's
            own) or, if False, sleep (better on cores other processes share).
        in_graph_greedy: ONNX engine: greedy search in one onnxruntime call (an ONNX
            `Loop` over the step graph, made on first use with a second copy of the
            decoder's weights); False steps from Python, a call per token.

    Raises:
        ModelDirectoryError / RunError (ValueErrors): the directory, `config.json`, a
            model or tokenizer file is missing, malformed or corrupted.
    """
    directory = os.fspath(directory)
    config = load_run_config(directory)
    runner, dims = open_runner(
        directory, config, engine, intra_op_num_threads, allow_spinning, in_graph_greedy
    )
    tokenizer, target = load_tokenizers(directory, config)
    return ServedModel(config, dims, runner, tokenizer, target)


def load_onnx(
    directory: str | os.PathLike,
    intra_op_num_threads: int = DEFAULT_THREADS,
    allow_spinning: bool = DEFAULT_SPINNING,
    in_graph_greedy: bool = True,
) -> ServedModel:
    """`load_served_model(directory, "onnx", ...)`: an ONNX export directory, served with
    numpy, onnxruntime and the tokenizers only."""
    return load_served_model(
        directory, "onnx", intra_op_num_threads, allow_spinning, in_graph_greedy
    )
