"""Batches of texts that waste little work on padding, for inference.

A batch is padded to its longest member. On a graph that computes every position it
costs about `count × longest` token positions: sorting by length (as
sentence-transformers does) groups similar lengths, but fixed-size batches still pad a
whole batch to one outlier: a 256-token text among 15-token ones makes a batch of 32
cost 8,192 positions for about 720 real tokens. A padding-free graph (the fused
encoder, `export.onnx.packing.Packing`) pays for its real tokens only, except in
attention, which scores every (query, key) pair of a padded row: about
`count × longest² / ATTENTION_SPAN` positions more. `length_batches` chooses where to cut
the sorted order: the cuts that minimise that cost plus a fixed cost per batch (the
per-run overhead), with at most `batch_size` texts per batch.
`sorted_batches` is the plain plan (sorted, fixed-size) that decoding uses. numpy only.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# Per-batch overhead (session run, feeds, pooling) in token positions: a few ms, about
# the time of 16 tokens of MiniLM on one core. Only decides near-ties.
BATCH_COST = 16
# Attention's share, in token positions: a batch padded to L pays count·L²/ATTENTION_SPAN
# more than its projections and FFN. Measured on the padding-free MiniLM (width 384, 2
# threads): 16 rows of 16 real tokens took 35 ms padded to 16, 43 ms to 64, 78 ms to
# 128 and 160 ms to 256, which this term with 900 predicts within 20%.
ATTENTION_SPAN = 900


def sorted_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Index batches of at most `batch_size`, the shortest texts first: the plain plan for
    decoding, whose cost per batch (a whole search) is too large for `length_batches`'
    cuts to pay.

    Example:
    >>> sorted_batches([3, 256, 4, 5], batch_size=2)
    [[0, 2], [3, 1]]
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]


def length_batches(
    lengths: Sequence[int],
    batch_size: int,
    batch_cost: int = BATCH_COST,
    padding_free: bool = False,
) -> list[np.ndarray]:
    """Index batches, longest texts first, of at most `batch_size` texts each.

    Args:
        lengths: the token count of each text (what the model will see).
        batch_size: the most texts in one batch.
        batch_cost: the cost of one more batch, in padded token positions.
        padding_free: the graph computes only the real tokens (outside attention), so
            padding costs little and larger batches of mixed lengths pay.

    Returns:
        Arrays of indices into `lengths`; together they hold every index once.

    Example:
    >>> [b.tolist() for b in length_batches([3, 256, 4, 5], batch_size=4)]
    [[1], [3, 2, 0]]
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ValueError(f"`batch_size` must be a positive integer. Received: {batch_size!r}")
    if len(lengths) == 1:  # a lone text (the latency path): nothing to plan
        return [np.zeros(1, dtype=np.int64)]
    order = np.argsort(-lengths, kind="stable")
    longest = lengths[order]  # descending: a batch starting at i pads to longest[i]
    tokens = np.concatenate([[0], np.cumsum(longest)])  # tokens[j] - tokens[i]: batch i..j
    n = len(order)
    # cost[i]: the least cost of batching order[i:]; size[i]: the first batch's size.
    cost = np.zeros(n + 1)
    size = np.zeros(n, dtype=np.int64)
    for i in range(n - 1, -1, -1):
        counts = np.arange(1, min(batch_size, n - i) + 1)
        padded = longest[i] * counts
        dense = tokens[i + counts] - tokens[i] if padding_free else padded
        totals = dense + padded * longest[i] / ATTENTION_SPAN + batch_cost + cost[i + counts]
        best = int(np.flatnonzero(totals <= totals.min() + 1e-6)[-1])  # ties: the larger batch
        size[i], cost[i] = counts[best], totals[best]
    batches, i = [], 0
    while i < n:
        batches.append(order[i : i + size[i]])
        i += size[i]
    return batches
