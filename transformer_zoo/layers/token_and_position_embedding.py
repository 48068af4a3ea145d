"""Token embeddings plus position encodings (paper §3.4-3.5), with optional segments."""

from __future__ import annotations

import math

import keras
import numpy as np
from keras import ops

from transformer_zoo.layers.initializers import clone_initializer
from transformer_zoo.layers.positional_encoding import (
    LAYOUTS,
    MODES,
    PositionalEncoding,
    check_per_token,
)
from transformer_zoo.layers.validation import (
    check_flag,
    check_rate,
    check_sinusoidal_width,
    check_size,
    check_sizes,
    check_token_ids,
)


@keras.saving.register_keras_serializable(package="transformer_zoo")
class TokenAndPositionEmbedding(keras.layers.Layer):
    """Embeds token ids and adds position (and optionally segment) encodings.

    The paper multiplies the token embeddings by √D before adding the sinusoidal
    encoding (§3.4); BERT and GPT-2 do not scale and learn their positions
    (`scale_embeddings=False, position_mode="learned"`).

    Args:
        vocabulary_size: V, the number of token ids; ids must lie in [0, V).
        max_length: the longest sequence accepted.
        embedding_dim: D, the model width.
        position_mode: `"sinusoidal"` (paper) or `"learned"`.
        scale_embeddings: multiply token embeddings by √D (paper §3.4).
        type_vocabulary_size: number of segment (token type) ids; 0 for none.
        dropout: dropout rate applied to the sum (paper §5.4: P_drop = 0.1).
        embeddings_initializer: initializer of the token, position and segment tables.
        position_layout: the sinusoidal table's `"interleaved"` or `"halves"` layout
            (`PositionalEncoding`).
        mask_zero: treat id 0 as padding: the output then carries a (B, T) Keras mask,
            True at real tokens, which `MultiHeadAttention` and `TransformerBlock` read
            as their `padding_mask` (as after `keras.layers.Embedding(mask_zero=True)`).
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        token_ids: (B, T) integer ids.
        segment_ids: optional (B, T) segment ids (needs `type_vocabulary_size > 0`);
            when omitted, every token is in segment 0 (as in BERT).
        start_index: position of the first token (P in cached decoding).
        positions: optional (B, T) explicit positions; overrides `start_index`.
        training: whether dropout is active.

    Returns:
        (B, T, D) embeddings; with `mask_zero`, they carry the mask `token_ids != 0`.

    Example:
    >>> emb = TokenAndPositionEmbedding(vocabulary_size=100, max_length=32, embedding_dim=16)
    >>> tuple(emb(keras.ops.ones((2, 5), "int32")).shape)
    (2, 5, 16)
    """

    def __init__(
        self,
        vocabulary_size: int,
        max_length: int,
        embedding_dim: int,
        position_mode: str = "sinusoidal",
        scale_embeddings: bool = True,
        type_vocabulary_size: int = 0,
        dropout: float = 0.0,
        embeddings_initializer: str | keras.initializers.Initializer = "glorot_uniform",
        position_layout: str = "interleaved",
        mask_zero: bool = False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        vocabulary_size, max_length, embedding_dim = check_sizes(
            vocabulary_size=vocabulary_size, max_length=max_length, embedding_dim=embedding_dim
        )
        if position_mode not in MODES:
            raise ValueError(
                f"`position_mode` must be one of {MODES}. Received: position_mode={position_mode!r}"
            )
        if position_mode == "sinusoidal":
            # Refused here, not at the first call, where only the input shape is known.
            check_sinusoidal_width(embedding_dim, "embedding_dim")
        if position_layout not in LAYOUTS:
            # Checked here: `PositionalEncoding` names it `layout`.
            raise ValueError(
                f"`position_layout` must be one of {LAYOUTS}. "
                f"Received: position_layout={position_layout!r}"
            )
        self.vocabulary_size = vocabulary_size
        self.max_length = max_length
        self.embedding_dim = embedding_dim
        self.position_mode = position_mode
        self.scale_embeddings = check_flag("scale_embeddings", scale_embeddings)
        self.type_vocabulary_size = check_size(
            "type_vocabulary_size", type_vocabulary_size, minimum=0
        )
        self.dropout = check_rate("dropout", dropout)
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        self.position_layout = position_layout
        self.mask_zero = check_flag("mask_zero", mask_zero)
        self.supports_masking = self.mask_zero

        self.token_embedding = keras.layers.Embedding(
            vocabulary_size,
            embedding_dim,
            embeddings_initializer=clone_initializer(self.embeddings_initializer),
            dtype=self.dtype_policy,
            name="token_embedding",
        )
        self.position_encoding = PositionalEncoding(
            max_length,
            mode=position_mode,
            initializer=clone_initializer(self.embeddings_initializer),
            layout=position_layout,
            dtype=self.dtype_policy,
            name="position_encoding",
        )
        self.segment_embedding = None
        if type_vocabulary_size:
            self.segment_embedding = keras.layers.Embedding(
                type_vocabulary_size,
                embedding_dim,
                embeddings_initializer=clone_initializer(self.embeddings_initializer),
                dtype=self.dtype_policy,
                name="segment_embedding",
            )
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy)

    def build(self, token_ids_shape, segment_ids_shape=None):
        _check_token_ids_shape(token_ids_shape)
        self.token_embedding.build(token_ids_shape)
        self.position_encoding.build(tuple(token_ids_shape) + (self.embedding_dim,))
        if self.segment_embedding is not None:
            self.segment_embedding.build(token_ids_shape)
        self.built = True

    @property
    def embeddings(self):
        """The (V, D) token matrix; a tied `LMHead` projects with its transpose. Once
        `model.quantize` has quantized it, its raw integers (the head dequantizes)."""
        return self.token_embedding.embeddings

    def call(self, token_ids, segment_ids=None, start_index=0, positions=None, training=None):
        _check_token_ids_shape(token_ids.shape)
        check_token_ids(token_ids, self.vocabulary_size)
        x = self._look_up(self.token_embedding, token_ids)  # (B, T, D)
        if self.scale_embeddings:
            x = x * ops.cast(math.sqrt(self.embedding_dim), x.dtype)
        # Not broadcast to the batch first (`PositionalEncoding.call`): `+` does, and the
        # exported graphs need no Shape and Expand nodes for it.
        x = x + self.position_encoding.encodings(x, start_index, positions)
        if segment_ids is not None:
            if self.segment_embedding is None:
                raise ValueError(
                    "`segment_ids` were given but the layer has no segment embedding. "
                    "Set `type_vocabulary_size` > 0."
                )
            # Where the shapes are known: another length failed in TensorFlow's add.
            check_per_token(
                "segment_ids", np.shape(segment_ids), token_ids.shape, "like `token_ids`"
            )
            check_token_ids(
                segment_ids,
                self.type_vocabulary_size,
                "segment_ids",
                "`type_vocabulary_size`",
                "segment ids",
            )
            x = x + self._look_up(self.segment_embedding, segment_ids)
        elif self.segment_embedding is not None:
            # BERT's default: every token is in segment 0. Looked up, not read from
            # `embeddings`, which `model.quantize` turns into raw integers.
            x = x + self._look_up(self.segment_embedding, ops.zeros((1, 1), "int32"))
        return self.dropout_layer(x, training=training)

    def _look_up(self, table, ids):
        """`table(ids)` in the compute dtype: an Embedding that `model.quantize` made int8
        or int4 returns float32 under a mixed policy (its float32 scales promote it)."""
        return ops.cast(table(ids), self.compute_dtype)

    def compute_mask(self, token_ids, mask=None):
        if not self.mask_zero:
            return None
        return ops.not_equal(token_ids, 0)  # (B, T), True = a real token

    def compute_output_shape(self, token_ids_shape, segment_ids_shape=None):
        _check_token_ids_shape(token_ids_shape)
        if segment_ids_shape is not None:
            check_per_token("segment_ids", segment_ids_shape, token_ids_shape, "like `token_ids`")
        return tuple(token_ids_shape) + (self.embedding_dim,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "max_length": self.max_length,
                "embedding_dim": self.embedding_dim,
                "position_mode": self.position_mode,
                "scale_embeddings": self.scale_embeddings,
                "type_vocabulary_size": self.type_vocabulary_size,
                "dropout": self.dropout,
                "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
                "position_layout": self.position_layout,
                "mask_zero": self.mask_zero,
            }
        )
        return config


def _check_token_ids_shape(shape) -> None:
    """Refuses ids that are not (B, T): the lookup would embed any rank without a word."""
    if len(shape) != 2:
        raise ValueError(
            "`token_ids` must be (B, T) integer ids, of rank 2. "
            f"Received: token_ids.shape={tuple(shape)}"
        )
