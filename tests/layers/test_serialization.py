"""Every layer: config round-trip, .keras save/load, one fit step, mixed_bfloat16."""

import keras
import numpy as np
import pytest

from transformer_zoo.layers import (
    FeedForward,
    LMHead,
    MultiHeadAttention,
    PositionalEncoding,
    TokenAndPositionEmbedding,
    TransformerBlock,
)

B, T, D, V = 2, 5, 8, 20


@keras.saving.register_keras_serializable(package="tests")
class TiedLM(keras.Model):
    """Embedding + tied head: the head's tie is rebuilt by its owner, as in our models."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.embedding = TokenAndPositionEmbedding(V, 16, D, name="embedding")
        self.head = LMHead(V, embedding=self.embedding, use_bias=True, transform_activation="gelu")

    def call(self, token_ids):
        return self.head(self.embedding(token_ids))


def _float(shape):
    return np.random.default_rng(0).normal(size=shape).astype("float32")


def _ids(shape=(B, T)):
    return np.random.default_rng(0).integers(1, V, size=shape).astype("int32")


def _functional(layer_fn, inputs):
    """A one-layer functional model (so it can be saved and fitted)."""
    sym = [keras.Input(shape=x.shape[1:], dtype=x.dtype) for x in inputs]
    return keras.Model(sym, layer_fn(*sym))


CASES = {
    "positional_encoding": (
        lambda: PositionalEncoding(16, mode="learned"),
        lambda: [_float((B, T, D))],
    ),
    "token_and_position_embedding": (
        lambda: TokenAndPositionEmbedding(V, 16, D, type_vocabulary_size=2, dropout=0.1),
        lambda: [_ids()],
    ),
    "multi_head_attention": (
        lambda: MultiHeadAttention(2, dropout=0.1),
        lambda: [_float((B, T, D)), _float((B, 3, D))],
    ),
    "feed_forward": (
        lambda: FeedForward(16, activation="gelu", dropout=0.1),
        lambda: [_float((B, T, D))],
    ),
    "post_ln_decoder_block": (
        lambda: TransformerBlock(2, 16, causal=True, cross_attention=True, dropout=0.1),
        lambda: [_float((B, T, D)), _float((B, 3, D))],
    ),
    "pre_ln_block": (
        lambda: TransformerBlock(2, 16, activation="gelu_tanh", norm_first=True),
        lambda: [_float((B, T, D))],
    ),
    "lm_head": (
        lambda: LMHead(V, use_bias=True, transform_activation="relu"),
        lambda: [_float((B, T, D))],
    ),
}


def _call(layer, inputs):
    if isinstance(layer, TransformerBlock) and len(inputs) == 2:
        return layer(inputs[0], context=inputs[1])
    return layer(*inputs)


@pytest.mark.parametrize("name", CASES)
def test_from_config_with_copied_weights_gives_identical_outputs(name):
    make, make_inputs = CASES[name]
    inputs = make_inputs()
    layer = make()
    expected = np.asarray(_call(layer, inputs))
    clone = layer.__class__.from_config(layer.get_config())
    _call(clone, inputs)
    clone.set_weights(layer.get_weights())
    np.testing.assert_array_equal(np.asarray(_call(clone, inputs)), expected)
    assert clone.get_config() == layer.get_config()


@pytest.mark.parametrize("name", CASES)
def test_keras_file_save_and_load_gives_identical_outputs(name, tmp_path):
    make, make_inputs = CASES[name]
    inputs = make_inputs()
    layer = make()
    model = _functional(lambda *xs: _call(layer, list(xs)), inputs)
    expected = np.asarray(model(inputs))
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    np.testing.assert_array_equal(np.asarray(loaded(inputs)), expected)


def test_tied_head_survives_keras_file_round_trip(tmp_path):
    model = TiedLM()
    ids = _ids()
    expected = np.asarray(model(ids))
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    np.testing.assert_array_equal(np.asarray(loaded(ids)), expected)
    assert loaded.head.embedding is loaded.embedding


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("name", CASES)
def test_one_fit_step_runs_and_changes_the_weights(name, policy):
    keras.config.set_dtype_policy(policy)
    make, make_inputs = CASES[name]
    inputs = make_inputs()
    layer = make()
    model = _functional(lambda *xs: _call(layer, list(xs)), inputs)
    target = np.zeros(model.output.shape[1:], "float32")[None].repeat(B, 0)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    before = [np.array(w) for w in model.trainable_weights]
    history = model.fit(inputs, target, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    after = [np.array(w) for w in model.trainable_weights]
    assert any(not np.array_equal(a, b) for a, b in zip(before, after, strict=True))
    if policy == "mixed_bfloat16":
        assert layer.compute_dtype == "bfloat16"
        assert all(w.dtype == "float32" for w in layer.weights)
