"""A Hugging Face checkpoint's files, read: `config.json`, `model.safetensors` or its
shards, and the dtypes the tensors come in (numpy only)."""

from __future__ import annotations

import json
import os

import numpy as np

from transformer_zoo.errors import first_line

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX_FILE = "model.safetensors.index.json"  # a sharded checkpoint


def list_tensors(path: str | os.PathLike) -> dict[str, tuple[tuple[int, ...], str]]:
    """Name → (shape, dtype) of every tensor in a `.safetensors` file, without loading it."""
    from safetensors import safe_open

    with safe_open(os.fspath(path), framework="np") as file:
        out = {}
        for name in file.keys():  # noqa: SIM118 (safe_open is not a mapping)
            info = file.get_slice(name)
            out[name] = (tuple(info.get_shape()), info.get_dtype())
    return out


def read_config(checkpoint_dir: str | os.PathLike) -> dict:
    """The `config.json` of a Hugging Face checkpoint directory."""
    path = os.path.join(checkpoint_dir, CONFIG_FILE)
    if not os.path.isfile(path):
        raise ValueError(
            f"`checkpoint_dir` must hold {CONFIG_FILE} and {WEIGHTS_FILE} (Hugging Face "
            f"layout); {path} is missing. "
            f"Received: checkpoint_dir={os.fspath(checkpoint_dir)}"
        )
    try:
        with open(path, encoding="utf-8") as file:
            return json.load(file)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"Cannot read {path}: {error}") from None


def read_tensors(checkpoint_dir: str | os.PathLike) -> dict[str, np.ndarray]:
    """Every tensor of the directory's `model.safetensors`, or of the shards its
    `model.safetensors.index.json` names (`weight_map`: tensor → shard file), as numpy
    arrays; bfloat16 ones as `ml_dtypes.bfloat16` (cast to float32 by `map_weights`)."""
    checkpoint_dir = os.fspath(checkpoint_dir)
    path = os.path.join(checkpoint_dir, WEIGHTS_FILE)
    index_path = os.path.join(checkpoint_dir, WEIGHTS_INDEX_FILE)
    if not os.path.isfile(path) and os.path.isfile(index_path):
        return _read_shards(checkpoint_dir, index_path)
    if not os.path.isfile(path):
        raise ValueError(
            f"`checkpoint_dir` must hold {WEIGHTS_FILE} or {WEIGHTS_INDEX_FILE} with its "
            f"shards (pytorch_model.bin is not read: convert it with safetensors first); "
            f"{path} is missing."
        )
    return _load_file(path)


def _read_shards(checkpoint_dir: str, index_path: str) -> dict[str, np.ndarray]:
    """The tensors of a sharded checkpoint: each shard of the index's `weight_map` read
    once; every tensor must be in the shard the index names."""
    try:
        with open(index_path, encoding="utf-8") as file:
            weight_map = json.load(file)["weight_map"]
        shards = sorted(set(weight_map.values()))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as error:
        raise ValueError(f"Cannot read the weight_map of {index_path}: {error}") from None
    tensors = {}
    for shard in shards:
        path = os.path.join(checkpoint_dir, shard)
        if os.path.basename(shard) != shard or not os.path.isfile(path):
            raise ValueError(f"{WEIGHTS_INDEX_FILE} names the shard {shard!r}; it is missing.")
        tensors.update(_load_file(path))
    if set(tensors) != set(weight_map):
        misplaced = sorted(set(tensors) ^ set(weight_map))[:5]
        raise ValueError(
            f"The shards do not hold exactly the tensors {WEIGHTS_INDEX_FILE} lists. "
            f"Received: {misplaced} in one but not the other"
        )
    return tensors


# The first line of a file Git LFS left as a pointer (a clone without `git lfs pull`).
GIT_LFS_POINTER = b"version https://git-lfs"


def _load_file(path: str) -> dict[str, np.ndarray]:
    """The tensors of one safetensors file, as numpy arrays.

    Raises:
        ValueError: the file is a Git LFS pointer, truncated or otherwise not safetensors.
    """
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    try:
        return load_file(path)
    except SafetensorError as error:
        with open(path, "rb") as file:
            pointer = file.read(len(GIT_LFS_POINTER)) == GIT_LFS_POINTER
        if pointer:
            raise ValueError(
                f"{path} is a Git LFS pointer, not the weights: fetch them (`git lfs pull`)."
            ) from None
        raise ValueError(
            f"Cannot read {path}: {first_line(error)} (a truncated download, or a Git LFS "
            "pointer not yet fetched?)"
        ) from None
    except (TypeError, ValueError) as error:
        raise ValueError(f"Cannot read {path} with numpy: {error}") from error


def is_float(array: np.ndarray) -> bool:
    """A floating-point array, bfloat16 (`ml_dtypes`, which numpy does not class as
    floating) included."""
    return np.issubdtype(array.dtype, np.floating) or array.dtype.name == "bfloat16"


def rounding_of(array: np.ndarray) -> float:
    """The largest rounding error of a value in [-1, 1] stored in `array`'s dtype (half its
    machine epsilon: 6e-8 for float32, 4.9e-4 for float16, 3.9e-3 for bfloat16)."""
    if array.dtype.name == "bfloat16":  # 8 significant bits
        return 2.0**-8
    return float(np.finfo(array.dtype).eps) / 2
