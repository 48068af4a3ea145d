import keras
import numpy as np
import pytest

from tests.helpers import np_gelu, np_layer_norm
from transformer_zoo.layers import LMHead, TokenAndPositionEmbedding
from transformer_zoo.layers.activations import gelu

rng = np.random.default_rng(3)


def test_tied_head_projects_with_the_transposed_token_matrix():
    emb = TokenAndPositionEmbedding(30, 8, 6)
    emb(np.ones((1, 2), "int32"))
    head = LMHead(30, embedding=emb)
    h = rng.normal(size=(2, 4, 6)).astype("float32")
    np.testing.assert_allclose(np.asarray(head(h)), h @ np.asarray(emb.embeddings).T, atol=1e-5)
    assert not any("kernel" in w.path for w in head.weights)


def test_untied_head_with_bias():
    head = LMHead(30, use_bias=True)
    h = rng.normal(size=(2, 4, 6)).astype("float32")
    head(h)
    head.bias.assign(rng.normal(size=30).astype("float32"))
    expected = h @ np.asarray(head.kernel) + np.asarray(head.bias)
    np.testing.assert_allclose(np.asarray(head(h)), expected, atol=1e-5)


def test_bert_transform_is_dense_gelu_layernorm_before_the_projection():
    emb = TokenAndPositionEmbedding(30, 8, 6)
    emb(np.ones((1, 2), "int32"))
    head = LMHead(30, embedding=emb, use_bias=True, transform_activation="gelu")
    h = rng.normal(size=(2, 4, 6)).astype("float32")
    head(h)
    w, b = (np.asarray(v) for v in head.transform_dense.weights)
    gamma, beta = (np.asarray(v) for v in head.transform_norm.weights)
    t = np_layer_norm(np_gelu(h @ w + b), gamma, beta, 1e-12)
    expected = t @ np.asarray(emb.embeddings).T + np.asarray(head.bias)
    np.testing.assert_allclose(np.asarray(head(h)), expected, atol=1e-4)


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="vocabulary_size=0"):
        LMHead(0)
    with pytest.raises(ValueError, match="activation='tanh'"):
        LMHead(10, transform_activation="tanh")
    with pytest.raises(ValueError, match="pass the embedding again"):
        LMHead(10, tied=True)
    emb = TokenAndPositionEmbedding(12, 8, 6)
    with pytest.raises(ValueError, match="vocabulary_size=10"):
        LMHead(10, embedding=emb)


def test_a_tied_head_counts_freezes_and_lists_only_its_own_weights():
    """The embedding is its model's layer: the head's weights are its transform and bias
    (counted from their shapes), and freezing the head leaves the embedding trainable."""
    emb = TokenAndPositionEmbedding(30, 8, 6, position_mode="learned")
    emb(np.ones((1, 2), "int32"))
    head = LMHead(30, embedding=emb, use_bias=True, transform_activation="gelu")
    head(rng.normal(size=(2, 4, 6)).astype("float32"))
    own = 6 * 6 + 6 + 2 * 6 + 30  # transform Dense, its LayerNorm, the output bias
    assert head.count_params() == own == sum(int(np.prod(w.shape)) for w in head.weights)
    assert not any("embedding" in w.path for w in head.weights)
    head.trainable = False
    assert emb.trainable and len(emb.trainable_weights) == 2  # token and position tables
    assert head.embedding is emb and head.tied


def test_a_tied_head_refuses_inputs_narrower_than_its_embedding_by_name():
    emb = TokenAndPositionEmbedding(30, 8, 6)
    emb(np.ones((1, 2), "int32"))
    with pytest.raises(ValueError, match=r"inputs_shape=\(1, 2, 4\), the embedding's D=6"):
        LMHead(30, embedding=emb)(np.zeros((1, 2, 4), "float32"))
    keras_embedding = keras.layers.Embedding(30, 5)
    with pytest.raises(ValueError, match="the embedding's D=5"):
        LMHead(30, embedding=keras_embedding).build((None, None, 6))


def _tied_head_and_float_table(vocabulary_size=30, width=16):
    emb = TokenAndPositionEmbedding(vocabulary_size, 8, width)
    emb(np.ones((1, 2), "int32"))
    return emb, LMHead(vocabulary_size, embedding=emb), np.array(emb.embeddings)


@pytest.mark.parametrize("mode, levels", [("int8", 127), ("int4", 7)])
def test_a_tied_head_over_a_quantized_table_stays_within_its_rounding_bound(mode, levels):
    """`model.quantize` rounds each row v of E to `levels` steps of max|E_v| / levels
    (Keras' per-row abs-max quantizer), so each entry moves by at most half a step and
    logit (b, v) by at most sum_d |h_bd| · max|E_v| / (2 · levels). Reading the raw
    integers instead put the logits hundreds of times too large."""
    emb, head, table = _tied_head_and_float_table()
    token_ids, hidden = keras.Input((None,), dtype="int32"), keras.Input((None, 16))
    model = keras.Model([token_ids, hidden], [emb(token_ids), head(hidden)])
    h = rng.normal(size=(2, 4, 16)).astype("float32")
    expected = h @ table.T
    with pytest.warns(UserWarning):  # layers without weights to quantize say so
        model.quantize(mode)
    assert emb.token_embedding.quantization_mode == mode
    bound = np.abs(h).sum(-1, keepdims=True) * np.abs(table).max(-1) / (2 * levels)
    error = np.abs(np.asarray(head(h)) - expected)
    assert np.all(error <= bound + 1e-5), float(np.max(error - bound))


@pytest.mark.parametrize("block_size", [None, 8])
def test_a_tied_head_over_an_int4_table_matches_keras_reversible_embedding(block_size):
    """Keras' `ReversibleEmbedding(reverse=True)` dequantizes its int4 table (per row, or
    per group of `block_size` columns with zero points) and, for int4, leaves the inputs
    in float: with the same table quantized the same way, the logits agree."""
    emb, head, table = _tied_head_and_float_table()
    reference = keras.layers.ReversibleEmbedding(30, 16)
    reference.build()
    reference.embeddings.assign(table)
    config = keras.quantizers.Int4QuantizationConfig(block_size=block_size)
    emb.token_embedding.quantize("int4", config=config)
    reference.quantize("int4", config=config)
    h = rng.normal(size=(2, 4, 16)).astype("float32")
    expected = np.asarray(reference(h, reverse=True))
    np.testing.assert_allclose(np.asarray(head(h)), expected, atol=1e-5)
    assert not np.allclose(expected, h @ table.T, atol=1e-3)  # quantization did happen


@pytest.mark.parametrize("tied_to", ["ours", "keras"])
def test_a_head_tied_to_an_int8_table_with_lora_projects_with_the_adapted_table(tied_to):
    """Keras' `Embedding.enable_lora` on an int8 table looks an id up as
    Q_v / s_v + (alpha / r) A_v B: the tied head must project with that matrix, adapters
    included (the integers' shortcut, `(x Qᵀ) / s`, would leave them out)."""
    if tied_to == "ours":
        emb, head, _ = _tied_head_and_float_table()
        table = emb.token_embedding
    else:
        table = keras.layers.Embedding(30, 16)
        table.build()
        head = LMHead(30, embedding=table)
    table.quantize("int8")
    integers = np.asarray(table.embeddings, "float32")  # (V, D); with LoRA, the sum
    dequantized = integers / np.asarray(table.embeddings_scale)[:, None]
    table.enable_lora(2)
    a, b = rng.normal(size=(30, 2)), rng.normal(size=(2, 16))
    table.lora_embeddings_a.assign(a.astype("float32"))
    table.lora_embeddings_b.assign(b.astype("float32"))
    adapted = dequantized + table.lora_alpha / table.lora_rank * a @ b
    h = rng.normal(size=(2, 4, 16)).astype("float32")
    np.testing.assert_allclose(np.asarray(head(h)), h @ adapted.T, rtol=1e-5, atol=1e-4)
    assert not np.allclose(h @ adapted.T, h @ dequantized.T, atol=1e-2)  # the adapters count


def test_a_head_tied_to_a_quantized_keras_embedding_dequantizes_it():
    emb = keras.layers.Embedding(30, 16)
    emb.build()
    table = np.array(emb.embeddings)
    emb.quantize("int8")
    h = rng.normal(size=(2, 4, 16)).astype("float32")
    bound = np.abs(h).sum(-1, keepdims=True) * np.abs(table).max(-1) / (2 * 127)
    error = np.abs(np.asarray(LMHead(30, embedding=emb)(h)) - h @ table.T)
    assert np.all(error <= bound + 1e-5)


@pytest.mark.filterwarnings("ignore")  # layers without weights to quantize say so
@pytest.mark.parametrize("transform_activation", [None, "gelu"])
@pytest.mark.parametrize(
    "mode, config",
    [
        ("int8", None),
        pytest.param("int4", None, marks=pytest.mark.slow),
        ("int4", keras.quantizers.Int4QuantizationConfig(block_size=8)),
        pytest.param("float8", None, marks=pytest.mark.slow),
    ],
    ids=["int8", "int4", "int4-blocks-of-8", "float8"],
)
def test_an_untied_head_quantizes_as_a_keras_dense_with_its_kernel(
    mode, config, transform_activation
):
    """`model.quantize` passed an untied head by (Keras warned, and its kernel stayed
    float32); with the transform, Keras never even asked it (it has sublayers). Now its
    logits are those of Keras' `Dense` holding its kernel, quantized the same way, plus
    its bias."""
    head = LMHead(30, use_bias=True, transform_activation=transform_activation)
    hidden = keras.Input((None, 16))
    model = keras.Model(hidden, head(hidden))
    head.bias.assign(rng.normal(size=30).astype("float32"))
    reference = keras.layers.Dense(30, use_bias=False)
    reference.build((None, 16))
    float_kernel = np.asarray(head.kernel)
    reference.set_weights([float_kernel])
    model.quantize(mode, config=config)
    reference.quantize(mode, config=config)
    h = rng.normal(size=(2, 4, 16)).astype("float32")
    x = h
    if transform_activation is not None:  # the head's own (quantized) transform
        x = head.transform_norm(gelu(head.transform_dense(h)))
    # The head's bias stays float32 (Dense's float8 call rounds its own to bfloat16).
    expected = np.asarray(reference(x)) + np.asarray(head.bias)
    np.testing.assert_allclose(np.asarray(head(h)), expected, atol=1e-5)
    float_logits = np.asarray(x) @ float_kernel + np.asarray(head.bias)
    assert not np.allclose(expected, float_logits, atol=1e-4)  # quantization did happen


@pytest.mark.parametrize("mode", [None, "int8", "int4"])
def test_lora_on_an_untied_heads_projection_is_keras_dense_lora(mode):
    """The head's `projection` is a Keras `Dense`, so its LoRA is Dense's: the logits
    equal a `Dense` holding the same kernel, quantized the same way, with the same
    adapters, and only the adapters (and the head's bias) train."""
    head = LMHead(30, use_bias=True, name="lm_head")
    head.build((None, None, 16))
    reference = keras.layers.Dense(30, use_bias=False)
    reference.build((None, 16))
    reference.set_weights([np.asarray(head.kernel)])
    for dense in (head.projection, reference):
        if mode is not None:
            dense.quantize(mode)
        dense.enable_lora(2)
    adapters = [rng.normal(size=(16, 2)), rng.normal(size=(2, 30))]
    for dense in (head.projection, reference):
        dense.lora_kernel_a.assign(adapters[0].astype("float32"))
        dense.lora_kernel_b.assign(adapters[1].astype("float32"))
    h = rng.normal(size=(2, 4, 16)).astype("float32")
    np.testing.assert_allclose(np.asarray(head(h)), np.asarray(reference(h)), atol=1e-5)
    assert sorted(w.path for w in head.trainable_weights) == [
        "lm_head/bias", "lm_head/projection/lora_kernel_a", "lm_head/projection/lora_kernel_b"
    ]  # fmt: skip


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"use_bias": "no"}, "`use_bias` must be True or False. Received: use_bias='no'"),
        ({"layer_norm_epsilon": None}, "layer_norm_epsilon=None"),
        ({"vocabulary_size": True}, "vocabulary_size=True"),
        (  # `get_activation`'s message named `activation`
            {"transform_activation": "bogus"},
            r"`transform_activation` must be None or one of \[.*\]. Received: "
            "transform_activation='bogus'",
        ),
    ],
)
def test_strings_bools_and_none_are_refused_by_name(kwargs, message):
    """`use_bias="no"` added a (V,) bias: a non-empty string is truthy."""
    with pytest.raises(ValueError, match=message):
        LMHead(**{"vocabulary_size": 10, **kwargs})


def test_a_model_calling_the_head_but_not_its_embedding_neither_trains_nor_reloads_the_tie(
    tmp_path,
):
    """A head over another model's embedding: the table is that model's weight, not this
    one's, and this one's `.keras` file cannot tie the loaded head to anything. Loading
    it said that `.keras` files keep the tie; it now says when they do."""
    embedding = TokenAndPositionEmbedding(30, 8, 6)
    token_ids = keras.Input((None,), dtype="int32")
    encoder = keras.Model(token_ids, embedding(token_ids))
    hidden = keras.Input((None, 6))
    decoder = keras.Model(hidden, LMHead(30, embedding=embedding)(hidden))
    assert any(w is embedding.embeddings for w in encoder.trainable_weights)
    assert not any(w is embedding.embeddings for w in decoder.trainable_weights)
    decoder.save(tmp_path / "decoder.keras")
    with pytest.raises(ValueError, match="only where the saved model calls the embedding itself"):
        keras.saving.load_model(tmp_path / "decoder.keras")
