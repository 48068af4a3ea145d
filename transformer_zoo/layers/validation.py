"""Input checks shared by the layers: fail with a clear message before a kernel does.

On a GPU an out-of-range embedding lookup silently returns zeros, so token ids and
lengths are checked wherever their values are known: eagerly here, and at the edges
(data pipelines, generation, the ONNX runtime) for compiled graphs.
"""

from __future__ import annotations

import numpy as np


def concrete_value(x):
    """`x` as a numpy array when its value is known now (Python number, numpy, eager
    tensor), else None (a symbolic tensor inside a traced graph)."""
    if x is None:
        return None
    if isinstance(x, (int, np.integer, float, np.ndarray, list, tuple)):
        return np.asarray(x)
    numpy = getattr(x, "numpy", None)
    if numpy is None:
        return None
    try:
        return np.asarray(numpy())
    except Exception:  # symbolic tensors have .numpy() but cannot run it
        return None


def check_token_ids(
    token_ids, vocabulary_size: int, name: str = "token_ids", bound: str = "the vocabulary size"
) -> None:
    """Raise ValueError if any id lies outside [0, vocabulary_size)."""
    check_indices(token_ids, vocabulary_size, name, bound, "an id")


def check_indices(values, size, name: str, bound: str, item: str = "a value") -> None:
    """Raise ValueError if any of `values` lies outside [0, size), where both are known.

    Args:
        values: the indices (checked when `concrete_value` knows them).
        size: the exclusive upper bound; not checked unless a Python or numpy int.
        name: the argument the values came in, for the message.
        bound: what `size` is, e.g. "the vocabulary size".
        item: one value in words, e.g. "an id".
    """
    values = concrete_value(values)
    if values is None or values.size == 0 or not isinstance(size, (int, np.integer)):
        return
    low, high = int(values.min()), int(values.max())
    if low < 0 or high >= size:
        bad = low if low < 0 else high
        raise ValueError(f"`{name}` must lie in [0, {size}) ({bound}). Received {item} of {bad}.")


def check_sequence_length(length, max_length: int, start_index=0) -> None:
    """Raise ValueError if positions start_index .. start_index+length-1 exceed max_length
    or start below 0 (a learned table would wrap them to its last rows)."""
    length, start = concrete_value(length), concrete_value(start_index)
    if length is None or start is None:
        return
    if start.size and int(np.min(start)) < 0:
        raise ValueError(f"Positions must be ≥ 0. Received: a position of {int(np.min(start))}.")
    end = int(length) + int(np.max(start))
    if end > max_length:
        raise ValueError(
            f"The sequence is too long: positions up to {end} were requested but "
            f"max_length={max_length}. Received: length={int(length)}, "
            f"start_index={int(np.max(start))}."
        )


def check_batch_sizes(**shapes) -> None:
    """Raise ValueError if the named (B, ...) shapes have different known batch sizes,
    e.g. `check_batch_sizes(query=query.shape, context=context.shape)`."""
    known = {shape[0] for shape in shapes.values() if shape[0] is not None}
    if len(known) > 1:
        names = " and ".join(f"`{name}`" for name in shapes)
        received = ", ".join(f"{name}.shape={tuple(shape)}" for name, shape in shapes.items())
        raise ValueError(f"{names} must have the same batch size B. Received: {received}")
