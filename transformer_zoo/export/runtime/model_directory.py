"""Loading an exported directory (or a run directory's tokenizers) with clear errors."""

from __future__ import annotations

import os

from transformer_zoo.export.runtime.errors import ModelDirectoryError
from transformer_zoo.export.runtime.onnx_session import (
    DEFAULT_SPINNING,
    DEFAULT_THREADS,
    OnnxRunner,
)
from transformer_zoo.export.runtime.served_model import ServedModel
from transformer_zoo.run import RunConfig, load_run_config
from transformer_zoo.text import Tokenizer
from transformer_zoo.text.wordpiece import WordPieceTokenizer


def load_tokenizers(directory: str, config: RunConfig):
    """`(tokenizer, target_tokenizer)` named by `config`; the target is None when shared,
    and both are None for a model exported without a tokenizer (it serves token ids).

    Raises:
        ModelDirectoryError: a tokenizer file is missing or unreadable.
    """
    if not config.export.get("tokenizer", True):
        return None, None
    missing = [n for n in config.tokenizer_files if not os.path.isfile(os.path.join(directory, n))]
    if missing:
        raise ModelDirectoryError(
            f"{directory!r} lacks the tokenizer file(s) {', '.join(missing)}."
        )
    path = os.path.join(directory, config.tokenizer)
    try:
        if config.tokenizer == "vocab.txt":
            max_length = config.max_length or config.export.get("model", {}).get("max_length")
            return WordPieceTokenizer.from_directory(directory, max_length=max_length), None
        tokenizer = Tokenizer.load(path)
        target = None
        if config.target_tokenizer:
            path = os.path.join(directory, config.target_tokenizer)
            target = Tokenizer.load(path)
    except (OSError, RuntimeError, ValueError) as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise ModelDirectoryError(f"Cannot load the tokenizer {path}: {first_line}") from None
    return tokenizer, target


def load_onnx(
    directory: str | os.PathLike,
    intra_op_num_threads: int = DEFAULT_THREADS,
    allow_spinning: bool = DEFAULT_SPINNING,
) -> ServedModel:
    """Loads an ONNX export directory for serving (numpy, onnxruntime, sentencepiece only).

    Args:
        directory: written by `transformer_zoo.export.export_onnx` or
            `transformer-zoo export --format onnx`.
        intra_op_num_threads: onnxruntime threads per session (2 suits a 2-core machine).
        allow_spinning: idle onnxruntime threads busy-wait (fastest on cores of one's
            own) or, if False, sleep (better on cores other processes share).

    Raises:
        ModelDirectoryError (a `ValueError`): the directory, `config.json`, a model or
            tokenizer file is missing, malformed or corrupted.
    """
    directory = os.fspath(directory)
    config = load_run_config(directory)
    onnx_entry = config.export.get("onnx")
    dims = config.export.get("model")
    if not onnx_entry or not dims:
        raise ModelDirectoryError(
            f"{directory!r} holds no ONNX export (config.json has no export.onnx entry); "
            "run `transformer-zoo export --format onnx` first."
        )
    files = {name: os.path.join(directory, g["file"]) for name, g in onnx_entry["graphs"].items()}
    missing = [os.path.basename(p) for p in files.values() if not os.path.isfile(p)]
    if missing:
        raise ModelDirectoryError(f"{directory!r} lacks {', '.join(missing)}.")
    tokenizer, target = load_tokenizers(directory, config)
    runner = OnnxRunner(files, intra_op_num_threads, allow_spinning)
    return ServedModel(config, dims, runner, tokenizer=tokenizer, target_tokenizer=target)
