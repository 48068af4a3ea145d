"""Building the named architectures (`transformer_zoo.architectures.PRESETS`).

`from_preset(name, **overrides)` builds one (weights freshly initialized; nothing is
downloaded). `"tiny"` names one tiny preset per family, so it needs `family=`.
"""

from __future__ import annotations

import inspect
from typing import Any

from transformer_zoo.architectures import PRESETS, resolve_preset
from transformer_zoo.errors import with_article
from transformer_zoo.models.decoder_only import DecoderOnly
from transformer_zoo.models.encoder_decoder import EncoderDecoder
from transformer_zoo.models.encoder_only import EncoderOnly

# The class of each family (`run_directory.FAMILIES` names them).
MODEL_CLASSES = {
    "encoder-decoder": EncoderDecoder,
    "encoder-only": EncoderOnly,
    "decoder-only": DecoderOnly,
}


def preset_config(name: str, family: str | None = None, **overrides) -> tuple[str, str, dict]:
    """`(full name, family, constructor config)` of a preset with `overrides` applied."""
    name = resolve_preset(name, family)
    family = PRESETS[name]["family"]
    accepted = set(inspect.signature(MODEL_CLASSES[family].__init__).parameters) - {
        "self",
        "kwargs",
    }
    unknown = sorted(set(overrides) - accepted - {"name", "dtype"})
    if unknown:
        raise ValueError(
            f"Unknown overrides for {with_article(family)} model: {unknown}. "
            f"Accepted: {sorted(accepted)}"
        )
    return name, family, {**PRESETS[name]["config"], **overrides}


def from_preset(name: str, family: str | None = None, **overrides):
    """Build a preset's model with fresh weights.

    Args:
        name: a key of `PRESETS`, or `"tiny"` together with `family`.
        family: `"encoder-decoder"`, `"encoder-only"` or `"decoder-only"`; needed for
            `"tiny"`, checked otherwise.
        **overrides: constructor arguments that replace the preset's, e.g.
            `vocabulary_size=500, target_vocabulary_size=3000`.

    Returns:
        An `EncoderDecoder`, `EncoderOnly` or `DecoderOnly`.

    Example:
    >>> model = from_preset("tiny", family="decoder-only", vocabulary_size=100)
    >>> model.count_params() > 0
    True
    """
    name, family, config = preset_config(name, family, **overrides)
    return MODEL_CLASSES[family](**config)


def describe(name: str, family: str | None = None) -> dict[str, Any]:
    """A JSON-ready summary of a preset, with the parameter count of the built model."""
    name, family, config = preset_config(name, family)
    model = MODEL_CLASSES[family](**config)
    return {
        "preset": name,
        "family": family,
        "params": int(model.count_params()),
        "description": PRESETS[name]["description"],
        "config": config,
    }
