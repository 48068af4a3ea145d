"""The FFN activations, written with ops that export to ONNX.

Keras' exact `gelu` lowers to `Erfc`, which tf2onnx does not convert, so exact GELU is
written with `erf` (ONNX has `Erf`).
"""

from __future__ import annotations

import math

from keras import ops


def relu(x):
    return ops.relu(x)


def gelu(x):
    """Exact GELU, x·Φ(x) = 0.5·x·(1 + erf(x/√2)), as BERT checkpoints use."""
    return 0.5 * x * (1.0 + ops.erf(x * ops.cast(1.0 / math.sqrt(2.0), x.dtype)))


def gelu_tanh(x):
    """GELU's tanh approximation, 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), as GPT-2 uses.

    `ops.gelu(approximate=True)` is the same formula; TensorFlow's oneDNN remapper fuses it
    with the preceding MatMul + BiasAdd, which a hand-written expression does not get.
    """
    return ops.gelu(x, approximate=True)


def swish(x):
    """Swish (SiLU), x·σ(x), as Marian's translation models use."""
    return x * ops.sigmoid(x)


ACTIVATIONS = {"relu": relu, "gelu": gelu, "gelu_tanh": gelu_tanh, "swish": swish}


def get_activation(name: str):
    if name not in ACTIVATIONS:
        raise ValueError(
            f"`activation` must be one of {sorted(ACTIVATIONS)}. Received: activation={name!r}"
        )
    return ACTIVATIONS[name]
