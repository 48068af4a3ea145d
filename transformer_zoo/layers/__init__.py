"""Reusable Transformer layers, written with `keras.ops` only."""

from transformer_zoo.layers.cache import BlockCache, KeyValue
from transformer_zoo.layers.feed_forward import FeedForward
from transformer_zoo.layers.lm_head import LMHead
from transformer_zoo.layers.masking import causal_mask, merge_masks
from transformer_zoo.layers.multi_head_attention import MultiHeadAttention
from transformer_zoo.layers.positional_encoding import PositionalEncoding
from transformer_zoo.layers.token_and_position_embedding import TokenAndPositionEmbedding
from transformer_zoo.layers.transformer_block import AttentionScores, TransformerBlock

__all__ = [
    "AttentionScores",
    "BlockCache",
    "FeedForward",
    "KeyValue",
    "LMHead",
    "MultiHeadAttention",
    "PositionalEncoding",
    "TokenAndPositionEmbedding",
    "TransformerBlock",
    "causal_mask",
    "merge_masks",
]
