"""A GPT-style decoder-only language model (Radford et al. 2019), from our layers."""

from __future__ import annotations

import keras

from transformer_zoo.layers import LMHead, TokenAndPositionEmbedding, TransformerBlock
from transformer_zoo.layers.validation import (
    check_positive_number,
    check_rate,
)
from transformer_zoo.models.decoding_cache import DecodingCache
from transformer_zoo.models.model_inputs import (
    check_dimensions,
    check_step_batch,
    token_specs,
    unpack_inputs,
)
from transformer_zoo.models.zoo_model import ZooModel


@keras.saving.register_keras_serializable(package="transformer_zoo")
class DecoderOnly(ZooModel):
    """GPT-2's architecture: token + learned positions, Pre-LN causal blocks, a final
    LayerNorm, and an LM head tied to the token embedding.

    `gpt2_small` (vocab 50257, context 1024, D 768, 12 layers, 12 heads) has exactly
    124,439,808 parameters, as published.

    Args:
        vocabulary_size: V.
        num_layers: number of blocks.
        num_heads: H.
        hidden_dim: D.
        intermediate_dim: d_ff of the FFN.
        max_length: the context length (positions 0 .. max_length - 1).
        dropout: embedding, residual and attention dropout.
        activation: FFN activation; GPT-2 uses `"gelu_tanh"`.
        layer_norm_epsilon: LayerNorm epsilon (1e-5 in GPT-2).
        **kwargs: standard `keras.Model` arguments.

    Call arguments:
        inputs: `{"token_ids": (B, T), "padding_mask": (B, T)}` or a bare (B, T) id
            tensor of integers; a missing mask is `token_ids != 0`, another key is refused
            (`model_inputs.check_input_keys`).
        training: whether dropout is active.

    Returns:
        (B, T, V) next-token logits.

    Example:
    >>> model = DecoderOnly(100, num_layers=2, num_heads=2, hidden_dim=16,
    ...                     intermediate_dim=32, max_length=32)
    >>> tuple(model(keras.ops.ones((1, 5), "int32")).shape)
    (1, 5, 100)
    """

    def __init__(
        self,
        vocabulary_size: int,
        num_layers: int,
        num_heads: int,
        hidden_dim: int,
        intermediate_dim: int,
        max_length: int = 1024,
        dropout: float = 0.0,
        activation: str = "gelu_tanh",
        layer_norm_epsilon: float = 1e-5,
        **kwargs,
    ):
        super().__init__(**kwargs)
        vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim, max_length = (
            check_dimensions(
                vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim, max_length
            )
        )
        dropout = check_rate("dropout", dropout)
        layer_norm_epsilon = check_positive_number("layer_norm_epsilon", layer_norm_epsilon)
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.max_length = max_length
        self.dropout = dropout
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon

        self.embeddings = TokenAndPositionEmbedding(
            vocabulary_size,
            max_length,
            hidden_dim,
            position_mode="learned",
            scale_embeddings=False,
            dropout=dropout,
            dtype=self.dtype_policy,
            name="embeddings",
        )
        self.blocks = [
            TransformerBlock(
                num_heads,
                intermediate_dim,
                activation=activation,
                dropout=dropout,
                attention_dropout=dropout,
                norm_first=True,
                layer_norm_epsilon=layer_norm_epsilon,
                causal=True,
                dtype=self.dtype_policy,
                name=f"block_{i}",
            )
            for i in range(num_layers)
        ]
        # Pre-LN leaves the residual stream unnormalized, hence GPT-2's final LayerNorm.
        self.final_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="final_norm"
        )
        self.lm_head = LMHead(
            vocabulary_size, embedding=self.embeddings, dtype=self.dtype_policy, name="lm_head"
        )
        # Built now, so that parameter counts, weight names and loading need no call.
        self.embeddings.build((None, None))
        for block in self.blocks:
            block.build((None, None, hidden_dim))
        self.final_norm.build((None, None, hidden_dim))
        self.lm_head.build((None, None, hidden_dim))
        self.built = True

    @property
    def head_dim(self) -> int:
        return self.hidden_dim // self.num_heads

    def input_specs(self) -> dict[str, keras.InputSpec]:
        return token_specs("token_ids", "padding_mask")

    def call(self, inputs, training=None):
        token_ids, padding_mask = unpack_inputs(
            inputs, "token_ids", "padding_mask", self.input_specs()
        )
        x = self.embeddings(token_ids, training=training)  # (B, T, D)
        for block in self.blocks:
            x = block(x, padding_mask=padding_mask, training=training)
        return self.lm_head(self.final_norm(x))  # (B, T, V)

    def initial_cache(self, batch_size) -> DecodingCache:
        """The cache before the first token: per block an empty (B, H, 0, Dh) key and value."""
        return DecodingCache(tuple(block.initial_cache(batch_size) for block in self.blocks))

    def step(self, token_ids, cache: DecodingCache, padding_mask=None, positions=None):
        """One inference step that reads and extends the cache (the step interface shared
        with `EncoderDecoder`).

        Args:
            token_ids: (B, S) new tokens.
            cache: the `DecodingCache` of `initial_cache` or of the previous step.
            padding_mask: (B, P + S), False at padding (left-padded prompts).
            positions: (B, S) positions of the new tokens; default P .. P + S - 1.

        Returns:
            `(logits (B, S, V), DecodingCache)` whose keys and values are
            concat(past, new), (B, H, P + S, Dh).
        """
        check_step_batch(token_ids, cache, positions)
        start = cache.length if positions is None else 0
        x = self.embeddings(token_ids, start_index=start, positions=positions)  # (B, S, D)
        present = []
        for block, block_cache in zip(self.blocks, cache.blocks, strict=True):
            x, block_cache = block.call_with_cache(x, block_cache, padding_mask=padding_mask)
            present.append(block_cache)
        return self.lm_head(self.final_norm(x)), DecodingCache(tuple(present))

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "num_layers": self.num_layers,
                "num_heads": self.num_heads,
                "hidden_dim": self.hidden_dim,
                "intermediate_dim": self.intermediate_dim,
                "max_length": self.max_length,
                "dropout": self.dropout,
                "activation": self.activation,
                "layer_norm_epsilon": self.layer_norm_epsilon,
            }
        )
        return config
