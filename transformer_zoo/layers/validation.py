"""Argument and input checks shared by the layers and models: fail with a clear message
before a kernel does, or before a wrong value is silently read as another.

The constructors' arguments: sizes (`check_size`, `check_sizes`: integers, numpy's too,
never a bool), flags (`check_flag`: a bool, never a string), rates (`check_rate`) and
positive numbers (`check_positive_number`); each names the argument and returns the value
as a plain Python one, so configs and run files hold no numpy scalars.

The inputs: on a GPU an out-of-range embedding lookup silently returns zeros, and a
float id or position is truncated, so token ids, positions and lengths are checked
wherever their dtypes and values are known: eagerly here, and at the edges (data
pipelines, generation, the ONNX runtime) for compiled graphs.
"""

from __future__ import annotations

import numbers

import keras
import numpy as np

from transformer_zoo.errors import check_flag as check_flag  # the layers' one flag check
from transformer_zoo.errors import check_size as check_size  # the CLI's settings use it too
from transformer_zoo.errors import is_number


def check_sizes(**sizes) -> tuple[int, ...]:
    """`check_size` of each keyword, its values in order:
    `layers, width = check_sizes(num_layers=num_layers, hidden_dim=hidden_dim)`."""
    return tuple(check_size(name, value) for name, value in sizes.items())


def check_static_size(name: str, value, minimum: int = 0) -> None:
    """`check_size` of a size given as a Python or numpy number; a tensor (a symbolic
    batch size inside a traced graph) is left to the ops that read it."""
    if isinstance(value, (numbers.Number, np.generic)):
        check_size(name, value, minimum)


def check_rate(name: str, value) -> float:
    """`value` as a float if it is a number in [0, 1) (a dropout rate), else ValueError."""
    if not is_number(value) or not 0.0 <= value < 1.0:
        raise ValueError(f"`{name}` must be in [0, 1). Received: {name}={value!r}")
    return float(value)


def check_positive_number(name: str, value) -> float:
    """`value` as a float if it is a number > 0 (a LayerNorm epsilon), else ValueError."""
    if not is_number(value) or not value > 0:
        raise ValueError(f"`{name}` must be a positive number. Received: {name}={value!r}")
    return float(value)


def check_heads(width, num_heads: int, width_name: str) -> None:
    """Raise ValueError unless the model width `width` splits evenly into `num_heads`
    heads; `width_name` is the argument (or input) it came in."""
    if width % num_heads:
        raise ValueError(
            "The model width must be divisible by the number of heads. "
            f"Received: {width_name}={width}, num_heads={num_heads}"
        )


def check_sinusoidal_width(width, width_name: str) -> None:
    """Raise ValueError unless `width` is even: the sinusoidal table pairs a sine and a
    cosine dimension per frequency (paper §3.5)."""
    if width % 2:
        raise ValueError(
            "The sinusoidal encoding pairs sine and cosine dimensions, so the model width "
            f"must be even. Received: {width_name}={width}"
        )


def dtype_name(values) -> str | None:
    """The standardized dtype of a tensor (a symbolic one too), an array or a Python list
    or number (`"int32"`, `"float32"`, `"string"`, ...), or None for anything else."""
    dtype = getattr(values, "dtype", None)
    if dtype is None:
        if not isinstance(values, (numbers.Number, list, tuple)):
            return None
        try:
            dtype = np.asarray(values).dtype
        except ValueError:  # a ragged list
            return "object"
    try:
        return keras.backend.standardize_dtype(dtype)
    except (TypeError, ValueError):
        return str(dtype)


def check_integers(values, name: str, kind: str) -> None:
    """Raise ValueError if `values`, where known now (`concrete_value`), are not integers:
    a float id or position would be truncated (1.7 read as 1) without a word. `kind` says
    what they are, e.g. "token ids".

    A traced graph's tensors are left alone: Keras builds a subclassed model by tracing
    it on float placeholders, whatever dtype its inputs will have.
    """
    _check_integer_array(concrete_value(values), name, kind)


def _check_integer_array(array, name: str, kind: str) -> None:
    if array is not None and array.dtype.kind not in "iu":
        raise ValueError(
            f"`{name}` must hold integer {kind}. Received: {name} of dtype {array.dtype.name}."
        )


def concrete_value(x):
    """`x` as a numpy array when its value is known now (Python number, numpy, eager
    tensor), else None (a symbolic tensor inside a traced graph)."""
    if x is None:
        return None
    if isinstance(x, (numbers.Number, np.generic, np.ndarray, list, tuple)):
        return np.asarray(x)
    numpy = getattr(x, "numpy", None)
    if numpy is None:
        return None
    try:
        return np.asarray(numpy())
    except Exception:  # symbolic tensors have .numpy() but cannot run it
        return None


def check_token_ids(
    token_ids,
    vocabulary_size: int,
    name: str = "token_ids",
    bound: str = "the vocabulary size",
    kind: str = "token ids",
) -> None:
    """Raise ValueError unless the ids are integers in [0, vocabulary_size)."""
    check_indices(token_ids, vocabulary_size, name, bound, "an id", kind)


def check_indices(
    values, size, name: str, bound: str, item: str = "a value", kind: str = "indices"
) -> None:
    """Raise ValueError if `values` are not integers (where their dtype is known) or any
    lies outside [0, size) (where both are known).

    Args:
        values: the indices (checked when `concrete_value` knows them).
        size: the exclusive upper bound; not checked unless a Python or numpy int.
        name: the argument the values came in, for the message.
        bound: what `size` is, e.g. "the vocabulary size".
        item: one value in words, e.g. "an id".
        kind: the values in words, e.g. "token ids" (`check_integers`).
    """
    values = concrete_value(values)
    _check_integer_array(values, name, kind)
    if values is None or values.size == 0 or not isinstance(size, (int, np.integer)):
        return
    low, high = int(values.min()), int(values.max())
    if low < 0 or high >= size:
        bad = low if low < 0 else high
        raise ValueError(f"`{name}` must lie in [0, {size}) ({bound}). Received {item} of {bad}.")


def check_sequence_length(
    length, max_length: int, start_index=0, name: str = "start_index"
) -> None:
    """Raise ValueError if positions start_index .. start_index+length-1 exceed max_length
    or start below 0 (a learned table would wrap them to its last rows), or if the start
    (the argument `name`: a scalar or (B, T) positions) is not an integer."""
    length, start = concrete_value(length), concrete_value(start_index)
    _check_integer_array(start, name, "positions")
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
