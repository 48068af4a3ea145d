"""Reading the dict inputs the three families share (token id 0 is padding), and the
checks of the arguments their constructors share."""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping

import keras
import numpy as np
from keras import ops

from transformer_zoo.layers.validation import (
    check_batch_sizes,
    check_heads,
    check_integers,
    check_sizes,
)

# Hugging Face's names for the inputs (its tokenizers return them) and ours.
HF_NAMES = {
    "input_ids": "token_ids",
    "attention_mask": "padding_mask",
    "token_type_ids": "segment_ids",
    "decoder_input_ids": "decoder_token_ids",
    "decoder_attention_mask": "decoder_padding_mask",
}


def unpack_inputs(
    inputs, ids_key: str, mask_key: str, accepted: Collection[str], bare_ids: bool = True
):
    """`(token_ids, padding_mask)` from a dict, or from a bare (B, T) id tensor.

    A missing padding mask is derived from the ids: 0 is padding (DESIGN.md conventions).

    Args:
        inputs: a dict whose keys are among `accepted`, or (if `bare_ids`) the ids alone.
        ids_key, mask_key: the keys of the ids and of their padding mask.
        accepted: every key the model reads (`check_input_keys`).
        bare_ids: whether a tensor alone is read as `ids_key`; an encoder-decoder takes
            two id tensors, and would read one as both.

    Raises:
        ValueError: a key outside `accepted`, `ids_key` missing from a dict, a tensor
            alone where the model takes a dict, or ids not integers of rank 2.
    """
    if isinstance(inputs, Mapping):
        check_input_keys(inputs, accepted)
        if ids_key not in inputs:
            raise ValueError(f"The inputs need `{ids_key}`. Received keys: {sorted(inputs)}")
        token_ids = inputs[ids_key]
        padding_mask = inputs.get(mask_key)
    elif not bare_ids:
        raise ValueError(
            f"The inputs must be a dict of {_listed(accepted)} (the masks optional), not "
            f"one tensor. Received: {type(inputs).__name__} of shape {_shape(inputs)}"
        )
    else:
        token_ids, padding_mask = inputs, None
    check_integers(token_ids, ids_key, "token ids")
    shape = _shape(token_ids)
    if len(shape) != 2:
        # Caught here, or the first layer to notice would blame its own argument.
        raise ValueError(
            f"`{ids_key}` must be (B, T) token ids, of rank 2. Received: {ids_key}.shape={shape}"
        )
    if padding_mask is None:
        padding_mask = ops.not_equal(token_ids, 0)
    return token_ids, padding_mask


def check_input_keys(inputs: Mapping, accepted: Collection[str]) -> None:
    """Refuses a key outside `accepted`: a misspelled or Hugging Face-named mask or segment
    key would otherwise be dropped without a word (the mask rebuilt from the ids, every
    segment 0). The message gives our name for Hugging Face's, or the closest key."""
    unknown = sorted(str(key) for key in inputs if key not in accepted)
    if not unknown:
        return
    described = []
    for key in unknown:
        ours = HF_NAMES.get(key)
        ours = next((name for name in (ours, f"encoder_{ours}") if name in accepted), None)
        close = difflib.get_close_matches(key, list(accepted), n=1, cutoff=0.75)
        if ours:
            described.append(f"`{key}` (Hugging Face's name; ours is `{ours}`)")
        elif close:
            described.append(f"`{key}` (did you mean `{close[0]}`?)")
        elif key == "segment_ids":
            described.append("`segment_ids` (set `type_vocabulary_size` > 0 to read segments)")
        else:
            described.append(f"`{key}`")
    inputs_word = "input" if len(described) == 1 else "inputs"
    raise ValueError(
        f"The model does not read the {inputs_word} {', '.join(described)}; "
        f"it reads {_listed(accepted)}."
    )


def check_step_batch(token_ids, cache, positions=None) -> None:
    """Refuses step inputs whose known batch sizes differ from the cache's, which would
    otherwise fail in a concatenation many frames down (`DecoderOnly.step`,
    `EncoderDecoder.step`)."""
    values = {"token_ids": token_ids, "cache": cache.blocks[0].self_attention.key}
    if positions is not None:
        values["positions"] = positions
    shapes = {name: _shape(value) for name, value in values.items()}
    check_batch_sizes(**{name: shape for name, shape in shapes.items() if shape})


def _shape(values) -> tuple:
    return tuple(values.shape) if hasattr(values, "shape") else np.shape(values)


def _listed(keys: Collection[str]) -> str:
    return ", ".join(f"`{key}`" for key in sorted(keys))


def token_specs(*names: str) -> dict[str, keras.InputSpec]:
    """(B, T) int32 `keras.InputSpec`s under `names`: ids, 0/1 masks and segment ids."""
    return {name: keras.InputSpec(shape=(None, None), dtype="int32", name=name) for name in names}


def check_dimensions(
    vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim, max_length
) -> tuple[int, ...]:
    """The sizes the three families take, in this order, as Python ints (`check_sizes`),
    with `hidden_dim` split evenly into `num_heads` heads: checked here, where the message
    can name `hidden_dim` rather than the attention's input width."""
    sizes = check_sizes(
        vocabulary_size=vocabulary_size,
        num_layers=num_layers,
        num_heads=num_heads,
        hidden_dim=hidden_dim,
        intermediate_dim=intermediate_dim,
        max_length=max_length,
    )
    check_heads(hidden_dim, num_heads, "hidden_dim")
    return sizes


def check_choice(name: str, value, choices) -> None:
    if value not in choices:
        raise ValueError(f"`{name}` must be one of {tuple(choices)}. Received: {name}={value!r}")
