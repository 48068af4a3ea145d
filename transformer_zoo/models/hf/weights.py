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
import re
from collections.abc import Callable, Iterable

import numpy as np

from transformer_zoo.models.hf.checkpoint_files import is_float, read_config, read_tensors


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
class CheckpointNames:
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
    checkpoint: CheckpointNames,
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
    slots: dict[str, np.ndarray], table: list[WeightRow], checkpoint: CheckpointNames
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


def load_checkpoint(
    checkpoint_dir, arguments_of, table_of, names: CheckpointNames, build, slots_of
):
    """The one import path: `config.json` → constructor arguments (`arguments_of`) and the
    expanded table (`table_of`); `model.safetensors` through the table; the model
    (`build(**arguments)`) with every variable (`slots_of(model)`) assigned."""
    config = read_config(checkpoint_dir)
    arguments = arguments_of(config)
    slots = map_weights(read_tensors(checkpoint_dir), table_of(config), names)
    model = build(**arguments)
    assign_weights(model, slots_of(model), slots)
    return model
