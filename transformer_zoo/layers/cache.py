"""The named cache types of cached decoding (DESIGN.md: per layer, key and value of shape
(B, H, P, Dh); a step returns `concat(past, new)` along P)."""

from __future__ import annotations

from typing import Any, NamedTuple


class KeyValue(NamedTuple):
    """One attention layer's keys and values, each (B, H, P, Dh)."""

    key: Any
    value: Any


class BlockCache(NamedTuple):
    """What a `TransformerBlock` keeps between decoding steps.

    Attributes:
        self_attention: the keys and values of the tokens so far, (B, H, P, Dh); a step
            appends its own.
        cross_attention: a decoder block's keys and values of the encoder output,
            (B, H, S, Dh), projected once per source; None in a block without
            cross-attention.
    """

    self_attention: KeyValue
    cross_attention: KeyValue | None = None
