"""How rows of different lengths share one decoding batch: the one definition.

Every engine and the SavedModel's in-graph loop left-align the prompts (each row's real
tokens at the right end, padding on the left), so that every row's next token sits in the
last column and the cache grows by one column per step; a token's position is the number
of real tokens before it. The functions take an array namespace `xp`: numpy for the
engines (which serve without TensorFlow), `tf.experimental.numpy` inside a graph.
"""

from __future__ import annotations

import numpy as np


def left_align(ids, mask, xp=np):
    """`(ids, mask)` with each row's real tokens moved to the right end, padding (0) on
    the left, and the columns that are padding in every row dropped.

    Args:
        ids: (B, S) integer ids.
        mask: (B, S) boolean, True at real tokens (any order of real and padding).
        xp: the array namespace of `ids` and `mask`.

    Example:
    >>> ids = np.array([[5, 6, 0], [7, 0, 0]])
    >>> ids, mask = left_align(ids, ids != 0)
    >>> ids.tolist(), mask.tolist()
    ([[5, 6], [0, 7]], [[True, True], [False, True]])
    """
    return _align(ids, mask, xp, padding_first=True)


def right_align(ids, mask, xp=np):
    """As `left_align`, with the real tokens at the left end and the padding after them
    (the teacher-forced layout of the uncached reference)."""
    return _align(ids, mask, xp, padding_first=False)


def _align(ids, mask, xp, padding_first: bool):
    # A stable sort on the mask moves each row's padding to one end and keeps the order
    # of its tokens.
    key = xp.asarray(mask, dtype=xp.int32)
    order = xp.argsort(key if padding_first else 1 - key, axis=1, kind="stable")
    mask = xp.take_along_axis(mask, order, axis=1)
    ids = xp.where(mask, xp.take_along_axis(ids, order, axis=1), xp.zeros_like(ids))
    width = xp.max(xp.sum(key, axis=1))
    if padding_first:  # every row holds a token, so width >= 1
        return ids[:, -width:], mask[:, -width:]
    return ids[:, :width], mask[:, :width]


def padded(rows, left: bool = False, dtype=np.int64) -> tuple[np.ndarray, np.ndarray]:
    """Id lists of different lengths as one (B, S) array, padded with 0 on the `left` or
    the right, and its (B, S) boolean mask, True at the real tokens (numpy only).

    Example:
    >>> ids, mask = padded([[5, 6], [7]], left=True)
    >>> ids.tolist(), mask.tolist()
    ([[5, 6], [0, 7]], [[True, True], [False, True]])
    """
    width = max((len(row) for row in rows), default=0)
    ids = np.zeros((len(rows), width), dtype)
    mask = np.zeros((len(rows), width), bool)
    for i, row in enumerate(rows):
        where = slice(width - len(row), width) if left else slice(0, len(row))
        ids[i, where], mask[i, where] = row, True
    return ids, mask


def positions(mask, xp=np):
    """(B, S) position of every column: the real tokens before it (0 at left padding)."""
    return xp.maximum(xp.cumsum(xp.asarray(mask, dtype=xp.int64), axis=1) - 1, 0)
