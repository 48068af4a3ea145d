"""The layers inside users' own Keras code: Keras masks, functional models with a tied head
saved to `.keras` files, symbolic shapes, and clear errors for inputs of the wrong rank."""

import keras
import numpy as np
import pytest

from tests.layers.test_multi_head_attention import _built, _keras_mha_with_our_weights
from transformer_zoo.layers import (
    FeedForward,
    LMHead,
    MultiHeadAttention,
    PositionalEncoding,
    TokenAndPositionEmbedding,
    TransformerBlock,
)
from transformer_zoo.layers.masking import keras_mask

D, H, V = 16, 4, 12
IDS = np.array([[3, 4, 5, 0, 0], [6, 7, 8, 9, 0]], "int32")  # right-padded with 0
SOURCE_IDS = np.array([[2, 3, 0], [4, 5, 6]], "int32")
REAL = IDS != 0


def _masked(ids):
    """`(token_ids input, embedded sequence carrying the Keras mask of ids != 0)`."""
    token_ids = keras.Input((None,), dtype="int32")
    return token_ids, keras.layers.Embedding(V, D, mask_zero=True)(token_ids)


def test_attention_reads_the_keras_mask_as_keras_attention_does():
    token_ids, x = _masked(IDS)
    ours = MultiHeadAttention(num_heads=H)
    outputs = ours(x)
    model = keras.Model(token_ids, outputs)
    _built(ours, np.zeros((1, 5, D), "float32"))
    reference = keras.Model(token_ids, _keras_mha_with_our_weights(ours)(x, x, x))
    got, expected = model.predict(IDS, verbose=0), reference.predict(IDS, verbose=0)
    np.testing.assert_allclose(got[REAL], expected[REAL], atol=1e-5)
    assert outputs._keras_mask is not None  # carried on to the next layer


def test_block_reads_the_keras_mask_and_passes_it_on():
    token_ids, x = _masked(IDS)
    block = TransformerBlock(num_heads=H, intermediate_dim=32)
    pooled = keras.layers.GlobalAveragePooling1D()(block(x))  # averages real positions only
    model = keras.Model(token_ids, pooled)
    embedded = np.asarray(model.layers[1](IDS))  # without the Keras mask
    explicit = np.asarray(block(embedded, padding_mask=REAL))
    no_mask = np.asarray(block(embedded))
    expected = (explicit * REAL[..., None]).sum(1) / REAL.sum(1, keepdims=True)
    np.testing.assert_allclose(model.predict(IDS, verbose=0), expected, atol=1e-5)
    assert not np.allclose(explicit[REAL], no_mask[REAL], atol=1e-3)  # the mask matters


def test_cross_attention_reads_the_context_keras_mask():
    token_ids, x = _masked(IDS)
    source_ids = keras.Input((None,), dtype="int32")
    context = keras.layers.Embedding(V, D, mask_zero=True)(source_ids)
    block = TransformerBlock(num_heads=H, intermediate_dim=32, causal=True, cross_attention=True)
    model = keras.Model([token_ids, source_ids], block(x, context=context))
    target, source = np.asarray(model.layers[2](IDS)), np.asarray(model.layers[3](SOURCE_IDS))
    expected = block(
        target, context=source, padding_mask=REAL, context_padding_mask=SOURCE_IDS != 0
    )
    got = model.predict([IDS, SOURCE_IDS], verbose=0)
    np.testing.assert_allclose(got[REAL], np.asarray(expected)[REAL], atol=1e-5)


def test_functional_model_with_a_tied_head_loads_from_a_keras_file_still_tied(tmp_path):
    token_ids = keras.Input((None,), dtype="int32")
    embedding = TokenAndPositionEmbedding(V, 8, D, position_mode="learned")
    x = TransformerBlock(num_heads=H, intermediate_dim=32, norm_first=True, causal=True)(
        embedding(token_ids)
    )
    model = keras.Model(token_ids, LMHead(V, embedding=embedding)(x))
    model.save(tmp_path / "lm.keras")
    loaded = keras.saving.load_model(tmp_path / "lm.keras")
    np.testing.assert_array_equal(loaded.predict(IDS, verbose=0), model.predict(IDS, verbose=0))
    (head,) = [layer for layer in loaded.layers if isinstance(layer, LMHead)]
    (loaded_embedding,) = [
        layer for layer in loaded.layers if isinstance(layer, TokenAndPositionEmbedding)
    ]
    assert head.embedding is loaded_embedding  # one matrix, not a copy
    assert len(loaded.trainable_weights) == len(model.trainable_weights)
    # Outside a `.keras` file the config cannot share the embedding: a clear error, not a
    # silently untied copy.
    with pytest.raises(ValueError, match="pass the embedding again"):
        keras.Model.from_config(model.get_config())


def test_a_head_in_a_nested_model_stays_tied_to_the_outer_models_embedding(tmp_path):
    """The documented nesting that a `.keras` file keeps: the embedding called in the
    outer model before the nested model holding the head. The loaded head reads the
    loaded outer embedding's table (one matrix), with the same logits."""
    embedding = keras.layers.Embedding(V, D)
    hidden = keras.Input((None, D))
    head = LMHead(V, embedding=embedding, use_bias=True)
    block = TransformerBlock(num_heads=H, intermediate_dim=32, causal=True)
    decoder = keras.Model(hidden, head(block(hidden)), name="decoder")
    token_ids = keras.Input((None,), dtype="int32")
    model = keras.Model(token_ids, decoder(embedding(token_ids)))
    model.save(tmp_path / "nested.keras")
    loaded = keras.saving.load_model(tmp_path / "nested.keras")
    np.testing.assert_array_equal(loaded.predict(IDS, verbose=0), model.predict(IDS, verbose=0))
    loaded_head = loaded.get_layer("decoder").layers[-1]
    assert loaded_head.embedding is loaded.get_layer(embedding.name)
    table = np.asarray(loaded_head.embedding.embeddings)
    h = np.random.default_rng(0).normal(size=(2, 3, D)).astype("float32")
    expected = h @ table.T + np.asarray(loaded_head.bias)  # the loaded table, transposed
    np.testing.assert_allclose(np.asarray(loaded_head(h)), expected, atol=1e-5)


def test_inputs_and_masks_of_the_wrong_shape_are_refused_by_name():
    x = np.zeros((2, 5, D), "float32")
    attention = MultiHeadAttention(num_heads=H)
    attention(x)
    with pytest.raises(ValueError, match=r"`query` must be a \(B, T, D\).*shape=\(2, 16\)"):
        attention(x[:, 0])
    with pytest.raises(ValueError, match="goes in `padding_mask`"):
        attention(x, attention_mask=REAL)  # a (B, S) mask would broadcast over the heads
    with pytest.raises(ValueError, match=r"S=5 keys.*shape=\(2, 6\)"):
        attention(x, padding_mask=np.ones((2, 6), bool))
    with pytest.raises(ValueError, match=r"`padding_mask` must be \(B, S\)"):
        attention(x, x, x)  # Keras' (query, value, key): our third argument is the mask
    with pytest.raises(ValueError, match="has no cross-attention"):
        TransformerBlock(num_heads=H, intermediate_dim=32)(x, context=x)


def test_output_shapes_are_known_without_running_the_layers():
    shape = (None, None, D)
    assert MultiHeadAttention(num_heads=H, output_dim=6).compute_output_shape(shape) == (
        None,
        None,
        6,
    )
    assert TransformerBlock(num_heads=H, intermediate_dim=32).compute_output_shape(shape) == shape
    assert FeedForward(32).compute_output_shape(shape) == shape
    # The encodings have the shape of the embeddings, symbolically as they run.
    encoding = PositionalEncoding(16)
    assert tuple(encoding(keras.Input((5, D))).shape) == (None, 5, D)
    assert encoding.compute_output_shape((3, 5, D)) == encoding(np.zeros((3, 5, D))).shape


def test_bad_positions_and_arguments_are_refused_by_name():
    encoding = PositionalEncoding(16, mode="learned")
    with pytest.raises(ValueError, match="Positions must be ≥ 0"):
        encoding(np.zeros((1, 3, D)), start_index=-2)  # would wrap to the table's last rows
    with pytest.raises(ValueError, match="Positions must be ≥ 0"):
        encoding(np.zeros((1, 3, D)), positions=np.array([[-1, 0, 1]]))
    with pytest.raises(ValueError, match="position_mode='rotary'"):
        TokenAndPositionEmbedding(V, 8, D, position_mode="rotary")
    with pytest.raises(ValueError, match="output_dim=0"):
        MultiHeadAttention(num_heads=H, output_dim=0)
    with pytest.raises(ValueError, match="`embedding` must be"):
        LMHead(V, embedding=keras.layers.Dense(4))


@pytest.mark.parametrize(
    "make",
    [lambda: FeedForward(32), lambda: LMHead(V), lambda: keras.layers.Dense(V)],
    ids=["feed_forward", "lm_head", "keras_dense"],
)
def test_position_wise_layers_carry_the_keras_mask_on_as_a_dense_does(make):
    embedded = keras.layers.Embedding(V, D, mask_zero=True)(IDS)  # eager, with its Keras mask
    outputs = make()(embedded)
    np.testing.assert_array_equal(np.asarray(keras_mask(outputs)), REAL)
    # Symbolically too: the next layer of a functional model receives it.
    _, x = _masked(IDS)
    assert make()(x)._keras_mask is not None


@pytest.mark.parametrize("head", ["lm_head", "dense"])
def test_padding_after_a_masked_embedding_changes_neither_the_attention_nor_the_loss(head):
    """Embedding(mask_zero=True) → FeedForward → block → head: right padding leaves the
    real positions' logits and the masked loss as they are without it, as with the Keras
    `Dense` layer in the head's place."""
    embedding = keras.layers.Embedding(V, D, mask_zero=True)
    feed_forward = FeedForward(32)
    block = TransformerBlock(num_heads=H, intermediate_dim=32, causal=False)
    output = LMHead(V) if head == "lm_head" else keras.layers.Dense(V)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def run(ids):
        logits = output(block(feed_forward(embedding(ids))))
        return np.asarray(logits), float(loss(ids, logits))

    short = np.array([[3, 4, 5, 6]], "int32")
    short_logits, short_loss = run(short)
    padded_logits, padded_loss = run(np.pad(short, ((0, 0), (0, 4))))
    np.testing.assert_allclose(padded_logits[:, :4], short_logits, atol=1e-5)
    np.testing.assert_allclose(padded_loss, short_loss, rtol=1e-5)
