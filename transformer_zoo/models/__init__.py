"""The three model families and their presets (`keras.ops` only; generation with a KV
cache is in `transformer_zoo.generation`)."""

from transformer_zoo.models.decoder_only import DecoderOnly
from transformer_zoo.models.encoder_decoder import EncoderDecoder
from transformer_zoo.models.encoder_only import EncoderOnly, mean_pool
from transformer_zoo.models.encoder_only_classifier import EncoderOnlyClassifier
from transformer_zoo.models.encoder_only_masked_lm import EncoderOnlyMaskedLM
from transformer_zoo.models.hf.bert import import_hf_bert
from transformer_zoo.models.presets import (
    MODEL_CLASSES,
    PRESETS,
    describe,
    from_preset,
    resolve_preset,
)
from transformer_zoo.models.saving import load_run_model

__all__ = [
    "MODEL_CLASSES",
    "PRESETS",
    "DecoderOnly",
    "EncoderDecoder",
    "EncoderOnly",
    "EncoderOnlyClassifier",
    "EncoderOnlyMaskedLM",
    "describe",
    "from_preset",
    "import_hf_bert",
    "load_run_model",
    "mean_pool",
    "resolve_preset",
]
