"""Boolean attention masks: True = may attend. The one place masks are combined."""

from __future__ import annotations

import numpy as np
from keras import ops

from transformer_zoo.errors import is_integer
from transformer_zoo.layers.validation import (
    check_flag,
    check_static_size,
    concrete_value,
    dtype_name,
)


def causal_mask(query_length, key_length, like=None):
    """(T, S) boolean mask where query i may attend key j iff j <= i + (S - T).

    The last query and the last key are aligned: with a cache of P past keys, S = P + T
    and query i sits at absolute position P + i, so decoding with a cache is identical to
    one full causal pass. With T = S this is the lower triangle, Keras' `use_causal_mask`;
    for T < S Keras aligns the first query with the first key instead (pass its
    `np.tril(np.ones((T, S), bool))` as an `attention_mask` for that: a (T, S) mask
    applies to every sequence of the batch, as in Keras).

    Args:
        query_length: T, an integer or a scalar integer tensor, or None where it is
            unknown until run time (a functional model's symbolic input).
        key_length: S, likewise; at least T where both are known, since the first T - S
            queries would see no key.
        like: a (T, S) tensor, needed where a length is None: the positions are counted
            along it at run time. T > S is not refused then, nor where a length is a
            tensor (a traced graph's dynamic length): those first queries' rows are all
            False, and attention spreads them evenly over every key.

    Raises:
        ValueError: a length that is not a non-negative integer; T > S; a length of None
            without `like`.
    """
    check_causal_lengths(query_length, key_length)
    if query_length is None or key_length is None:
        if like is None:
            raise ValueError(
                "A causal mask of unknown lengths (None) is counted along a (T, S) tensor: "
                "pass it as `like`."
            )
        # ops.arange needs a number, so the positions are counted from the end along
        # `like`, whatever its lengths turn out to be.
        ones = ops.ones_like(like, dtype="int32")  # (T, S)
        queries_to_end = ops.flip(ops.cumsum(ones, axis=0), axis=0)  # T - i
        keys_to_end = ops.flip(ops.cumsum(ones, axis=1), axis=1)  # S - j
        return ops.greater_equal(keys_to_end, queries_to_end)  # (T, S): j <= i + (S - T)
    offset = key_length - query_length
    rows = ops.expand_dims(ops.arange(query_length, dtype="int32"), 1) + offset  # (T, 1)
    cols = ops.expand_dims(ops.arange(key_length, dtype="int32"), 0)  # (1, S)
    return ops.greater_equal(rows, cols)  # (T, S)


def check_causal_lengths(query_length, key_length) -> None:
    """Refuses the lengths `causal_mask` cannot take: not non-negative integers (None and
    tensors pass), or T > S where both are known integers."""
    check_static_size("query_length", query_length)
    check_static_size("key_length", key_length)
    if is_integer(query_length) and is_integer(key_length) and query_length > key_length:
        raise ValueError(
            "A causal mask aligns the last query with the last key, so it needs at least as "
            f"many keys as queries: the first {query_length - key_length} queries would see "
            "none. For queries aligned with the first keys, as Keras' `use_causal_mask`, "
            "pass `attention_mask=np.tril(np.ones((T, S), bool))` instead. "
            f"Received: query_length={query_length}, key_length={key_length}"
        )


def keras_mask(x):
    """The (B, T) mask Keras attached to `x` (`keras.layers.Embedding(mask_zero=True)`
    and the layers that propagate it), or None; as keras-hub's layers read it."""
    return getattr(x, "_keras_mask", None)


def with_keras_mask(values, mask):
    """`values` with `mask` (boolean, its shape) attached as their Keras mask, as Keras'
    `sparse_categorical_crossentropy(ignore_class=...)` attaches it to its losses:
    `keras.losses.Loss.__call__` joins it with the predictions' Keras mask and, for the
    averaging reductions, divides by the positions both keep. (Keras' setter,
    `keras.src.backend.set_keras_mask`, is not public API; this is the attribute it and
    `keras_mask` use, here only.)"""
    values._keras_mask = mask
    return values


def as_mask(mask):
    """`mask` as an array where it is a Python list or tuple (of booleans or 0/1), which
    has no shape or dtype to check; anything else unchanged."""
    return np.asarray(mask) if isinstance(mask, (list, tuple)) else mask


def check_masks(
    batch_size, query_length, key_length, padding_mask=None, attention_mask=None
) -> None:
    """Refuses masks that are not boolean or 0/1, and masks that do not fit the attention
    while the shapes are known: a float or integer mask of other values is most likely
    additive (0 = attend, -1e9 = masked), which a cast to bool would read the other way
    round; a (B, S) padding mask passed as `attention_mask` would broadcast over the heads,
    and a wrong B or T would fail inside TensorFlow's kernels without naming the mask.

    The values are checked only where they are known now (numpy arrays, lists, eager
    tensors): in a traced graph a mask is cast to bool without a look, at no cost per call.
    A float mask of zeros only is refused too: read as 0/1 it masks every key (each query
    then spreads evenly over all of them), which is what an additive mask of a batch
    without padding would turn into. A boolean or integer mask masking every key is
    taken as it says.

    Args:
        batch_size, query_length, key_length: B, T and S where known (Python ints);
            anything else (None, a symbolic dimension) is not checked.
        padding_mask: the (B, S) mask, or None.
        attention_mask: the (B, T, S) mask, or a (T, S) one that applies to every
            sequence of the batch (as Keras' MultiHeadAttention takes it), or None.

    Raises:
        ValueError: a mask neither boolean nor 0/1; a float mask of zeros only;
            `padding_mask` not (B, S) or `attention_mask` neither (B, T, S) nor (T, S);
            a B or T of 1 broadcasts.
    """
    for name, mask, ranks, layout in (
        ("padding_mask", padding_mask, (2,), "(B, S)"),
        ("attention_mask", attention_mask, (3, 2), "(B, T, S) or (T, S)"),
    ):
        if mask is None:
            continue
        shape = tuple(mask.shape)
        hint = (
            " A (B, S) mask of padding keys goes in `padding_mask`."
            if name == "attention_mask" and len(shape) == 2
            else ""
        )
        if len(shape) not in ranks:
            raise ValueError(
                f"`{name}` must be {layout}, of rank {' or '.join(map(str, ranks))}. "
                f"Received: {name}.shape={shape}." + hint
            )
        _check_mask_values(name, mask)
        if isinstance(key_length, int) and shape[-1] is not None and shape[-1] != key_length:
            raise ValueError(
                f"`{name}` must cover the S={key_length} keys attended to. "
                f"Received: {name}.shape={shape}"
            )
        # (B, S) padding, (B, T, S) attention: B then T; a (T, S) attention mask: T only.
        leading = (("B", batch_size, "batch size"), ("T", query_length, "length"))
        leading = leading[len(shape) == 2 and name == "attention_mask" :][: len(shape) - 1]
        for (letter, size, what), got in zip(leading, shape[:-1], strict=True):
            if isinstance(size, int) and got is not None and got not in (size, 1):
                raise ValueError(
                    f"`{name}` must be {layout} with the query's {what} {letter}={size} "
                    f"(or 1, to broadcast). Received: {name}.shape={shape}.{hint}"
                )


def _check_mask_values(name: str, mask) -> None:
    """Refuses a mask, where its values are known now, that is neither boolean nor 0/1,
    or a float one of zeros only (`check_masks`)."""
    dtype = dtype_name(mask)
    if dtype in (None, "bool"):
        return
    # A float mask of 0s and 1s is a mask (Keras hands one to the layers under a
    # distribution strategy); one of other values, integers included (0 / -10000), is an
    # additive mask, which casting to bool would read the other way round.
    values = concrete_value(mask)
    if values is None:
        return
    integer = dtype.startswith(("int", "uint"))
    in_range = not values.size or (values.min() >= 0 and values.max() <= 1)  # cheap first
    if not in_range or (not integer and ((values > 0) & (values < 1)).any()):
        raise ValueError(
            f"`{name}` must be boolean (True = may attend) or 0/1. Received: {name} "
            f"of dtype {dtype} holding other values. An additive mask (0 = attend, "
            "-1e9 or -inf = masked) would be read the other way round: pass `mask == 0`."
        )
    if not integer and values.size and not values.any():
        raise ValueError(
            f"`{name}` of dtype {dtype} holds zeros only, which as a 0/1 mask masks every "
            "key. An additive mask (0 = attend) without padding is no mask: pass none, or "
            f"`mask == 0`; to mask every key, pass booleans. Received: {name}.shape="
            f"{tuple(values.shape)}"
        )


def merge_masks(
    query_length,
    key_length,
    padding_mask=None,
    attention_mask=None,
    causal=False,
    batch_size=None,
    like=None,
):
    """Combine the three mask sources into one (B or 1, T, S) boolean mask, or None.

    Args:
        query_length: T (None where unknown until run time: pass `like`).
        key_length: S (P + T with a self-attention cache; None likewise).
        padding_mask: (B, S) booleans or 0/1 numbers (a list too); False marks padding keys.
        attention_mask: (B, T, S) booleans or 0/1 numbers, or a (T, S) one for every
            sequence of the batch (as Keras' MultiHeadAttention takes it).
        causal: forbid attending to later positions (True or False).
        batch_size: B, to check the masks against (None: not checked).
        like: a (T, S) tensor, for a causal mask of unknown lengths (`causal_mask`).

    Raises:
        ValueError: a mask of values other than 0/1, or of the wrong rank or shape
            (`check_masks`);
            `causal` not a bool; `causal` with T > S (`causal_mask`).
    """
    padding_mask, attention_mask = as_mask(padding_mask), as_mask(attention_mask)
    check_mask_arguments(query_length, key_length, padding_mask, attention_mask, causal, batch_size)
    mask = None
    if padding_mask is not None:
        mask = ops.expand_dims(ops.cast(padding_mask, "bool"), 1)  # (B, 1, S)
    if attention_mask is not None:
        attention_mask = ops.cast(attention_mask, "bool")  # (B, T, S) or (T, S)
        if len(attention_mask.shape) == 2:
            attention_mask = ops.expand_dims(attention_mask, 0)  # (1, T, S)
        mask = attention_mask if mask is None else ops.logical_and(mask, attention_mask)
    if causal:
        causal_part = ops.expand_dims(causal_mask(query_length, key_length, like), 0)  # (1, T, S)
        mask = causal_part if mask is None else ops.logical_and(mask, causal_part)
    return mask


def check_mask_arguments(
    query_length,
    key_length,
    padding_mask=None,
    attention_mask=None,
    causal=False,
    batch_size=None,
) -> None:
    """Everything `merge_masks` refuses, checked without building a mask (its arguments,
    and `check_masks`, `check_causal_lengths`): the attention layers check them before a
    functional model's symbolic inputs go through their `__call__`, where Keras wrapped
    the error in its "Could not automatically infer the output shape" text."""
    check_flag("causal", causal)
    check_masks(
        batch_size, query_length, key_length, as_mask(padding_mask), as_mask(attention_mask)
    )
    if causal:
        check_causal_lengths(query_length, key_length)
