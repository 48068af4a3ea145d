"""Sinusoidal (paper §3.5) or learned position encodings."""

from __future__ import annotations

import math

import keras
import numpy as np
from keras import ops

from transformer_zoo.layers.initializers import clone_initializer
from transformer_zoo.layers.validation import (
    check_sequence_length,
    check_sinusoidal_width,
    check_size,
)

MODES = ("sinusoidal", "learned")
# Where the sinusoidal table puts sine and cosine: the paper interleaves them (sin, cos,
# sin, ...); Marian and fairseq put all sines first, then all cosines.
LAYOUTS = ("interleaved", "halves")


@keras.saving.register_keras_serializable(package="transformer_zoo")
class PositionalEncoding(keras.layers.Layer):
    """Position encodings to add to token embeddings.

    `mode="sinusoidal"` is the paper's fixed table (Vaswani et al. 2017, §3.5):

        PE(pos, 2i)   = sin(pos / 10000^(2i / D))
        PE(pos, 2i+1) = cos(pos / 10000^(2i / D))

    even dimensions carry the sine, odd dimensions the cosine (`layout="interleaved"`).
    `layout="halves"` puts the same D/2 sines in dimensions 0 .. D/2 - 1 and the cosines
    after them, as Marian (Hugging Face `MarianSinusoidalPositionalEmbedding`) and fairseq
    do. `mode="learned"` is a trainable (max_length, D) table, as in BERT and GPT-2.

    Args:
        max_length: the longest sequence (counting `start_index`) the layer accepts.
        mode: `"sinusoidal"` (paper) or `"learned"` (BERT, GPT-2).
        initializer: initializer of the learned table.
        layout: `"interleaved"` (paper) or `"halves"` (Marian) sine and cosine dimensions.
        **kwargs: standard `keras.layers.Layer` arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: (B, T, D) embeddings; only their shape is used.
        start_index: integer or scalar integer tensor; the position of the first token.
            In cached decoding this is the past length P.
        positions: optional (B, T) integer positions; overrides `start_index`
            (left-padded batches in generation).

    Returns:
        (B, T, D) position encodings, the shape of `inputs` (the same rows for every
        example unless `positions` differ), in the layer's compute dtype, as keras-hub's
        `PositionEmbedding` returns them. They carry the Keras mask of
        `inputs` on (`keras.layers.Embedding(mask_zero=True)`'s padding mask), so that in
        a functional model `keras.layers.Add()([x, pe])` keeps it: Keras' `Add` ORs its
        inputs' masks, and drops them where one input has none. `x + pe` and
        `keras.ops.add(x, pe)` drop it (Keras 3's operations carry no masks): after them,
        pass the blocks' `padding_mask` yourself, or use
        `TokenAndPositionEmbedding(mask_zero=True)`, which adds and keeps the mask.

    Example:
    >>> pe = PositionalEncoding(max_length=64)
    >>> tuple(pe(keras.ops.zeros((2, 10, 16))).shape)
    (2, 10, 16)
    >>> token_ids = keras.Input((None,), dtype="int32")
    >>> x = keras.layers.Embedding(100, 16, mask_zero=True)(token_ids)
    >>> x = keras.layers.Add()([x, PositionalEncoding(max_length=64)(x)])  # mask kept

    References:
        Vaswani et al., "Attention Is All You Need", 2017, §3.5.
    """

    def __init__(
        self,
        max_length: int,
        mode: str = "sinusoidal",
        initializer: str | keras.initializers.Initializer = "glorot_uniform",
        layout: str = "interleaved",
        **kwargs,
    ):
        super().__init__(**kwargs)
        max_length = check_size("max_length", max_length)
        if mode not in MODES:
            raise ValueError(f"`mode` must be one of {MODES}. Received: mode={mode!r}")
        if layout not in LAYOUTS:
            raise ValueError(f"`layout` must be one of {LAYOUTS}. Received: layout={layout!r}")
        self.max_length = max_length
        self.mode = mode
        self.layout = layout
        self.initializer = keras.initializers.get(initializer)
        # A masked input (`Embedding(mask_zero=True)`) is fine: only its shape is read.
        self.supports_masking = True

    def compute_mask(self, inputs, mask=None):
        """The mask of `inputs`, passed on: `keras.layers.Add()([x, pe])` keeps a mask
        only where each of its inputs carries one (returning None dropped the padding
        mask of every masked embedding the encodings were added to)."""
        return mask

    def build(self, inputs_shape):
        _check_embeddings(inputs_shape)
        d_model = inputs_shape[-1]
        if self.mode == "learned":
            self.position_embeddings = self.add_weight(
                name="position_embeddings",
                shape=(self.max_length, d_model),
                initializer=clone_initializer(self.initializer),
            )
        else:
            check_sinusoidal_width(d_model, "inputs.shape[-1]")
        self.built = True

    def call(self, inputs, start_index=0, positions=None):
        # Broadcast to the shape of `inputs`: a (1, T, D) table made the documented
        # `keras.layers.Add()([x, pe])` a batch of 1 in the model's shapes, and refused
        # inputs of a fixed batch ("Cannot merge tensors with different batch sizes").
        encoding = self.encodings(inputs, start_index, positions)
        return ops.broadcast_to(encoding, ops.shape(inputs))

    def encodings(self, inputs, start_index=0, positions=None):
        """The encodings before `call` broadcasts them over the batch: (1, T, D) for
        `start_index`, (B or 1, T, D) for `positions`, for a layer that builds this one
        and adds them to the (B, T, D) embeddings itself (`TokenAndPositionEmbedding`:
        `+` broadcasts, and its exported graphs hold no broadcast to the batch)."""
        _check_embeddings(inputs.shape)
        length, d_model = ops.shape(inputs)[-2], inputs.shape[-1]
        if positions is None:
            check_sequence_length(length, self.max_length, start_index)
            positions = ops.expand_dims(
                ops.arange(length, dtype="int32") + ops.cast(start_index, "int32"), 0
            )  # (1, T)
        else:
            _check_positions(inputs.shape, np.shape(positions))  # a list's too
            check_sequence_length(1, self.max_length, positions, "positions")
        if self.mode == "learned":
            encoding = ops.take(self.position_embeddings, ops.cast(positions, "int32"), axis=0)
        else:
            encoding = self._sinusoid(positions, d_model)
        return ops.cast(encoding, self.compute_dtype)

    def _sinusoid(self, positions, d_model):
        inv_freq = ops.exp(
            ops.arange(0, d_model, 2, dtype="float32") * (-math.log(10000.0) / d_model)
        )
        angles = ops.expand_dims(ops.cast(positions, "float32"), -1) * inv_freq  # (B, T, D/2)
        if self.layout == "halves":
            return ops.concatenate([ops.sin(angles), ops.cos(angles)], axis=-1)  # sin… | cos…
        table = ops.stack([ops.sin(angles), ops.cos(angles)], axis=-1)  # (B, T, D/2, 2)
        batch, length = ops.shape(positions)[0], ops.shape(positions)[1]
        return ops.reshape(table, (batch, length, d_model))  # (B, T, D): sin, cos, sin, ...

    def compute_output_shape(self, inputs_shape, positions_shape=None):
        _check_embeddings(inputs_shape)
        if positions_shape is not None:
            _check_positions(inputs_shape, positions_shape)
        return tuple(inputs_shape)  # (B, T, D)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "max_length": self.max_length,
                "mode": self.mode,
                "initializer": keras.initializers.serialize(self.initializer),
                "layout": self.layout,
            }
        )
        return config


def _check_embeddings(shape) -> None:
    """Refuses inputs that are not (B, T, D): a (T, D) sequence would be read as T rows
    of one D-wide position each."""
    if len(shape) != 3:
        raise ValueError(
            "`inputs` must be (B, T, D) embeddings, of rank 3. "
            f"Received: inputs.shape={tuple(shape)}"
        )


def _check_positions(inputs_shape, positions_shape) -> None:
    """Refuses `positions` that are not (B, T) for the (B, T, D) inputs: a (T,) vector
    failed deep in the layer, and another batch's positions failed inside TensorFlow's
    add without naming them."""
    check_per_token(
        "positions", positions_shape, inputs_shape[:2], f"for inputs of shape {tuple(inputs_shape)}"
    )


def check_per_token(name: str, shape, batch_and_length, whose: str) -> None:
    """Refuses `name` of a shape other than (B, T) = `batch_and_length` (B may be 1, to
    broadcast), where both are known; `whose` ends the message ("like `token_ids`")."""
    shape = tuple(shape)
    (batch, length), (got_batch, got_length) = batch_and_length, (shape + (None, None))[:2]
    if (
        len(shape) != 2
        or None not in (length, got_length)
        and got_length != length
        or None not in (batch, got_batch)
        and got_batch not in (batch, 1)
    ):
        raise ValueError(
            f"`{name}` must be (B, T) = ({batch}, {length}) {whose} (B may be 1, to "
            f"broadcast). Received: {name}.shape={shape}"
        )
