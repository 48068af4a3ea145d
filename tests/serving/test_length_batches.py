"""length_batches: every text once, at most batch_size per batch, and never more padding
than fixed-size batches of the sorted texts."""

import numpy as np
import pytest

from transformer_zoo.serving.length_batches import length_batches


def padded(lengths, batches):
    lengths = np.asarray(lengths)
    return sum(int(lengths[b].max()) * len(b) for b in batches)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("batch_size", [1, 3, 32])
def test_batches_cover_every_text_once_and_pad_no_more_than_sorted_fixed_batches(seed, batch_size):
    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.lognormal(2.7, 0.6, 200).astype(int), 2, 256)
    batches = length_batches(lengths, batch_size)
    assert sorted(np.concatenate(batches).tolist()) == list(range(200))
    assert all(1 <= len(b) <= batch_size for b in batches)
    order = np.argsort(-lengths, kind="stable")
    fixed = [order[i : i + batch_size] for i in range(0, 200, batch_size)]
    assert padded(lengths, batches) <= padded(lengths, fixed)


def test_an_outlier_gets_its_own_batch_instead_of_padding_the_others():
    lengths = [15] * 40 + [256] + [14] * 23
    batches = length_batches(lengths, 32)
    assert [b.tolist() for b in batches[:1]] == [[40]]
    assert padded(lengths, batches) == 256 + 15 * 40 + 14 * 23


def test_equal_lengths_make_full_batches_in_input_order():
    batches = length_batches([7] * 70, 32)
    assert [len(b) for b in batches] == [32, 32, 6]
    assert np.concatenate(batches).tolist() == list(range(70))


def test_bad_batch_size_is_refused():
    with pytest.raises(ValueError, match="batch_size"):
        length_batches([3, 4], 0)
    with pytest.raises(ValueError, match="batch_size"):
        length_batches([3], 0)  # a lone text too


def test_a_lone_text_is_one_batch():
    for padding_free in (False, True):
        batches = length_batches([300], 32, padding_free=padding_free)
        assert [b.tolist() for b in batches] == [[0]]
        assert batches[0].dtype.kind == "i"


def test_a_padding_free_graph_batches_mixed_lengths_together_but_not_an_outlier():
    """Padding costs a padding-free graph attention only: texts of 5 to 40 tokens share a
    batch there (sorted, they would be cut into several), while a 256-token text, whose
    attention would cost more than the batch's tokens, still runs alone."""
    lengths = [5, 40, 12, 30, 8, 22, 17, 35, 9, 14, 27, 6, 19, 33, 11, 25]
    assert len(length_batches(lengths, 32)) > 1
    assert [len(b) for b in length_batches(lengths, 32, padding_free=True)] == [16]
    batches = length_batches(lengths + [256], 32, padding_free=True)
    assert [b.tolist() for b in batches] == [[16], sorted(range(16), key=lambda i: -lengths[i])]
