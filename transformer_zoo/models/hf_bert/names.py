"""The explicit name table from Hugging Face BERT checkpoints to our logical weight slots.

numpy only. A slot is named after the sublayer of our model that will hold it
(`blocks.{i}.self_attention.key_value.kernel` is `EncoderOnly.blocks[i].self_attention
.key_value_dense.kernel`), and every checkpoint tensor is accounted for: a missing or an
unused name is an error, never a silent skip.

Layout conversions, all written in the table:
- torch `Linear.weight` is (out, in) and computes x Wᵀ; a Keras `Dense` kernel is (in, out)
  and computes x K, so K = Wᵀ ("transpose").
- Our attention keeps W_Q as one (D, H·Dh) Dense and fuses W_K and W_V into one
  (D, 2·H·Dh) Dense, keys first ("transpose_concat", biases "concat"). Both sides lay out
  heads the same way (column h·Dh + j is head h, unit j), so no column permutation.
- LayerNorm weight/bias are Keras gamma/beta; embeddings are (rows, D) on both sides.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable

import numpy as np

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"

# (slot, HF source names, transform, slot shape). In shapes, V is the vocabulary, D the
# width, F the FFN width, P the positions and S the segment types.
# fmt: off
EMBEDDING_TABLE = (
    ("embeddings.token",      ("embeddings.word_embeddings.weight",),       "copy", ("V", "D")),
    ("embeddings.position",   ("embeddings.position_embeddings.weight",),   "copy", ("P", "D")),
    ("embeddings.segment",    ("embeddings.token_type_embeddings.weight",), "copy", ("S", "D")),
    ("embeddings_norm.gamma", ("embeddings.LayerNorm.weight",),             "copy", ("D",)),
    ("embeddings_norm.beta",  ("embeddings.LayerNorm.bias",),               "copy", ("D",)),
)
# Per layer i: slots under LAYER_SLOT, sources under LAYER_SOURCE.
LAYER_SLOT, LAYER_SOURCE = "blocks.{i}.", "encoder.layer.{i}."
LAYER_TABLE = (
    ("self_attention.query.kernel",      ("attention.self.query.weight",),   "transpose", ("D", "D")),
    ("self_attention.query.bias",        ("attention.self.query.bias",),     "copy",      ("D",)),
    ("self_attention.key_value.kernel",  ("attention.self.key.weight",
                                          "attention.self.value.weight"),    "transpose_concat", ("D", "2D")),
    ("self_attention.key_value.bias",    ("attention.self.key.bias",
                                          "attention.self.value.bias"),      "concat",    ("2D",)),
    ("self_attention.output.kernel",     ("attention.output.dense.weight",), "transpose", ("D", "D")),
    ("self_attention.output.bias",       ("attention.output.dense.bias",),   "copy",      ("D",)),
    ("self_attention_norm.gamma",        ("attention.output.LayerNorm.weight",), "copy",  ("D",)),
    ("self_attention_norm.beta",         ("attention.output.LayerNorm.bias",),   "copy",  ("D",)),
    ("feed_forward.intermediate.kernel", ("intermediate.dense.weight",),     "transpose", ("D", "F")),
    ("feed_forward.intermediate.bias",   ("intermediate.dense.bias",),       "copy",      ("F",)),
    ("feed_forward.output.kernel",       ("output.dense.weight",),           "transpose", ("F", "D")),
    ("feed_forward.output.bias",         ("output.dense.bias",),             "copy",      ("D",)),
    ("feed_forward_norm.gamma",          ("output.LayerNorm.weight",),       "copy",      ("D",)),
    ("feed_forward_norm.beta",           ("output.LayerNorm.bias",),         "copy",      ("D",)),
)
POOLER_TABLE = (
    ("pooler.kernel", ("pooler.dense.weight",), "transpose", ("D", "D")),
    ("pooler.bias",   ("pooler.dense.bias",),   "copy",      ("D",)),
)
# fmt: on
# Checkpoint entries that are not weights. `position_ids` is the constant arange(P) buffer
# transformers saves with the embeddings; it is checked, then dropped.
BUFFERS = ("embeddings.position_ids",)
# Older (TensorFlow-converted) checkpoints name LayerNorm parameters gamma/beta.
ALIASES = {"LayerNorm.gamma": "LayerNorm.weight", "LayerNorm.beta": "LayerNorm.bias"}
# BertFor* checkpoints put the encoder under "bert.".
PREFIX = "bert."


@dataclasses.dataclass(frozen=True)
class WeightSlot:
    """One logical weight: its name, its HF sources, the transform and the target shape."""

    name: str
    sources: tuple[str, ...]
    transform: str
    shape: tuple[int, ...]


def bert_dimensions(config: dict) -> dict[str, int]:
    """The sizes a BERT `config.json` fixes, validated."""
    keys = {
        "vocab_size": "V",
        "hidden_size": "D",
        "num_hidden_layers": "layers",
        "num_attention_heads": "H",
        "intermediate_size": "F",
        "max_position_embeddings": "P",
        "type_vocab_size": "S",
    }
    dims = {}
    for key, short in keys.items():
        value = config.get(key)
        if not isinstance(value, int) or value < 1:
            raise ValueError(
                f"config.json needs a positive integer `{key}`. Received: {key}={value!r}"
            )
        dims[short] = value
    if dims["D"] % dims["H"]:
        raise ValueError(
            "`hidden_size` must be divisible by `num_attention_heads`. "
            f"Received: hidden_size={dims['D']}, num_attention_heads={dims['H']}"
        )
    return dims


def bert_weight_table(config: dict, pooler: bool = True) -> list[WeightSlot]:
    """The table expanded for one checkpoint's config: every slot with its target shape."""
    d = bert_dimensions(config)
    sizes = {**d, "2D": 2 * d["D"]}
    rows = list(EMBEDDING_TABLE)
    for i in range(d["layers"]):
        slot_prefix, source_prefix = LAYER_SLOT.format(i=i), LAYER_SOURCE.format(i=i)
        rows += [
            (slot_prefix + slot, tuple(source_prefix + s for s in sources), transform, shape)
            for slot, sources, transform, shape in LAYER_TABLE
        ]
    if pooler:
        rows += list(POOLER_TABLE)
    return [
        WeightSlot(slot, sources, transform, tuple(sizes[k] for k in shape))
        for slot, sources, transform, shape in rows
    ]


def _canonical_names(
    tensors: dict[str, np.ndarray], ignore: Iterable[str]
) -> dict[str, np.ndarray]:
    """Drops the caller's `ignore` names/prefixes and the `bert.` prefix; applies ALIASES."""
    ignore = tuple(ignore)
    kept = (
        {k: v for k, v in tensors.items() if not k.startswith(ignore)} if ignore else dict(tensors)
    )
    if kept and all(k.startswith(PREFIX) for k in kept):
        kept = {k[len(PREFIX) :]: v for k, v in kept.items()}
    renamed = {}
    for name, value in kept.items():
        for old, new in ALIASES.items():
            if name.endswith(old):
                name = name[: -len(old)] + new
        renamed[name] = value
    return renamed


def _apply(transform: str, arrays: list[np.ndarray]) -> np.ndarray:
    if transform == "copy":
        return arrays[0]
    if transform == "transpose":
        return arrays[0].T
    if transform == "transpose_concat":
        return np.concatenate([a.T for a in arrays], axis=1)  # (D, 2·H·Dh), keys first
    if transform == "concat":
        return np.concatenate(arrays, axis=0)
    raise ValueError(f"Unknown transform {transform!r}.")


def map_bert_weights(
    tensors: dict[str, np.ndarray],
    config: dict,
    pooler: bool | None = None,
    ignore: Iterable[str] = (),
) -> dict[str, np.ndarray]:
    """Validates HF BERT tensors against the table and returns float32 arrays per slot.

    Args:
        tensors: checkpoint name → array, as `safetensors.numpy.load_file` gives them.
        config: the checkpoint's `config.json` as a dict.
        pooler: expect `pooler.dense.*`; `None` expects it exactly when the checkpoint
            has it.
        ignore: names or name prefixes to drop on purpose (e.g. `"cls."`, the masked-LM
            head of a `BertForPreTraining` checkpoint).

    Returns:
        Slot name → float32 array of the slot's shape, in table order.

    Raises:
        ValueError: a name the table needs is missing, a name is left unused, a shape
            does not match the config, or a buffer is not what it should be.
    """
    tensors = _canonical_names(tensors, ignore)
    if pooler is None:
        pooler = any(name.startswith("pooler.") for name in tensors)
    table = bert_weight_table(config, pooler)
    needed = [name for slot in table for name in slot.sources]
    missing = [name for name in needed if name not in tensors]
    unused = sorted(set(tensors) - set(needed) - set(BUFFERS))
    if missing or unused:
        raise ValueError(
            "The checkpoint does not match the BERT weight table. "
            f"Missing: {missing or 'none'}. Unused: {unused or 'none'}."
        )
    _check_position_ids(tensors.get("embeddings.position_ids"), config["max_position_embeddings"])

    slots = {}
    for slot in table:
        arrays = [np.asarray(tensors[name]) for name in slot.sources]
        for name, array in zip(slot.sources, arrays, strict=True):
            if not np.issubdtype(array.dtype, np.floating):
                raise ValueError(f"`{name}` must be floating point. Received: dtype {array.dtype}")
        value = _apply(slot.transform, arrays)
        if value.shape != slot.shape:
            raise ValueError(
                f"`{slot.name}` (from {', '.join(slot.sources)}) must have shape {slot.shape} "
                f"for this config. Received: {value.shape}"
            )
        slots[slot.name] = np.ascontiguousarray(value, dtype=np.float32)
    return slots


def _check_position_ids(position_ids, max_positions: int) -> None:
    if position_ids is None:
        return
    expected = np.arange(max_positions)
    if np.asarray(position_ids).reshape(-1).tolist() != expected.tolist():
        raise ValueError(
            "`embeddings.position_ids` must be arange(max_position_embeddings): positions are "
            f"not remapped. Received: shape {np.shape(position_ids)}"
        )


def list_tensors(path: str | os.PathLike) -> dict[str, tuple[tuple[int, ...], str]]:
    """Name → (shape, dtype) of every tensor in a `.safetensors` file, without loading it."""
    from safetensors import safe_open

    with safe_open(os.fspath(path), framework="np") as file:
        out = {}
        for name in file.keys():  # noqa: SIM118 (safe_open is not a mapping)
            info = file.get_slice(name)
            out[name] = (tuple(info.get_shape()), info.get_dtype())
    return out


def read_bert_checkpoint(
    checkpoint_dir: str | os.PathLike, pooler: bool | None = None, ignore: Iterable[str] = ()
) -> tuple[dict, dict[str, np.ndarray]]:
    """Reads `config.json` and `model.safetensors` of a Hugging Face BERT directory.

    Returns:
        `(config, slots)`: the config dict and `map_bert_weights`' arrays.
    """
    from safetensors.numpy import load_file

    config_path = os.path.join(checkpoint_dir, CONFIG_FILE)
    weights_path = os.path.join(checkpoint_dir, WEIGHTS_FILE)
    for path in (config_path, weights_path):
        if not os.path.isfile(path):
            raise ValueError(
                f"`checkpoint_dir` must hold {CONFIG_FILE} and {WEIGHTS_FILE}; {path} is missing. "
                f"Received: checkpoint_dir={checkpoint_dir}"
            )
    with open(config_path, encoding="utf-8") as file:
        config = json.load(file)
    try:
        tensors = load_file(weights_path)
    except (TypeError, ValueError) as error:  # e.g. bfloat16, which numpy cannot hold
        raise ValueError(f"Cannot read {weights_path} with numpy: {error}") from error
    return config, map_bert_weights(tensors, config, pooler=pooler, ignore=ignore)
