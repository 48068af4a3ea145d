import numpy as np
import pytest

from transformer_zoo.layers import causal_mask, merge_masks


def test_causal_mask_is_lower_triangular_offset_by_the_past():
    np.testing.assert_array_equal(np.asarray(causal_mask(3, 3)), np.tril(np.ones((3, 3), bool)))
    np.testing.assert_array_equal(np.asarray(causal_mask(np.int64(1), 3)), [[True] * 3])


@pytest.mark.parametrize("lengths", [(4.0, 4), (4, 4.5), (True, 4)])
def test_causal_mask_refuses_lengths_that_are_not_integers(lengths):
    with pytest.raises(ValueError, match="_length` must be a non-negative integer"):
        causal_mask(*lengths)


def test_merge_masks_takes_booleans_and_0_1_values_not_additive_masks():
    # 0/1 floats too: Keras hands the layers a float32 mask under a distribution strategy.
    real = np.array([[True, True, False]])
    expected = np.asarray(merge_masks(3, 3, padding_mask=real))
    for dtype in ("int64", "float32"):
        np.testing.assert_array_equal(
            np.asarray(merge_masks(3, 3, padding_mask=real.astype(dtype))), expected
        )
    with pytest.raises(ValueError, match="`padding_mask` must be boolean.*float64.*additive"):
        merge_masks(3, 3, padding_mask=np.where(real, 0.0, -np.inf))
    with pytest.raises(ValueError, match="`causal` must be True or False"):
        merge_masks(3, 3, causal="yes")


def _causal_reference(t, s):
    """Query i sees keys up to i + s - t: the last query is aligned with the last key."""
    return np.arange(s)[None, :] <= np.arange(t)[:, None] + (s - t)


@pytest.mark.parametrize("lengths", [(3, 3), (2, 5), (1, 4)])
def test_causal_mask_of_unknown_lengths_counts_along_like(lengths):
    """A functional model's symbolic lengths are None: `key_length - query_length` failed."""
    reference = _causal_reference(*lengths)
    like = np.zeros(lengths, "float32")
    np.testing.assert_array_equal(np.asarray(causal_mask(None, None, like=like)), reference)
    np.testing.assert_array_equal(np.asarray(causal_mask(*lengths)), reference)
    merged = merge_masks(None, None, causal=True, like=like)
    np.testing.assert_array_equal(np.asarray(merged), reference[None])


def test_causal_mask_refuses_more_queries_than_keys_and_unknown_lengths_without_like():
    """With T > S the first T - S rows were all False: those queries attended every key."""
    with pytest.raises(ValueError, match=r"first 2 queries would see none.*np\.tril"):
        causal_mask(5, 3)
    with pytest.raises(ValueError, match="pass it as `like`"):
        causal_mask(None, 3)


def test_masks_given_as_python_lists_are_read_as_their_arrays():
    """A list has no `.shape`: AttributeError inside the checks."""
    real = [[1, 1, 0]]
    expected = np.asarray(merge_masks(3, 3, padding_mask=np.array(real, bool)))
    np.testing.assert_array_equal(np.asarray(merge_masks(3, 3, padding_mask=real)), expected)
    rows = [[True, False, False], [True, True, False], [True, True, True]]
    got = merge_masks(3, 3, attention_mask=[rows], batch_size=1)
    np.testing.assert_array_equal(np.asarray(got), np.array([rows]))


def test_a_t_by_s_attention_mask_applies_to_every_sequence_as_in_keras():
    """Keras' MultiHeadAttention broadcasts a (T, S) `attention_mask` over the batch; ours
    refused it as not (B, T, S), though its `use_causal_mask` refusal advises
    `np.tril(np.ones((T, S), bool))`."""
    tril = np.tril(np.ones((2, 4), bool))
    real = np.array([[True, True, True, False], [True, True, True, True]])
    got = merge_masks(2, 4, padding_mask=real, attention_mask=tril, batch_size=2)
    np.testing.assert_array_equal(np.asarray(got), real[:, None, :] & tril[None])
    # A (B, S) padding mask passed as `attention_mask` is still refused where T ≠ B.
    with pytest.raises(ValueError, match=r"length T=2 .*goes in `padding_mask`"):
        merge_masks(2, 4, attention_mask=np.ones((3, 4), bool), batch_size=3)


def test_integer_masks_of_other_values_and_float_masks_of_zeros_only_are_refused():
    """An integer additive mask (0 / -10000) was cast to bool and read inverted; a float
    additive mask of a batch without padding (all 0) read as "attend to nothing", every
    query spread evenly over every key."""
    additive = np.array([[0, 0, -10000]], "int32")
    with pytest.raises(ValueError, match="`padding_mask` must be boolean.*int32.*`mask == 0`"):
        merge_masks(3, 3, padding_mask=additive)
    with pytest.raises(ValueError, match="`attention_mask` of dtype float32 holds zeros only"):
        merge_masks(3, 3, attention_mask=np.zeros((1, 3, 3), "float32"))
    # Booleans and integers masking every key mean what they say.
    for dtype in ("bool", "int64"):
        got = merge_masks(3, 3, padding_mask=np.zeros((1, 3), dtype))
        np.testing.assert_array_equal(np.asarray(got), np.zeros((1, 1, 3), bool))
