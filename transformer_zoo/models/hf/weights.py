"""The one mechanism that maps Hugging Face checkpoint tensors to our weight slots and back,
for every architecture (numpy only; the tables are in `bert`, `gpt2` and `marian`).

A slot is named after the sublayer of our model that will hold it
(`blocks.{i}.self_attention.key_value.kernel` is `blocks[i].self_attention
.key_value_dense.kernel`). A table row says which checkpoint tensors make which slots and
how (`TRANSFORMS`); every transform has its inverse, so the same table writes a checkpoint
(`export --format hf`). Every checkpoint tensor is accounted for: a missing or an unused
name is an error, never a silent skip; the tensors that are not weights (constant buffers,
copies of tied weights) are named in the architecture's `buffers` and checked.

Layout conversions:
- torch `Linear.weight` is (out, in) and computes x Wᵀ; a Keras `Dense` kernel is (in, out)
  and computes x K, so K = Wᵀ ("transpose"). GPT-2's `Conv1D` is already (in, out) ("copy").
- Our attention keeps W_Q as one (D, H·Dh) Dense and fuses W_K and W_V into one
  (D, 2·H·Dh) Dense, keys first ("transpose_concat", biases "concat"; GPT-2's fused
  `c_attn` (D, 3D) splits into query and key-value columns, "split_query"). Both sides lay
  out heads the same way (column h·Dh + j is head h, unit j), so no column permutation.
- LayerNorm weight/bias are Keras gamma/beta; embeddings are (rows, D) on both sides.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
from collections.abc import Callable, Iterable

import numpy as np

from transformer_zoo.errors import first_line, is_number

log = logging.getLogger(__name__)

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX_FILE = "model.safetensors.index.json"  # a sharded checkpoint


def _split_query(arrays):
    fused = arrays[0]  # (..., 3D): query | key | value
    width = fused.shape[-1] // 3
    return [fused[..., :width], fused[..., width:]]


# name → (forward: source arrays → slot arrays, inverse: slot arrays, number of sources →
# source arrays).
TRANSFORMS: dict[str, tuple[Callable, Callable]] = {
    "copy": (lambda a: [a[0]], lambda s, n: [s[0]]),
    "transpose": (lambda a: [a[0].T], lambda s, n: [s[0].T]),
    "transpose_concat": (
        lambda a: [np.concatenate([x.T for x in a], axis=1)],  # (D, n·out), keys first
        lambda s, n: [part.T for part in np.split(s[0], n, axis=1)],
    ),
    "concat": (lambda a: [np.concatenate(a, axis=0)], lambda s, n: np.split(s[0], n, axis=0)),
    "split_query": (_split_query, lambda s, n: [np.concatenate(s, axis=-1)]),
    "flatten": (lambda a: [a[0].reshape(-1)], lambda s, n: [s[0].reshape(1, -1)]),
}


@dataclasses.dataclass(frozen=True)
class WeightRow:
    """One row of a table: the checkpoint tensors `sources` make the slots `slots` (of
    `shapes`) through `transform`."""

    slots: tuple[str, ...]
    sources: tuple[str, ...]
    transform: str
    shapes: tuple[tuple[int, ...], ...]


def expand(rows, sizes: dict[str, int], layers: int = 0, slot_prefix="", source_prefix=""):
    """Table rows `(slot or slots, sources, transform, shape or shapes)` with symbolic
    shapes (`"D"`, `"2D"`, ...) as `WeightRow`s; with `layers`, once per layer i, prefixed
    by `slot_prefix` / `source_prefix` formatted with i."""

    def rows_for(slot_prefix, source_prefix):
        for slots, sources, transform, shapes in rows:
            if isinstance(slots, str):
                slots, shapes = (slots,), (shapes,)
            yield WeightRow(
                tuple(slot_prefix + s for s in slots),
                tuple(source_prefix + s for s in sources),
                transform,
                tuple(tuple(sizes[k] for k in shape) for shape in shapes),
            )

    if not layers:
        return list(rows_for(slot_prefix, source_prefix))
    return [
        row
        for i in range(layers)
        for row in rows_for(slot_prefix.format(i=i), source_prefix.format(i=i))
    ]


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """How one architecture's checkpoints name things, besides its table.

    Attributes:
        name: the architecture, for messages (`"BERT"`).
        prefixes: prefixes the names of a `*For*` / `*LMHeadModel` checkpoint carry
            (`"bert."`), dropped on reading; the first is written on export.
        buffers: regular expressions (full match) of the non-weight entries, each with a
            check `(value, tensors) -> None` that raises ValueError, or None to drop it.
        aliases: old name endings → current ones (`"LayerNorm.gamma"` → `.weight`).
    """

    name: str
    prefixes: tuple[str, ...] = ()
    buffers: dict[str, Callable | None] = dataclasses.field(default_factory=dict)
    aliases: dict[str, str] = dataclasses.field(default_factory=dict)

    def canonical(self, tensors: dict, ignore: Iterable[str] = ()) -> dict[str, np.ndarray]:
        """Drops the `ignore` names/prefixes and the checkpoint prefix; applies aliases."""
        ignore = tuple(ignore)
        kept = {k: v for k, v in tensors.items() if not (ignore and k.startswith(ignore))}
        for prefix in self.prefixes:  # a head (GPT-2's lm_head.weight) sits outside it
            if any(k.startswith(prefix) for k in kept):
                stripped = {k.removeprefix(prefix): v for k, v in kept.items()}
                if len(stripped) != len(kept):
                    raise ValueError(f"The checkpoint holds names with and without {prefix!r}.")
                kept = stripped
                break
        renamed = {}
        for name, value in kept.items():
            for old, new in self.aliases.items():
                if name.endswith(old):
                    name = name[: -len(old)] + new
            renamed[name] = value
        return renamed

    def buffer_check(self, name: str):
        """`(is a buffer, its check or None)` for a checkpoint entry."""
        for pattern, check in self.buffers.items():
            if re.fullmatch(pattern, name):
                return True, check
        return False, None


def map_weights(
    tensors: dict[str, np.ndarray],
    table: list[WeightRow],
    checkpoint: Checkpoint,
    ignore: Iterable[str] = (),
) -> dict[str, np.ndarray]:
    """Validates checkpoint tensors against `table` and returns float32 arrays per slot.

    Raises:
        ValueError: a name the table needs is missing, a name is left unused, a shape does
            not match the config, or a buffer is not what it should be.
    """
    tensors = checkpoint.canonical(tensors, ignore)
    needed = [name for row in table for name in row.sources]
    missing = [name for name in needed if name not in tensors]
    unused = []
    for name in sorted(set(tensors) - set(needed)):
        is_buffer, check = checkpoint.buffer_check(name)
        if not is_buffer:
            unused.append(name)
        elif check is not None and not missing:
            check(np.asarray(tensors[name]), tensors)
    if missing or unused:
        raise ValueError(
            f"The checkpoint does not match the {checkpoint.name} weight table. "
            f"Missing: {missing or 'none'}. Unused: {unused or 'none'}."
        )
    slots = {}
    for row in table:
        arrays = [np.asarray(tensors[name]) for name in row.sources]
        for name, array in zip(row.sources, arrays, strict=True):
            if not is_float(array):
                raise ValueError(f"`{name}` must be floating point. Received: dtype {array.dtype}")
        # float16 and bfloat16 checkpoints are computed in float32, as our models are.
        arrays = [array.astype(np.float32, copy=False) for array in arrays]
        values = TRANSFORMS[row.transform][0](arrays)
        for slot, shape, value in zip(row.slots, row.shapes, values, strict=True):
            if value.shape != shape:
                raise ValueError(
                    f"`{slot}` (from {', '.join(row.sources)}) must have shape {shape} "
                    f"for this config. Received: {value.shape}"
                )
            slots[slot] = np.ascontiguousarray(value, dtype=np.float32)
    return slots


def unmap_weights(
    slots: dict[str, np.ndarray], table: list[WeightRow], checkpoint: Checkpoint
) -> dict[str, np.ndarray]:
    """The inverse of `map_weights`: checkpoint name → float32 array, prefixed with the
    checkpoint's first prefix."""
    prefix = checkpoint.prefixes[0] if checkpoint.prefixes else ""
    tensors = {}
    for row in table:
        values = TRANSFORMS[row.transform][1]([slots[s] for s in row.slots], len(row.sources))
        for name, value in zip(row.sources, values, strict=True):
            tensors[prefix + name] = np.ascontiguousarray(value, dtype=np.float32)
    return tensors


def equal_to(source: str, what: str):
    """A buffer check: the entry is a copy of the tensor `source` (a tied weight saved
    twice)."""

    def check(value, tensors):
        if source in tensors and not np.array_equal(value, np.asarray(tensors[source])):
            raise ValueError(f"`{what}` must equal `{source}` (tied weights); it differs.")

    return check


def assign_weights(model, table: dict, slots: dict[str, np.ndarray]) -> None:
    """Assigns every slot to its variable of `table` (slot → `keras.Variable`); every
    variable of `model` must get exactly one.

    Raises:
        ValueError: a slot without a variable, a variable without a slot, or a shape
            that differs.
    """
    unknown = sorted(set(slots) - set(table))
    unfilled = sorted(set(table) - set(slots))
    assigned = {id(variable) for variable in table.values()}
    untouched = [w.path for w in model.weights if id(w) not in assigned]
    if unknown or unfilled or untouched:
        raise ValueError(
            "The weights do not cover the model one to one. "
            f"Slots without a variable: {unknown or 'none'}. Variables without a slot: "
            f"{(unfilled + untouched) or 'none'}."
        )
    for name, variable in table.items():
        value = slots[name]
        if tuple(variable.shape) != value.shape:
            raise ValueError(
                f"`{name}` has shape {value.shape}; the model's variable {variable.path} "
                f"has {tuple(variable.shape)}."
            )
        variable.assign(value.astype(variable.dtype))


def read_slots(table: dict) -> dict[str, np.ndarray]:
    """Slot → float32 array of each variable of a slot table (what export writes)."""
    return {name: np.asarray(variable.numpy(), np.float32) for name, variable in table.items()}


def dense_slots(prefix: str, layers: dict) -> dict:
    """`{prefix}{name}.kernel` / `.bias` → variable, for `name → keras Dense`."""
    table = {}
    for name, dense in layers.items():
        table[f"{prefix}{name}.kernel"] = dense.kernel
        table[f"{prefix}{name}.bias"] = dense.bias
    return table


def norm_slots(prefix: str, owner, names: Iterable[str]) -> dict:
    """`{prefix}{name}.gamma` / `.beta` → variable, for the LayerNorms `owner.{name}`."""
    table = {}
    for name in names:
        norm = getattr(owner, name)
        table[f"{prefix}{name}.gamma"] = norm.gamma
        table[f"{prefix}{name}.beta"] = norm.beta
    return table


def attention_slots(prefix: str, attention) -> dict:
    """The query, key-value and output Dense layers of one of our attention layers."""
    return dense_slots(
        prefix,
        {
            "query": attention.query_dense,
            "key_value": attention.key_value_dense,
            "output": attention.output_dense,
        },
    )


def feed_forward_slots(prefix: str, feed_forward) -> dict:
    return dense_slots(
        prefix,
        {"intermediate": feed_forward.intermediate_dense, "output": feed_forward.output_dense},
    )


def block_slots(prefix: str, block) -> dict:
    """Every variable of one of our `TransformerBlock`s: self-attention, cross-attention
    where the block has it, the FFN and their LayerNorms, under `prefix`."""
    norms = ["self_attention_norm", "feed_forward_norm"]
    table = attention_slots(prefix + "self_attention.", block.self_attention)
    if block.cross_attention:
        table.update(attention_slots(prefix + "cross_attention.", block.cross_attention_layer))
        norms.append("cross_attention_norm")
    table.update(feed_forward_slots(prefix + "feed_forward.", block.feed_forward))
    table.update(norm_slots(prefix, block, norms))
    return table


def load_checkpoint(checkpoint_dir, arguments_of, table_of, names: Checkpoint, build, slots_of):
    """The one import path: `config.json` → constructor arguments (`arguments_of`) and the
    expanded table (`table_of`); `model.safetensors` through the table; the model
    (`build(**arguments)`) with every variable (`slots_of(model)`) assigned."""
    config = read_config(checkpoint_dir)
    arguments = arguments_of(config)
    slots = map_weights(read_tensors(checkpoint_dir), table_of(config), names)
    model = build(**arguments)
    assign_weights(model, slots_of(model), slots)
    return model


def require_model_type(config: dict, model_type: str, name: str) -> None:
    """Raises ValueError unless `config.json` describes `model_type` (`name` in messages)."""
    found = config.get("model_type")
    if found != model_type:
        raise ValueError(
            f"config.json must describe a {name} model. Received: model_type={found!r}"
        )


def translated_option(config: dict, key: str, default: str, ours: dict[str, str]) -> str:
    """Our value for the `config.json` option `key` (e.g. an activation name), through the
    table `ours`; ValueError for a value our layers do not implement."""
    value = config.get(key, default)
    if value not in ours:
        raise ValueError(f"`{key}` must be one of {sorted(ours)}. Received: {key}={value!r}")
    return ours[value]


def dropout_rate(config: dict, keys: tuple[str, ...]) -> float:
    """The one dropout rate of our models (embeddings, residuals and attention alike) for
    a checkpoint's rates `keys`, each transformers' 0.1 where `config.json` leaves it out:
    the first key's (the rate applied in the most places), with one warning where the
    others differ. Dropout changes nothing at inference; `train --init` fine-tunes with
    it, and `export --format hf` writes it back for every key.

    Raises:
        ValueError: a rate that is not a number in [0, 1).
    """
    rates = {}
    for key in keys:
        rate = config.get(key, 0.1)
        if not is_number(rate) or not 0.0 <= rate < 1.0:
            raise ValueError(f"`{key}` must be in [0, 1). Received: {key}={rate!r}")
        rates[key] = float(rate)
    rate = rates[keys[0]]
    others = [f"{key}={value:g}" for key, value in rates.items() if value != rate]
    if others:
        log.warning(
            "one dropout rate for the whole model: %s=%g, also in place of %s (train --init "
            "fine-tunes with it, export --format hf writes it back)",
            keys[0],
            rate,
            ", ".join(others),
        )
    return rate


def positive_ints(config: dict, keys: dict[str, str], what: str) -> dict[str, int]:
    """`{short: value}` for the `config.json` keys `keys` (key → short name), each a
    positive integer."""
    sizes = {}
    for key, short in keys.items():
        value = config.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(
                f"config.json of a {what} model needs a positive integer `{key}`. "
                f"Received: {key}={value!r}"
            )
        sizes[short] = value
    names = {short: key for key, short in keys.items()}
    if "D" in sizes and "H" in sizes and sizes["D"] % sizes["H"]:
        raise ValueError(
            f"`{names['D']}` must be divisible by `{names['H']}`. "
            f"Received: {names['D']}={sizes['D']}, {names['H']}={sizes['H']}"
        )
    return sizes


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
