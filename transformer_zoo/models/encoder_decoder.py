"""The paper's encoder-decoder Transformer for translation (Vaswani et al. 2017, Figure 1)."""

from __future__ import annotations

import keras
from keras import ops

from transformer_zoo.layers import LMHead, TokenAndPositionEmbedding, TransformerBlock
from transformer_zoo.layers.validation import (
    check_flag,
    check_positive_number,
    check_rate,
    check_sinusoidal_width,
    check_size,
)
from transformer_zoo.models.decoding_cache import DecodingCache
from transformer_zoo.models.model_inputs import (
    check_choice,
    check_dimensions,
    check_step_batch,
    token_specs,
    unpack_inputs,
)
from transformer_zoo.models.zoo_model import ZooModel

TIE_WEIGHTS = ("none", "decoder", "all")


@keras.saving.register_keras_serializable(package="transformer_zoo")
class EncoderDecoder(ZooModel):
    """N Post-LN encoder blocks, N decoder blocks (masked self-attention, cross-attention,
    FFN), and an LM head; sinusoidal positions and embeddings scaled by √D (§3.4-3.5).

    Weight tying (`tie_weights`):
    - `"none"`: separate source and target embeddings and an untied output kernel.
    - `"decoder"`: the LM head reuses the target embedding.
    - `"all"`: the paper's three-way tying (§3.4): one embedding for source, target and
      the LM head; needs a shared vocabulary (`target_vocabulary_size` None or equal).

    With a shared 37,000-token vocabulary and `"all"`, `transformer_base` has 63.1M
    parameters and `transformer_big` 214.2M (paper: 65M and 213M).

    Args:
        vocabulary_size: source vocabulary size (the shared one when
            `target_vocabulary_size` is None).
        target_vocabulary_size: V of the target; None shares the source vocabulary.
        num_layers: N, the number of encoder blocks and of decoder blocks.
        num_heads: H.
        hidden_dim: D (d_model).
        intermediate_dim: d_ff.
        max_length: the longest source or target sequence; at least 2.
        dropout: embedding, residual and attention dropout (P_drop, §5.4).
        tie_weights: `"none"`, `"decoder"` or `"all"`, see above.
        activation: FFN activation (`"relu"` in the paper, `"swish"` in Marian).
        layer_norm_epsilon: LayerNorm epsilon.
        scale_embeddings: multiply token embeddings by √D (§3.4).
        position_layout: the sinusoidal table's sine and cosine dimensions,
            `"interleaved"` (paper §3.5) or `"halves"` (Marian).
        output_bias: add a (V,) bias to the logits (Marian's `final_logits_bias`).
        **kwargs: standard `keras.Model` arguments.

    Call arguments:
        inputs: `{"encoder_token_ids": (B, S), "encoder_padding_mask": (B, S),
            "decoder_token_ids": (B, T), "decoder_padding_mask": (B, T)}`; a missing mask
            is `token_ids != 0`, another key is refused, and so is one id tensor alone
            (it would be read as both the source and the target).
        training: whether dropout is active.

    Returns:
        (B, T, V) logits of the next target token.

    Example:
    >>> model = EncoderDecoder(100, num_layers=1, num_heads=2, hidden_dim=16,
    ...                        intermediate_dim=32, max_length=32)
    >>> ids = keras.ops.ones((2, 5), "int32")
    >>> tuple(model({"encoder_token_ids": ids, "decoder_token_ids": ids}).shape)
    (2, 5, 100)
    """

    def __init__(
        self,
        vocabulary_size: int,
        num_layers: int,
        num_heads: int,
        hidden_dim: int,
        intermediate_dim: int,
        max_length: int = 1024,
        target_vocabulary_size: int | None = None,
        dropout: float = 0.0,
        tie_weights: str = "decoder",
        activation: str = "relu",
        layer_norm_epsilon: float = 1e-5,
        scale_embeddings: bool = True,
        position_layout: str = "interleaved",
        output_bias: bool = False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim, max_length = (
            check_dimensions(
                vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim, max_length
            )
        )
        if max_length < 2:  # the training pipeline's minimum: else a source reads as `[eos]`
            raise ValueError(
                "`max_length` must be an integer ≥ 2, room for a source's text and its "
                f"`[eos]`. Received: max_length={max_length}"
            )
        check_sinusoidal_width(hidden_dim, "hidden_dim")
        check_choice("tie_weights", tie_weights, TIE_WEIGHTS)
        if target_vocabulary_size is not None:
            # 0 would otherwise read as None (a shared vocabulary) in `output_vocabulary_size`.
            target_vocabulary_size = check_size("target_vocabulary_size", target_vocabulary_size)
        dropout = check_rate("dropout", dropout)
        layer_norm_epsilon = check_positive_number("layer_norm_epsilon", layer_norm_epsilon)
        scale_embeddings = check_flag("scale_embeddings", scale_embeddings)
        output_bias = check_flag("output_bias", output_bias)
        if tie_weights == "all" and target_vocabulary_size not in (None, vocabulary_size):
            raise ValueError(
                "Three-way tying needs one vocabulary for source and target. Received: "
                f"tie_weights='all', vocabulary_size={vocabulary_size}, "
                f"target_vocabulary_size={target_vocabulary_size}"
            )
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.max_length = max_length
        self.target_vocabulary_size = target_vocabulary_size
        self.dropout = dropout
        self.tie_weights = tie_weights
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.scale_embeddings = scale_embeddings
        self.position_layout = position_layout
        self.output_bias = output_bias

        def embedding(vocab, name):
            return TokenAndPositionEmbedding(
                vocab,
                max_length,
                hidden_dim,
                scale_embeddings=scale_embeddings,
                position_layout=position_layout,
                dropout=dropout,
                dtype=self.dtype_policy,
                name=name,
            )

        def blocks(prefix, decoder):
            return [
                TransformerBlock(
                    num_heads,
                    intermediate_dim,
                    activation=activation,
                    dropout=dropout,
                    attention_dropout=dropout,
                    layer_norm_epsilon=layer_norm_epsilon,
                    causal=decoder,
                    cross_attention=decoder,
                    dtype=self.dtype_policy,
                    name=f"{prefix}_{i}",
                )
                for i in range(num_layers)
            ]

        self.encoder_embeddings = embedding(vocabulary_size, "encoder_embeddings")
        if tie_weights == "all":
            self.decoder_embeddings = self.encoder_embeddings
        else:
            self.decoder_embeddings = embedding(self.output_vocabulary_size, "decoder_embeddings")
        self.encoder_blocks = blocks("encoder_block", decoder=False)
        self.decoder_blocks = blocks("decoder_block", decoder=True)
        self.lm_head = LMHead(
            self.output_vocabulary_size,
            embedding=None if tie_weights == "none" else self.decoder_embeddings,
            use_bias=output_bias,
            dtype=self.dtype_policy,
            name="lm_head",
        )
        shape = (None, None, hidden_dim)
        self.encoder_embeddings.build((None, None))
        if self.decoder_embeddings is not self.encoder_embeddings:
            self.decoder_embeddings.build((None, None))
        for block in self.encoder_blocks:
            block.build(shape)
        for block in self.decoder_blocks:
            block.build(shape, shape)
        self.lm_head.build(shape)
        self.built = True

    @property
    def output_vocabulary_size(self) -> int:
        """The target vocabulary size V."""
        if self.target_vocabulary_size is None:
            return self.vocabulary_size
        return self.target_vocabulary_size

    @property
    def head_dim(self) -> int:
        return self.hidden_dim // self.num_heads

    def input_specs(self) -> dict[str, keras.InputSpec]:
        return token_specs(
            "encoder_token_ids", "encoder_padding_mask", "decoder_token_ids", "decoder_padding_mask"
        )

    def call(self, inputs, training=None):
        specs = self.input_specs()
        source, source_mask = unpack_inputs(
            inputs, "encoder_token_ids", "encoder_padding_mask", specs, bare_ids=False
        )
        target, target_mask = unpack_inputs(
            inputs, "decoder_token_ids", "decoder_padding_mask", specs, bare_ids=False
        )
        memory = self.encode(source, source_mask, training=training)
        x = self.decoder_embeddings(target, training=training)  # (B, T, D)
        for block in self.decoder_blocks:
            x = block(
                x,
                context=memory,
                padding_mask=target_mask,
                context_padding_mask=source_mask,
                training=training,
            )
        return self.lm_head(x)  # (B, T, V)

    def encode(self, encoder_token_ids, encoder_padding_mask=None, training=None):
        """The encoder: (B, S) ids → (B, S, D) output; the mask defaults to ids != 0."""
        if encoder_padding_mask is None:
            encoder_padding_mask = ops.not_equal(encoder_token_ids, 0)
        x = self.encoder_embeddings(encoder_token_ids, training=training)
        for block in self.encoder_blocks:
            x = block(x, padding_mask=encoder_padding_mask, training=training)
        return x

    def initial_cache(self, encoder_output, encoder_padding_mask) -> DecodingCache:
        """The cache before the first target token, for the (B, S, D) output of `encode`:
        per decoder block an empty (B, H, 0, Dh) self-attention part and the (B, H, S, Dh)
        cross-attention keys and values of the encoder output, projected once here; and
        the (B, S) source mask."""
        batch = ops.shape(encoder_output)[0]
        blocks = tuple(block.initial_cache(batch, encoder_output) for block in self.decoder_blocks)
        return DecodingCache(blocks, encoder_padding_mask)

    def step(self, token_ids, cache: DecodingCache, padding_mask=None, positions=None):
        """One decoder step on the cached self- and cross-attention keys and values (the
        step interface shared with `DecoderOnly`).

        Args:
            token_ids: (B, T) new target tokens.
            cache: the `DecodingCache` of `initial_cache` or of the previous step.
            padding_mask: (B, P + T), False at target padding.
            positions: (B, T) target positions; default P .. P + T - 1.

        Returns:
            `(logits (B, T, V), DecodingCache)` with the self-attention part P + T long.
        """
        check_step_batch(token_ids, cache, positions)
        start = cache.length if positions is None else 0
        x = self.decoder_embeddings(token_ids, start_index=start, positions=positions)
        present = []
        for block, block_cache in zip(self.decoder_blocks, cache.blocks, strict=True):
            x, block_cache = block.call_with_cache(
                x,
                block_cache,
                padding_mask=padding_mask,
                context_padding_mask=cache.encoder_padding_mask,
            )
            present.append(block_cache)
        return self.lm_head(x), DecodingCache(tuple(present), cache.encoder_padding_mask)

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
                "target_vocabulary_size": self.target_vocabulary_size,
                "dropout": self.dropout,
                "tie_weights": self.tie_weights,
                "activation": self.activation,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "scale_embeddings": self.scale_embeddings,
                "position_layout": self.position_layout,
                "output_bias": self.output_bias,
            }
        )
        return config
