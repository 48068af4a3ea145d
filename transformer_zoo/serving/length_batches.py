"""Batches of texts that waste little work on padding, for encoder-only inference.

A batch is padded to its longest member, so it costs about `count × longest` token
positions. Sorting by length (as sentence-transformers does) groups similar lengths, but
fixed-size batches still pad a whole batch to one outlier: a 256-token text among
15-token ones makes a batch of 32 cost 8,192 positions for about 720 real tokens.
`length_batches` therefore also chooses where to cut the sorted order: the cuts that
minimise the padded positions plus a fixed cost per batch (the per-run overhead), with
at most `batch_size` texts per batch. numpy only.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# Per-batch overhead (session run, feeds, pooling) in token positions: a few ms, about
# the time of 16 tokens of MiniLM on one core. Only decides near-ties.
BATCH_COST = 16


def length_batches(
    lengths: Sequence[int], batch_size: int, batch_cost: int = BATCH_COST
) -> list[np.ndarray]:
    """Index batches, longest texts first, of at most `batch_size` texts each.

    Args:
        lengths: the token count of each text (what the model will see).
        batch_size: the most texts in one batch.
        batch_cost: the cost of one more batch, in padded token positions.

    Returns:
        Arrays of indices into `lengths`; together they hold every index once.

    Example:
    >>> [b.tolist() for b in length_batches([3, 256, 4, 5], batch_size=4)]
    [[1], [3, 2, 0]]
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ValueError(f"`batch_size` must be a positive integer. Received: {batch_size!r}")
    order = np.argsort(-lengths, kind="stable")
    longest = lengths[order]  # descending: a batch starting at i pads to longest[i]
    n = len(order)
    # cost[i]: the least cost of batching order[i:]; size[i]: the first batch's size.
    cost = np.zeros(n + 1)
    size = np.zeros(n, dtype=np.int64)
    for i in range(n - 1, -1, -1):
        counts = np.arange(1, min(batch_size, n - i) + 1)
        totals = longest[i] * counts + batch_cost + cost[i + counts]
        best = len(totals) - 1 - int(np.argmin(totals[::-1]))  # ties: the larger batch
        size[i], cost[i] = counts[best], totals[best]
    batches, i = [], 0
    while i < n:
        batches.append(order[i : i + size[i]])
        i += size[i]
    return batches
