"""Masked-language-model head on top of an `EncoderOnly` backbone (BERT §3.1)."""

from __future__ import annotations

from collections.abc import Mapping

import keras
from keras import ops

from transformer_zoo.layers import LMHead
from transformer_zoo.layers.validation import check_indices
from transformer_zoo.models.encoder_only import EncoderOnly
from transformer_zoo.models.model_inputs import check_input_keys
from transformer_zoo.models.zoo_model import ZooModel


@keras.saving.register_keras_serializable(package="transformer_zoo")
class EncoderOnlyMaskedLM(ZooModel):
    """Predicts masked tokens: BERT's transform (Dense → GELU → LayerNorm), then logits
    tied to the backbone's token embedding, plus an output bias.

    Args:
        backbone: an `EncoderOnly`.
        **kwargs: standard `keras.Model` arguments.

    Call arguments:
        inputs: the backbone's inputs, optionally with `mask_positions` (B, M): the
            positions to predict, in [0, T). Without it, every position is predicted.
        training: whether dropout is active.

    Returns:
        (B, M, V) logits at `mask_positions`, else (B, T, V).

    Example:
    >>> backbone = EncoderOnly(100, num_layers=1, num_heads=2, hidden_dim=16,
    ...                        intermediate_dim=32, max_length=32)
    >>> tuple(EncoderOnlyMaskedLM(backbone)(keras.ops.ones((2, 5), "int32")).shape)
    (2, 5, 100)
    """

    def __init__(self, backbone: EncoderOnly, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(backbone, EncoderOnly):
            raise ValueError(f"`backbone` must be an EncoderOnly. Received: backbone={backbone!r}")
        self.backbone = backbone
        self.lm_head = LMHead(
            backbone.vocabulary_size,
            embedding=backbone.embeddings,
            use_bias=True,
            transform_activation=backbone.activation,
            layer_norm_epsilon=backbone.layer_norm_epsilon,
            dtype=self.dtype_policy,
            name="lm_head",
        )
        self.lm_head.build((None, None, backbone.hidden_dim))
        self.built = True

    def input_specs(self) -> dict[str, keras.InputSpec]:
        return self.backbone.input_specs()

    def call(self, inputs, training=None):
        positions = None
        if isinstance(inputs, Mapping):
            check_input_keys(inputs, {*self.input_specs(), "mask_positions"})
            positions = inputs.get("mask_positions")
            inputs = {key: value for key, value in inputs.items() if key != "mask_positions"}
        sequence = self.backbone(inputs, training=training)["sequence_output"]  # (B, T, D)
        if positions is not None:
            length = ops.shape(sequence)[1]
            check_indices(
                positions,
                length,
                "mask_positions",
                "the sequence length T",
                "a position",
                "positions",
            )
            index = ops.expand_dims(ops.cast(positions, "int32"), -1)  # (B, M, 1)
            sequence = ops.take_along_axis(sequence, index, axis=1)  # (B, M, D)
        return self.lm_head(sequence)

    def get_config(self):
        config = super().get_config()
        config["backbone"] = keras.saving.serialize_keras_object(self.backbone)
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["backbone"] = keras.saving.deserialize_keras_object(config["backbone"])
        return cls(**config)
