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
    """GELU's tanh approximation, as GPT-2 uses."""
    c = ops.cast(math.sqrt(2.0 / math.pi), x.dtype)
    return 0.5 * x * (1.0 + ops.tanh(c * (x + ops.cast(0.044715, x.dtype) * x * x * x)))


ACTIVATIONS = {"relu": relu, "gelu": gelu, "gelu_tanh": gelu_tanh}


def get_activation(name: str):
    if name not in ACTIVATIONS:
        raise ValueError(
            f"`activation` must be one of {sorted(ACTIVATIONS)}. Received: activation={name!r}"
        )
    return ACTIVATIONS[name]
