import math

import keras
import numpy as np
import pytest

from tests.helpers import np_sinusoid
from transformer_zoo.layers import TokenAndPositionEmbedding, TransformerBlock


def test_paper_embedding_is_scaled_token_vector_plus_sinusoid():
    layer = TokenAndPositionEmbedding(vocabulary_size=20, max_length=16, embedding_dim=8)
    ids = np.array([[3, 7, 1, 0]])
    out = np.asarray(layer(ids))
    table = np.asarray(layer.embeddings)
    expected = table[ids[0]] * math.sqrt(8) + np_sinusoid(4, 8)
    np.testing.assert_allclose(out[0], expected, atol=1e-5)


def test_bert_style_embedding_sums_unscaled_token_learned_position_and_segment():
    layer = TokenAndPositionEmbedding(
        20, 16, 8, position_mode="learned", scale_embeddings=False, type_vocabulary_size=2
    )
    ids, segments = np.array([[3, 7, 1]]), np.array([[0, 1, 1]])
    out = np.asarray(layer(ids, segment_ids=segments))
    tok = np.asarray(layer.embeddings)[ids[0]]
    pos = np.asarray(layer.position_encoding.position_embeddings)[:3]
    seg = np.asarray(layer.segment_embedding.embeddings)[segments[0]]
    np.testing.assert_allclose(out[0], tok + pos + seg, atol=1e-6)
    # Without segment ids every token is in segment 0, as in BERT.
    default = np.asarray(layer(ids))
    seg0 = np.asarray(layer.segment_embedding.embeddings)[0]
    np.testing.assert_allclose(default[0], tok + pos + seg0, atol=1e-6)


@pytest.mark.parametrize("bad_id", [20, 999, -1])
def test_token_ids_outside_the_vocabulary_are_rejected(bad_id):
    layer = TokenAndPositionEmbedding(20, 16, 8)
    with pytest.raises(ValueError, match=rf"\[0, 20\).*{bad_id}"):
        layer(np.array([[1, bad_id, 2]]))


def test_over_long_sequences_are_rejected():
    layer = TokenAndPositionEmbedding(20, 4, 8)
    with pytest.raises(ValueError, match="too long.*max_length=4"):
        layer(np.ones((1, 5), "int32"))


def test_segment_ids_without_segment_table_are_rejected():
    layer = TokenAndPositionEmbedding(20, 4, 8)
    with pytest.raises(ValueError, match="type_vocabulary_size"):
        layer(np.ones((1, 2), "int32"), segment_ids=np.zeros((1, 2), "int32"))


def test_bad_arguments_name_the_argument():
    with pytest.raises(ValueError, match="vocabulary_size=0"):
        TokenAndPositionEmbedding(0, 4, 8)
    with pytest.raises(ValueError, match="dropout=1.5"):
        TokenAndPositionEmbedding(10, 4, 8, dropout=1.5)
    with pytest.raises(ValueError, match="type_vocabulary_size=-1"):
        TokenAndPositionEmbedding(10, 4, 8, type_vocabulary_size=-1)
    # Its `PositionalEncoding` calls it `layout`: the message named that argument.
    with pytest.raises(ValueError, match="`position_layout` must be one of .*position_layout='x'"):
        TokenAndPositionEmbedding(10, 4, 8, position_layout="x")


@pytest.mark.parametrize("shape", [(2, 3), (3, 4), (2, 4, 1)])
def test_segment_ids_of_another_shape_are_refused_by_name(shape):
    """A (2, 3) segment for (2, 4) ids failed inside TensorFlow's add (AddV2), naming
    neither argument; in a functional model (shapes known, ids not) too."""
    layer = TokenAndPositionEmbedding(10, 8, 8, type_vocabulary_size=2)
    message = r"`segment_ids` must be \(B, T\) = \(2, 4\) like `token_ids`"
    with pytest.raises(ValueError, match=message):
        layer(np.ones((2, 4), "int32"), segment_ids=np.zeros(shape, "int32"))
    with pytest.raises(ValueError, match=r"`segment_ids` must be .*segment_ids.shape=\(None, 3\)"):
        layer(keras.Input((4,), dtype="int32"), segment_ids=keras.Input((3,), dtype="int32"))
    # One row of segments for the batch broadcasts, as one row of positions does.
    ids, segments = np.array([[1, 2, 3, 4], [5, 6, 7, 8]]), np.array([[0, 0, 1, 1]])
    np.testing.assert_allclose(
        layer(ids, segment_ids=segments), layer(ids, segment_ids=np.tile(segments, (2, 1)))
    )


@pytest.mark.parametrize("shape", [(3,), (2, 3, 4)])
def test_token_ids_that_are_not_b_by_t_are_refused_by_name(shape):
    with pytest.raises(ValueError, match=r"`token_ids` must be \(B, T\)") as error:
        TokenAndPositionEmbedding(20, 8, 8)(np.ones(shape, "int32"))
    assert f"token_ids.shape={shape}" in str(error.value)


def test_the_default_segment_after_int8_quantization_is_the_looked_up_segment_zero():
    """Without `segment_ids` every token is in segment 0; after `quantize("int8")` that row
    must be dequantized as an explicit `segment_ids=0` lookup is, not added as raw int8."""
    layer = TokenAndPositionEmbedding(20, 16, 8, type_vocabulary_size=2)
    ids = np.array([[3, 7, 1], [2, 0, 5]])
    layer(ids)
    layer.token_embedding.quantize("int8")
    layer.segment_embedding.quantize("int8")
    explicit = np.asarray(layer(ids, segment_ids=np.zeros_like(ids)))
    np.testing.assert_allclose(np.asarray(layer(ids)), explicit, atol=1e-6)


def test_mask_zero_masks_the_padding_and_survives_its_config():
    layer = TokenAndPositionEmbedding(20, 16, 8, mask_zero=True)
    ids = np.array([[3, 7, 0, 0], [2, 4, 5, 0]])
    np.testing.assert_array_equal(np.asarray(layer(ids)._keras_mask), ids != 0)
    config = layer.get_config()
    assert config["mask_zero"] is True
    assert TokenAndPositionEmbedding.from_config(config).mask_zero
    assert getattr(TokenAndPositionEmbedding(20, 16, 8)(ids), "_keras_mask", None) is None


def test_with_mask_zero_a_block_gives_padded_inputs_the_outputs_of_unpadded_ones():
    """The mask reaches the attention of the next layer: padding changes no real position
    (without it, the real tokens would attend to the padding)."""
    keras.utils.set_random_seed(0)
    token_ids = keras.Input((None,), dtype="int32")
    embedding = TokenAndPositionEmbedding(20, 16, 8, mask_zero=True)
    model = keras.Model(token_ids, TransformerBlock(2, 16)(embedding(token_ids)))
    short = np.array([[3, 7, 1]])
    padded = np.array([[3, 7, 1, 0, 0]])
    np.testing.assert_allclose(
        np.asarray(model(padded))[:, :3], np.asarray(model(short)), atol=1e-5
    )


def test_float_ids_are_refused_not_truncated():
    """Ids [[1.7, 2.2]] were embedded as [[1, 2]], without a word."""
    layer = TokenAndPositionEmbedding(20, 4, 8, type_vocabulary_size=2)
    with pytest.raises(ValueError, match="`token_ids` must hold integer token ids.*float32"):
        layer(np.array([[1.7, 2.2]], "float32"))
    with pytest.raises(ValueError, match="`segment_ids` must hold integer segment ids"):
        layer(np.array([[1, 2]]), segment_ids=np.array([[0.0, 1.0]]))


def test_a_float_placeholder_still_builds_it_as_keras_loads_a_subclassed_model():
    """Keras' `build_from_config` (loading a `.keras` file) traces a subclassed model on
    float placeholders: only ids whose values are known are checked, or the loaded model
    would stay unbuilt and its weights unloaded."""

    class Tiny(keras.Model):
        def __init__(self):
            super().__init__()
            self.embedding = TokenAndPositionEmbedding(20, 4, 8)

        def call(self, token_ids):
            return self.embedding(token_ids)

    model = Tiny()
    model.build_from_config({"input_shape": (2, 3)})
    assert model.embedding.built


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"scale_embeddings": "no"}, "scale_embeddings='no'"),
        ({"mask_zero": "no"}, "mask_zero='no'"),
        ({"type_vocabulary_size": True}, "type_vocabulary_size=True"),
        ({"dropout": "0.1"}, "dropout='0.1'"),
    ],
)
def test_strings_and_bools_are_refused_by_name(kwargs, message):
    """`scale_embeddings="no"` scaled by √D and `mask_zero="no"` masked: non-empty strings
    are truthy."""
    with pytest.raises(ValueError, match=message):
        TokenAndPositionEmbedding(20, 4, 8, **kwargs)


def test_an_odd_width_with_sinusoidal_positions_is_refused_at_construction_by_name():
    """It used to construct, then fail at the first call naming `inputs_shape`."""
    with pytest.raises(ValueError, match="must be even. Received: embedding_dim=7"):
        TokenAndPositionEmbedding(100, 16, 7)
    TokenAndPositionEmbedding(100, 16, 7, position_mode="learned")  # no sine/cosine pairs
