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


_KIND_NAMES = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


def check_overrides(name: str, family: str, overrides: dict[str, Any]) -> None:
    """Raises a one-line ValueError unless every key of `overrides` is an argument of the
    family's constructor and its value has the type of the preset's (or the
    constructor's default) value: an integer where an integer is expected, a number
    where a float is, and so on."""
    name = resolve_preset(name, family)
    family = PRESETS[name]["family"]
    parameters = inspect.signature(MODEL_CLASSES[family].__init__).parameters
    accepted = sorted(set(parameters) - {"self", "kwargs", "name", "dtype"})
    for key, value in overrides.items():
        if key not in accepted:
            raise ValueError(
                f"`{key}` is not an argument of {with_article(family)} model; the arguments "
                f"are: {', '.join(accepted)}"
            )
        expected = PRESETS[name]["config"].get(key, parameters[key].default)
        kind = type(expected)
        if kind not in _KIND_NAMES:
            continue  # None or a structure by default: the constructor checks it
        allowed = (int, float) if kind is float else (kind,)
        if not isinstance(value, allowed) or (isinstance(value, bool) and kind is not bool):
            raise ValueError(
                f"`{key}` takes {_KIND_NAMES[kind]} (the preset has {key}={expected!r}). "
                f"Received: {key}={value!r}"
            )


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
