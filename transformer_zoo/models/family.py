"""Which family a model belongs to, and the dimensions its exported graphs are fed by."""

from __future__ import annotations

import keras

from transformer_zoo.models.decoder_only import DecoderOnly
from transformer_zoo.models.encoder_decoder import EncoderDecoder
from transformer_zoo.models.encoder_only import EncoderOnly
from transformer_zoo.models.encoder_only_classifier import EncoderOnlyClassifier
from transformer_zoo.models.encoder_only_masked_lm import EncoderOnlyMaskedLM
from transformer_zoo.run_directory import FAMILY_TASKS, ModelDimensions

ENCODER_ONLY_HEADS = (EncoderOnlyClassifier, EncoderOnlyMaskedLM)


def family_of(model) -> str:
    """`"encoder-decoder"`, `"decoder-only"` or `"encoder-only"`; ValueError otherwise."""
    if isinstance(model, DecoderOnly):
        return "decoder-only"
    if isinstance(model, EncoderDecoder):
        return "encoder-decoder"
    if isinstance(model, (EncoderOnly, *ENCODER_ONLY_HEADS)):
        return "encoder-only"
    raise ValueError(
        "`model` must be a DecoderOnly, EncoderDecoder, EncoderOnly, EncoderOnlyClassifier "
        f"or EncoderOnlyMaskedLM. Received: model of type {type(model).__name__}"
    )


def default_task(model) -> str:
    """The task a model of this class serves when nothing else says so."""
    if isinstance(model, EncoderOnlyClassifier):
        return "classification"
    if isinstance(model, EncoderOnlyMaskedLM):
        return "masked-lm"
    family = family_of(model)
    return "embedding" if family == "encoder-only" else FAMILY_TASKS[family][0]


def backbone_of(model):
    """The model that holds the Transformer: a classifier's or masked LM's backbone."""
    return model.backbone if isinstance(model, ENCODER_ONLY_HEADS) else model


def dimensions_of(model) -> ModelDimensions:
    """The `ModelDimensions` of a model of any family."""
    core = backbone_of(model)
    encoder_only = isinstance(core, EncoderOnly)
    return ModelDimensions(
        class_name=type(model).__name__,
        vocabulary_size=core.vocabulary_size,
        num_layers=core.num_layers,
        num_heads=core.num_heads,
        head_dim=core.hidden_dim // core.num_heads,
        hidden_dim=core.hidden_dim,
        max_length=core.max_length,
        dtype=core.compute_dtype,
        target_vocabulary_size=(
            model.output_vocabulary_size if isinstance(model, EncoderDecoder) else None
        ),
        type_vocabulary_size=core.type_vocabulary_size if encoder_only else 0,
        use_pooler=core.use_pooler if encoder_only else False,
        num_classes=model.num_classes if isinstance(model, EncoderOnlyClassifier) else None,
    )


def float32_copy(model):
    """`model`'s architecture and weights in float32: what a model trained under a mixed
    precision policy is saved and served as (its variables are float32 already; only the
    compute dtype changes). The config's dtype policies are dropped, so every layer takes
    float32 from its parent."""

    def without_policies(config):
        if isinstance(config, dict):
            return {k: without_policies(v) for k, v in config.items() if k != "dtype"}
        if isinstance(config, list):
            return [without_policies(v) for v in config]
        return config

    policy = keras.config.dtype_policy()
    keras.config.set_dtype_policy("float32")  # the layers' default, whatever the caller's
    try:
        copy = model.__class__.from_config(without_policies(model.get_config()))
    finally:
        keras.config.set_dtype_policy(policy)
    copy.set_weights(model.get_weights())
    return copy


def refuse_quantized(model) -> None:
    """Raises `ValueError` when `model.quantize(...)` quantized some of its layers (Keras'
    own int8, int4 or float8), whose weights every exporter would read as float32 ones."""
    quantized = [
        weight.path
        for weight in model.weights
        if weight.dtype == "int8" or weight.path.rsplit("/", 1)[-1].endswith("_scale")
    ]
    if quantized:
        raise ValueError(
            f"This model's layers were quantized by `model.quantize` ({quantized[0]}, "
            f"{len(quantized)} quantized weights): export the model before quantizing it, "
            "and get int8 or int4 ONNX files with `--quantize int8 int4` "
            "(`quantize_onnx`)."
        )
