"""Sequence classification on top of an `EncoderOnly` backbone (BERT §4.1)."""

from __future__ import annotations

import keras

from transformer_zoo.layers.validation import check_rate, check_size
from transformer_zoo.models.encoder_only import EncoderOnly
from transformer_zoo.models.zoo_model import ZooModel


@keras.saving.register_keras_serializable(package="transformer_zoo")
class EncoderOnlyClassifier(ZooModel):
    """Logits over `num_classes` from the pooled [CLS] representation.

    With a pooler the head reads `pooled_output`; without one, the first token's
    `sequence_output`. Dropout, then one Dense layer, as in BERT's fine-tuning.

    Args:
        backbone: an `EncoderOnly`.
        num_classes: number of labels.
        dropout: dropout before the classifier, in [0, 1).
        **kwargs: standard `keras.Model` arguments.

    Call arguments:
        inputs: the backbone's inputs (`token_ids`, `padding_mask`, `segment_ids`).
        training: whether dropout is active.

    Returns:
        (B, num_classes) logits.

    Example:
    >>> backbone = EncoderOnly(100, num_layers=1, num_heads=2, hidden_dim=16,
    ...                        intermediate_dim=32, max_length=32)
    >>> tuple(EncoderOnlyClassifier(backbone, num_classes=3)(keras.ops.ones((2, 5), "int32")).shape)
    (2, 3)
    """

    def __init__(self, backbone: EncoderOnly, num_classes: int, dropout: float = 0.1, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(backbone, EncoderOnly):
            raise ValueError(f"`backbone` must be an EncoderOnly. Received: backbone={backbone!r}")
        self.backbone = backbone
        self.num_classes = check_size("num_classes", num_classes)
        self.dropout = check_rate("dropout", dropout)
        self.classifier_dropout = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.classifier = keras.layers.Dense(
            self.num_classes, dtype=self.dtype_policy, name="classifier"
        )
        self.classifier.build((None, backbone.hidden_dim))
        self.built = True

    def input_specs(self) -> dict[str, keras.InputSpec]:
        return self.backbone.input_specs()

    def call(self, inputs, training=None):
        outputs = self.backbone(inputs, training=training)
        pooled = outputs.get("pooled_output")
        if pooled is None:
            pooled = outputs["sequence_output"][:, 0]  # (B, D)
        return self.classifier(self.classifier_dropout(pooled, training=training))

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "backbone": keras.saving.serialize_keras_object(self.backbone),
                "num_classes": self.num_classes,
                "dropout": self.dropout,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["backbone"] = keras.saving.deserialize_keras_object(config["backbone"])
        return cls(**config)
