"""`DecodingCache`: what the generative families carry from one decoding step to the next."""

from __future__ import annotations

from typing import Any, NamedTuple

from transformer_zoo.layers import BlockCache


class DecodingCache(NamedTuple):
    """The cache of `DecoderOnly.step` and `EncoderDecoder.step`.

    Attributes:
        blocks: one `BlockCache` per decoder block: the (B, H, P, Dh) self-attention keys
            and values of the tokens so far and, for an encoder-decoder, the (B, H, S, Dh)
            cross-attention keys and values of the source, projected once.
        encoder_padding_mask: an encoder-decoder's (B, S) source mask, False at padding;
            None for a decoder-only model.
    """

    blocks: tuple[BlockCache, ...]
    encoder_padding_mask: Any = None

    @property
    def length(self):
        """P, the number of tokens the cache holds (a scalar tensor)."""
        from keras import ops

        return ops.shape(self.blocks[0].self_attention.key)[2]
