import warnings

import keras
import numpy as np
import pytest

from tests.helpers import np_sinusoid
from transformer_zoo.layers import PositionalEncoding, TransformerBlock
from transformer_zoo.layers.masking import keras_mask


def test_sinusoidal_table_equals_the_papers_formula():
    pe = PositionalEncoding(max_length=64)
    out = np.asarray(pe(np.zeros((2, 50, 32), "float32")))
    assert out.shape == (2, 50, 32)
    np.testing.assert_allclose(out[0], np_sinusoid(50, 32), atol=2e-5)
    np.testing.assert_array_equal(out[1], out[0])


def test_even_dimensions_are_sine_and_odd_dimensions_are_cosine_at_position_zero():
    out = np.asarray(PositionalEncoding(8)(np.zeros((1, 1, 6), "float32")))[0, 0]
    np.testing.assert_allclose(out[0::2], 0.0, atol=1e-7)  # sin(0)
    np.testing.assert_allclose(out[1::2], 1.0, atol=1e-7)  # cos(0)


def test_start_index_gives_the_later_rows_of_the_table():
    pe = PositionalEncoding(max_length=40)
    out = np.asarray(pe(np.zeros((1, 3, 16), "float32"), start_index=7))
    np.testing.assert_allclose(out[0], np_sinusoid(3, 16, start=7), atol=2e-5)


def test_explicit_positions_are_per_example():
    pe = PositionalEncoding(max_length=40)
    positions = np.array([[0, 1, 2], [5, 6, 7]])
    out = np.asarray(pe(np.zeros((2, 3, 16), "float32"), positions=positions))
    np.testing.assert_allclose(out[1], np_sinusoid(3, 16, start=5), atol=2e-5)
    np.testing.assert_allclose(out[0], np_sinusoid(3, 16), atol=2e-5)


def test_learned_mode_looks_up_its_table():
    pe = PositionalEncoding(max_length=10, mode="learned")
    out = np.asarray(pe(np.zeros((1, 4, 6), "float32"), start_index=2))
    table = np.asarray(pe.position_embeddings)
    np.testing.assert_allclose(out[0], table[2:6])


@pytest.mark.parametrize("mode", ["sinusoidal", "learned"])
def test_sequences_longer_than_max_length_are_rejected(mode):
    pe = PositionalEncoding(max_length=8, mode=mode)
    with pytest.raises(ValueError, match="too long.*max_length=8"):
        pe(np.zeros((1, 9, 4), "float32"))
    with pytest.raises(ValueError, match="too long"):
        pe(np.zeros((1, 4, 4), "float32"), start_index=5)
    with pytest.raises(ValueError, match="too long"):
        pe(np.zeros((1, 2, 4), "float32"), positions=np.array([[3, 8]]))


def test_bad_arguments_name_the_argument():
    with pytest.raises(ValueError, match="max_length=0"):
        PositionalEncoding(0)
    with pytest.raises(ValueError, match="mode='rotary'"):
        PositionalEncoding(8, mode="rotary")
    with pytest.raises(ValueError, match="even"):
        PositionalEncoding(8)(np.zeros((1, 2, 5), "float32"))


@pytest.mark.parametrize("shape", [(2, 8), (2, 3, 4, 8)])
def test_inputs_that_are_not_batches_of_sequences_are_refused_by_name(shape):
    with pytest.raises(ValueError, match=r"`inputs` must be \(B, T, D\)") as error:
        PositionalEncoding(8)(np.zeros(shape, "float32"))
    assert f"inputs.shape={shape}" in str(error.value)


@pytest.mark.parametrize("mode", ["sinusoidal", "learned"])
def test_output_shape_is_computed_as_the_call_returns_it(mode):
    encoding = PositionalEncoding(16, mode=mode)
    x = np.zeros((3, 5, 8), "float32")
    positions = np.tile(np.arange(5), (3, 1))
    assert encoding.compute_output_shape(x.shape) == encoding(x).shape == (3, 5, 8)
    with_positions = encoding(x, positions=positions).shape
    assert encoding.compute_output_shape(x.shape, positions.shape) == with_positions == (3, 5, 8)
    broadcast = encoding(x, positions=positions[:1]).shape
    assert encoding.compute_output_shape(x.shape, (1, 5)) == broadcast == (3, 5, 8)
    assert encoding.compute_output_shape((None, None, 8)) == (None, None, 8)


def test_a_masked_embedding_feeds_it_without_keras_warning_of_a_destroyed_mask():
    """Only the input's shape is read, so a mask is no loss: Keras warned that the layer
    "will destroy the mask information" after `Embedding(mask_zero=True)`."""
    ids = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(50, 16, mask_zero=True)(ids)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        encoding = PositionalEncoding(max_length=32)(embedded)
    assert not [w for w in caught if "mask" in str(w.message)]
    model = keras.Model(ids, encoding)
    padded = np.array([[5, 7, 0, 0]])
    np.testing.assert_allclose(  # the same encodings as without a mask
        model(padded), PositionalEncoding(max_length=32)(np.zeros((1, 4, 16))), atol=1e-6
    )


@pytest.mark.parametrize("mode", ["sinusoidal", "learned"])
def test_fractional_positions_are_refused_not_truncated(mode):
    """Positions (0.5, 1.5, 2.7) were cast to (0, 1, 2) by the learned table and read as
    fractional angles by the sinusoidal one; `start_index=2.5` likewise."""
    pe = PositionalEncoding(16, mode=mode)
    x = np.zeros((1, 3, 8), "float32")
    with pytest.raises(ValueError, match="`positions` must hold integer positions.*float"):
        pe(x, positions=np.array([[0.5, 1.5, 2.7]]))
    with pytest.raises(ValueError, match="`start_index` must hold integer positions.*float"):
        pe(x, start_index=2.5)
    np.testing.assert_allclose(
        np.asarray(pe(x, start_index=np.int64(2))),
        np.asarray(pe(x, positions=np.array([[2, 3, 4]])))[:1],
    )


@pytest.mark.parametrize("mode", ["sinusoidal", "learned"])
@pytest.mark.parametrize("shape", [(3, 3), (2, 5), (3,), (2, 3, 1)])
def test_positions_of_another_shape_are_refused_by_name(mode, shape):
    """Another batch's or length's positions failed inside TensorFlow's add, a (T,) vector
    with an IndexError; (1, T) broadcasts over the batch as documented."""
    pe = PositionalEncoding(16, mode=mode)
    x = np.zeros((2, 3, 8), "float32")
    with pytest.raises(ValueError, match=r"`positions` must be \(B, T\) = \(2, 3\)"):
        pe(x, positions=np.zeros(shape, "int32"))
    with pytest.raises(ValueError, match=r"`positions` must be \(B, T\) = \(2, 3\)"):
        pe(x, positions=np.zeros(shape, "int32").tolist())  # a list as well
    broadcast = np.asarray(pe(x, positions=[[4, 5, 6]]))  # (1, T) positions; a list too
    np.testing.assert_allclose(broadcast, np.asarray(pe(x, positions=np.array([[4, 5, 6]] * 2))))


@pytest.mark.parametrize("mode", ["sinusoidal", "learned"])
def test_added_with_keras_add_the_encodings_keep_the_embeddings_padding_mask(mode):
    """`Embedding(mask_zero=True)` → `Add()([x, pe])` → block → average: padding changes
    no output, as on the same ids without padding. The encodings returned no mask, and
    Keras' `Add` drops the masks when one input has none: padding moved the averages by
    0.3-0.6."""
    token_ids = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(50, 16, mask_zero=True)(token_ids)
    encoding = PositionalEncoding(max_length=32, mode=mode)(embedded)
    x = keras.layers.Add()([embedded, encoding])
    block = TransformerBlock(num_heads=2, intermediate_dim=32)
    model = keras.Model(token_ids, keras.layers.GlobalAveragePooling1D()(block(x)))
    short = np.array([[5, 7, 9], [3, 4, 6]], "int32")
    padded = np.pad(short, ((0, 0), (0, 4)))
    np.testing.assert_allclose(model(padded), model(short), atol=1e-5)
    assert keras_mask(x) is not None
    eager = model.layers[1](padded)  # carrying the mask padded != 0
    np.testing.assert_array_equal(np.asarray(keras_mask(model.layers[2](eager))), padded != 0)


@pytest.mark.parametrize("batch_size", [None, 2])
def test_added_with_keras_add_the_batch_is_the_embeddings_batch(batch_size):
    """The documented `Add()([x, pe])`: the encodings were (1, T, D), so the sum's (and
    the model's) batch dimension became 1, and a fixed batch of 2 was refused ("Cannot
    merge tensors with different batch sizes")."""
    token_ids = keras.Input((None,), batch_size=batch_size, dtype="int32")
    embedded = keras.layers.Embedding(50, 8, mask_zero=True)(token_ids)
    x = keras.layers.Add()([embedded, PositionalEncoding(max_length=16)(embedded)])
    assert tuple(x.shape) == (batch_size, None, 8)
    model = keras.Model(token_ids, x)
    ids = np.array([[5, 7, 9, 0], [3, 4, 6, 8]], "int32")
    table = np.asarray(model.layers[1].embeddings)
    np.testing.assert_allclose(model(ids), table[ids] + np_sinusoid(4, 8), atol=1e-5)
