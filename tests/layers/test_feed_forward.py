import math

import numpy as np
import pytest

from tests.helpers import np_gelu
from transformer_zoo.layers import FeedForward

rng = np.random.default_rng(2)


def _np_gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


@pytest.mark.parametrize(
    "activation, reference",
    [
        ("relu", lambda z: np.maximum(z, 0)),
        ("gelu", np_gelu),
        ("gelu_tanh", _np_gelu_tanh),
        ("swish", lambda z: z / (1 + np.exp(-z))),
    ],
)
def test_ffn_equals_two_projections_around_the_activation(activation, reference):
    x = rng.normal(size=(2, 3, 8)).astype("float32")
    ffn = FeedForward(intermediate_dim=16, activation=activation)
    out = np.asarray(ffn(x))
    w1, b1 = (np.asarray(w) for w in ffn.intermediate_dense.weights)
    w2, b2 = (np.asarray(w) for w in ffn.output_dense.weights)
    np.testing.assert_allclose(out, reference(x @ w1 + b1) @ w2 + b2, atol=1e-5)


def test_exact_gelu_is_the_erf_form_not_the_tanh_approximation():
    from transformer_zoo.layers.activations import gelu

    x = np.linspace(-4, 4, 81).astype("float32")
    np.testing.assert_allclose(np.asarray(gelu(x)), np_gelu(x), atol=1e-6)
    assert np.abs(np_gelu(x) - _np_gelu_tanh(x)).max() > 1e-4  # the two really differ


def test_bad_arguments_name_the_argument():
    with pytest.raises(ValueError, match="activation='tanh'"):
        FeedForward(8, activation="tanh")
    with pytest.raises(ValueError, match="intermediate_dim=0"):
        FeedForward(0)
    with pytest.raises(ValueError, match="dropout=2"):
        FeedForward(8, dropout=2)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"intermediate_dim": True}, "intermediate_dim=True"),
        ({"intermediate_dim": 8, "dropout": None}, "dropout=None"),
        ({"intermediate_dim": 8, "use_bias": "no"}, "use_bias='no'"),
    ],
)
def test_bools_strings_and_none_are_refused_by_name(kwargs, message):
    """`use_bias="no"` gave both projections biases; `dropout=None` a bare TypeError."""
    with pytest.raises(ValueError, match=message):
        FeedForward(**kwargs)
