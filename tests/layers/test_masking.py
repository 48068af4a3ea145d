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
