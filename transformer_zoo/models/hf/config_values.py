"""Values read from a Hugging Face `config.json`, checked: the model type, options our
layers implement, the dropout rate and the sizes."""

from __future__ import annotations

import logging

from transformer_zoo.errors import is_number

log = logging.getLogger(__name__)

# transformers' activation names (its ACT2FN; BERT's `hidden_act`, GPT-2's and Marian's
# `activation_function`) → ours. "gelu" is the exact, erf form; "gelu_new" and
# "gelu_pytorch_tanh" the tanh approximation GPT-2 uses; "silu" and "swish" the same function.
ACTIVATIONS = {
    "gelu": "gelu",
    "relu": "relu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "silu": "swish",
    "swish": "swish",
}
# Ours → the name `export --format hf` writes.
EXPORT_ACTIVATIONS = {"gelu": "gelu", "relu": "relu", "gelu_tanh": "gelu_new", "swish": "silu"}


def require_model_type(config: dict, model_type: str, name: str) -> None:
    """Raises ValueError unless `config.json` describes `model_type` (`name` in messages)."""
    found = config.get("model_type")
    if found != model_type:
        raise ValueError(
            f"config.json must describe a {name} model. Received: model_type={found!r}"
        )


def translated_option(config: dict, key: str, default: str, ours: dict[str, str]) -> str:
    """Our value for the `config.json` option `key` (e.g. an activation name), through the
    table `ours`; ValueError for a value our layers do not implement."""
    value = config.get(key, default)
    if value not in ours:
        raise ValueError(f"`{key}` must be one of {sorted(ours)}. Received: {key}={value!r}")
    return ours[value]


def exported_activation(activation: str, name: str) -> str:
    """transformers' name (`EXPORT_ACTIVATIONS`) of our `activation`, for `name`'s
    config.json; ValueError for one transformers has no name for."""
    if activation not in EXPORT_ACTIVATIONS:
        raise ValueError(
            f"{name} has no `{activation}` activation; export --format hf needs one of "
            f"{sorted(EXPORT_ACTIVATIONS)}."
        )
    return EXPORT_ACTIVATIONS[activation]


def dropout_rate(config: dict, keys: tuple[str, ...]) -> float:
    """The one dropout rate of our models (embeddings, residuals and attention alike) for
    a checkpoint's rates `keys`, each transformers' 0.1 where `config.json` leaves it out:
    the first key's (the rate applied in the most places), with one warning where the
    others differ. Dropout changes nothing at inference; `train --init` fine-tunes with
    it, and `export --format hf` writes it back for every key.

    Raises:
        ValueError: a rate that is not a number in [0, 1).
    """
    rates = {}
    for key in keys:
        rate = config.get(key, 0.1)
        if not is_number(rate) or not 0.0 <= rate < 1.0:
            raise ValueError(f"`{key}` must be in [0, 1). Received: {key}={rate!r}")
        rates[key] = float(rate)
    rate = rates[keys[0]]
    others = [f"{key}={value:g}" for key, value in rates.items() if value != rate]
    if others:
        log.warning(
            "one dropout rate for the whole model: %s=%g, also in place of %s (train --init "
            "fine-tunes with it, export --format hf writes it back)",
            keys[0],
            rate,
            ", ".join(others),
        )
    return rate


def positive_ints(config: dict, keys: dict[str, str], what: str) -> dict[str, int]:
    """`{short: value}` for the `config.json` keys `keys` (key → short name), each a
    positive integer."""
    sizes = {}
    for key, short in keys.items():
        value = config.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(
                f"config.json of a {what} model needs a positive integer `{key}`. "
                f"Received: {key}={value!r}"
            )
        sizes[short] = value
    names = {short: key for key, short in keys.items()}
    if "D" in sizes and "H" in sizes and sizes["D"] % sizes["H"]:
        raise ValueError(
            f"`{names['D']}` must be divisible by `{names['H']}`. "
            f"Received: {names['D']}={sizes['D']}, {names['H']}={sizes['H']}"
        )
    return sizes
