"""Checks of token-id inputs, before anything reaches a graph (DESIGN.md: out-of-range ids,
over-long sequences and empty inputs get a clear error, not a kernel's)."""

from __future__ import annotations

import numpy as np

from transformer_zoo.errors import InputError
from transformer_zoo.generation.alignment import padded


def token_array(
    values, name: str, vocabulary_size: int, max_length: int | None = None, mask=None
) -> tuple[np.ndarray, np.ndarray]:
    """`values` as a (B, S) int64 array and its (B, S) boolean mask.

    Accepts a 2-D integer array, whose mask is `mask`, else `ids != 0`, or a list of id
    lists, right-padded with 0 and masked by their lengths, so that id 0 can be a real
    token (GPT-2's `!`, Marian's `</s>`).

    Raises:
        InputError: not integers, not 2-D, an empty row, an id outside
            [0, vocabulary_size), or a row longer than `max_length`.
    """
    if (
        isinstance(values, (list, tuple))
        and values
        and all(isinstance(row, (list, tuple, np.ndarray)) for row in values)
    ):
        rows = [np.asarray(row) for row in values]
        if any(row.ndim != 1 for row in rows):
            raise InputError(f"`{name}` must be a list of 1-D id lists.")
        dtype = np.result_type(*[row.dtype for row in rows]) if rows else np.int64
        array, lengths_mask = padded(rows, dtype=dtype)
        if mask is None:
            mask = lengths_mask
    else:
        array = np.asarray(values)
    if array.dtype == bool or not np.issubdtype(array.dtype, np.integer):
        raise InputError(f"`{name}` must hold integer token ids. Received dtype {array.dtype}.")
    if array.ndim != 2:
        raise InputError(f"`{name}` must be 2-D (batch, length). Received shape {array.shape}.")
    if array.size == 0:
        raise InputError(f"`{name}` is empty (shape {array.shape}).")
    check_ids_in_range(array, name, vocabulary_size)
    mask = array != 0 if mask is None else mask_array(mask, f"{name}'s mask", array.shape)
    lengths = mask.sum(1)
    if not lengths.all():
        raise InputError(f"Row {int(np.argmin(lengths))} of `{name}` holds no token (empty input).")
    if max_length is not None and lengths.max() > max_length:
        raise InputError(
            f"`{name}` holds a sequence of {int(lengths.max())} tokens, longer than the "
            f"model's maximum of {max_length} (its max_length)."
        )
    return array.astype(np.int64), mask


def check_ids_in_range(array: np.ndarray, name: str, vocabulary_size: int) -> None:
    low, high = int(array.min()), int(array.max())
    if low < 0 or high >= vocabulary_size:
        raise InputError(
            f"`{name}` must lie in [0, {vocabulary_size}) (the vocabulary size). "
            f"Received an id of {low if low < 0 else high}."
        )


def mask_array(values, name: str, shape: tuple) -> np.ndarray:
    """A 0/1 or boolean mask of `shape`, as booleans."""
    mask = np.asarray(values)
    if mask.shape != shape:
        raise InputError(f"`{name}` must have shape {shape}. Received shape {mask.shape}.")
    if mask.dtype != bool and not np.issubdtype(mask.dtype, np.integer):
        raise InputError(f"`{name}` must be boolean or 0/1 integers. Received dtype {mask.dtype}.")
    return mask.astype(bool)
