"""Reading the dict inputs the three families share (token id 0 is padding)."""

from __future__ import annotations

import keras
import numpy as np
from keras import ops


def unpack_inputs(inputs, ids_key: str, mask_key: str):
    """`(token_ids, padding_mask)` from a dict, or from a bare (B, T) id tensor.

    A missing padding mask is derived from the ids: 0 is padding (DESIGN.md conventions).

    Raises:
        ValueError: `ids_key` missing from a dict, or its ids not of rank 2.
    """
    if isinstance(inputs, dict):
        if ids_key not in inputs:
            raise ValueError(f"The inputs need `{ids_key}`. Received keys: {sorted(inputs)}")
        token_ids = inputs[ids_key]
        padding_mask = inputs.get(mask_key)
    else:
        token_ids, padding_mask = inputs, None
    shape = tuple(token_ids.shape) if hasattr(token_ids, "shape") else np.shape(token_ids)
    if len(shape) != 2:
        # Caught here, or the first layer to notice would blame its own argument.
        raise ValueError(
            f"`{ids_key}` must be (B, T) token ids, of rank 2. Received: {ids_key}.shape={shape}"
        )
    if padding_mask is None:
        padding_mask = ops.not_equal(token_ids, 0)
    return token_ids, padding_mask


def token_specs(*names: str) -> dict[str, keras.InputSpec]:
    """(B, T) int32 `keras.InputSpec`s under `names`: ids, 0/1 masks and segment ids."""
    return {name: keras.InputSpec(shape=(None, None), dtype="int32", name=name) for name in names}


def check_choice(name: str, value, choices) -> None:
    if value not in choices:
        raise ValueError(f"`{name}` must be one of {tuple(choices)}. Received: {name}={value!r}")


def check_positive_int(**values) -> None:
    for name, value in values.items():
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"`{name}` must be a positive integer. Received: {name}={value!r}")
