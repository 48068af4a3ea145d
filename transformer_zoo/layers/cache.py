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
        context_padding_mask: the (B, S) Keras mask the encoder output carried into
            `initial_cache` (False at padding), which a step reads where it is given no
            mask of its own, as the block's plain call reads the context's; None when it
            carried none.
        padding_mask: the (B, P) padding mask of the tokens so far (False at padding),
            kept once a step read its inputs' Keras mask (given no `padding_mask`), so
            that the next steps mask the past as one plain call over the whole sequence
            would; None until then, and whenever the steps get explicit masks only.
    """

    self_attention: KeyValue
    cross_attention: KeyValue | None = None
    context_padding_mask: Any = None
    padding_mask: Any = None
