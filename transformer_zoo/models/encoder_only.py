"""A BERT-style bidirectional encoder (Devlin et al. 2019), from our layers."""

from __future__ import annotations

from collections.abc import Mapping

import keras
from keras import ops

from transformer_zoo.layers import TokenAndPositionEmbedding, TransformerBlock
from transformer_zoo.layers.validation import (
    check_flag,
    check_positive_number,
    check_rate,
    check_size,
)
from transformer_zoo.models.model_inputs import check_dimensions, token_specs, unpack_inputs
from transformer_zoo.models.zoo_model import ZooModel


@keras.saving.register_keras_serializable(package="transformer_zoo")
class EncoderOnly(ZooModel):
    """BERT's encoder: token + learned position + segment embeddings, LayerNorm and
    dropout, Post-LN blocks with exact GELU, and an optional pooler.

    Sublayer names follow BERT's checkpoint layout (`embeddings`, `embeddings_norm`,
    `blocks[i]`, `pooler_dense`) so that Hugging Face weights map onto them one to one.
    `bert_base` has exactly 109,482,240 parameters and `minilm_l6` 22,713,216.

    Args:
        vocabulary_size: V.
        num_layers: number of blocks.
        num_heads: H.
        hidden_dim: D.
        intermediate_dim: d_ff.
        max_length: number of learned positions (512 in BERT); at least 2, a text's
            `[CLS]` and `[SEP]` (a text pair needs 3).
        type_vocabulary_size: number of segment ids (2 in BERT); 1 (RoBERTa's) reads a
            text pair's second text in segment 0 too (`text.formats.pair_row`); 0 for none.
        dropout: embedding, residual and attention dropout.
        layer_norm_epsilon: LayerNorm epsilon (1e-12 in BERT).
        use_pooler: add BERT's pooler, tanh(W h_[CLS] + b).
        activation: FFN activation; BERT checkpoints use exact `"gelu"`.
        **kwargs: standard `keras.Model` arguments.

    Call arguments:
        inputs: `{"token_ids": (B, T), "padding_mask": (B, T), "segment_ids": (B, T)}`;
            the mask defaults to `token_ids != 0`, segments to 0; another key is refused
            (`model_inputs.check_input_keys`). A bare id tensor works too.
        training: whether dropout is active.

    Returns:
        `{"sequence_output": (B, T, D), "pooled_output": (B, D)}`; `pooled_output` only
        with `use_pooler`.

    Example:
    >>> model = EncoderOnly(100, num_layers=1, num_heads=2, hidden_dim=16,
    ...                     intermediate_dim=32, max_length=32)
    >>> tuple(model(keras.ops.ones((2, 5), "int32"))["pooled_output"].shape)
    (2, 16)
    """

    def __init__(
        self,
        vocabulary_size: int,
        num_layers: int,
        num_heads: int,
        hidden_dim: int,
        intermediate_dim: int,
        max_length: int = 512,
        type_vocabulary_size: int = 2,
        dropout: float = 0.0,
        layer_norm_epsilon: float = 1e-12,
        use_pooler: bool = True,
        activation: str = "gelu",
        **kwargs,
    ):
        super().__init__(**kwargs)
        vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim, max_length = (
            check_dimensions(
                vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim, max_length
            )
        )
        if max_length < 2:  # a served text was cut to nothing, then refused deep in formats.py
            raise ValueError(
                "`max_length` must be an integer ≥ 2, room for a text's `[CLS]` and `[SEP]` "
                f"(3 for text pairs). Received: max_length={max_length}"
            )
        type_vocabulary_size = check_size("type_vocabulary_size", type_vocabulary_size, minimum=0)
        dropout = check_rate("dropout", dropout)
        layer_norm_epsilon = check_positive_number("layer_norm_epsilon", layer_norm_epsilon)
        use_pooler = check_flag("use_pooler", use_pooler)
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.max_length = max_length
        self.type_vocabulary_size = type_vocabulary_size
        self.dropout = dropout
        self.layer_norm_epsilon = layer_norm_epsilon
        self.use_pooler = use_pooler
        self.activation = activation

        # BERT normalizes the embedding sum before dropout, so the embedding layer's own
        # dropout (applied to the sum) stays off and the dropout follows the LayerNorm.
        self.embeddings = TokenAndPositionEmbedding(
            vocabulary_size,
            max_length,
            hidden_dim,
            position_mode="learned",
            scale_embeddings=False,
            type_vocabulary_size=type_vocabulary_size,
            dtype=self.dtype_policy,
            name="embeddings",
        )
        self.embeddings_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="embeddings_norm"
        )
        self.embeddings_dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy)
        self.blocks = [
            TransformerBlock(
                num_heads,
                intermediate_dim,
                activation=activation,
                dropout=dropout,
                attention_dropout=dropout,
                norm_first=False,
                layer_norm_epsilon=layer_norm_epsilon,
                dtype=self.dtype_policy,
                name=f"block_{i}",
            )
            for i in range(num_layers)
        ]
        self.pooler_dense = None
        if use_pooler:
            self.pooler_dense = keras.layers.Dense(
                hidden_dim, activation="tanh", dtype=self.dtype_policy, name="pooler_dense"
            )
        self.embeddings.build((None, None))
        self.embeddings_norm.build((None, None, hidden_dim))
        for block in self.blocks:
            block.build((None, None, hidden_dim))
        if self.pooler_dense is not None:
            self.pooler_dense.build((None, hidden_dim))
        self.built = True

    def input_specs(self) -> dict[str, keras.InputSpec]:
        segments = ("segment_ids",) if self.type_vocabulary_size else ()
        return token_specs("token_ids", "padding_mask", *segments)

    def call(self, inputs, training=None):
        token_ids, padding_mask = unpack_inputs(
            inputs, "token_ids", "padding_mask", self.input_specs()
        )
        segment_ids = inputs.get("segment_ids") if isinstance(inputs, Mapping) else None
        x = self.embeddings(token_ids, segment_ids=segment_ids, training=training)
        x = self.embeddings_dropout(self.embeddings_norm(x), training=training)  # (B, T, D)
        for block in self.blocks:
            x = block(x, padding_mask=padding_mask, training=training)
        outputs = {"sequence_output": x}
        if self.pooler_dense is not None:
            outputs["pooled_output"] = self.pooler_dense(x[:, 0])  # (B, D), the [CLS] token
        return outputs

    def embed(self, inputs, normalize: bool = True):
        """Sentence embeddings: the mean of `sequence_output` over non-padding tokens,
        then L2 normalisation (the sentence-transformers convention).

        Args:
            inputs: as for `call`.
            normalize: divide each embedding by its L2 norm.

        Returns:
            (B, D) float32 embeddings (`mean_pool`); a fully padded row gives zeros.
        """
        _, padding_mask = unpack_inputs(inputs, "token_ids", "padding_mask", self.input_specs())
        sequence = self(inputs)["sequence_output"]  # (B, T, D)
        return mean_pool(sequence, padding_mask, normalize)

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
                "type_vocabulary_size": self.type_vocabulary_size,
                "dropout": self.dropout,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "use_pooler": self.use_pooler,
                "activation": self.activation,
            }
        )
        return config


def mean_pool(sequence, padding_mask, normalize: bool = True):
    """Masked mean over T of a (B, T, D) sequence, optionally L2-normalised: (B, D) float32.

    It pools in float32 whatever the sequence's dtype, and returns float32, as Keras'
    mixed precision keeps a model's outputs: in float16 the clamps below round to 0, so a
    fully padded row gave 0 / 0 = NaN, and a sum over a few hundred tokens can overflow.
    """
    sequence = ops.cast(sequence, "float32")
    weights = ops.cast(ops.expand_dims(padding_mask, -1), "float32")  # (B, T, 1)
    total = ops.sum(sequence * weights, axis=1)  # (B, D)
    # sentence-transformers clamps the token count at 1e-9 and the norm at 1e-12.
    pooled = total / ops.maximum(ops.sum(weights, axis=1), 1e-9)
    if normalize:
        norm = ops.sqrt(ops.sum(ops.square(pooled), axis=-1, keepdims=True))
        pooled = pooled / ops.maximum(norm, 1e-12)
    return pooled
