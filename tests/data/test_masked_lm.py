"""Masked-LM batches: BERT's 15% / 80-10-10 corruption, never on padding or specials."""

from collections import Counter

import numpy as np
import pytest
import tensorflow as tf

from transformer_zoo.data.masked_lm import mask_tokens, masked_lm_dataset
from transformer_zoo.text.formats import pair_ids

SPECIALS = (0, 2, 3, 4)


def _batches(dataset):
    return [({k: v.numpy() for k, v in x.items()}, y.numpy(), w.numpy()) for x, y, w in dataset]


@pytest.fixture(scope="module")
def texts(dates):
    return [(p.source, p.target) for p in dates.pairs("train")[:1500]]


def test_masking_corrupts_about_15_percent_of_ordinary_tokens_as_bert_does(texts, shared_tokenizer):
    picked = ordinary = to_mask = kept = 0
    originals = Counter()
    for inputs, labels, weights in _batches(masked_lm_dataset(texts, shared_tokenizer, 64)):
        np.testing.assert_array_equal(weights, (labels != 0).astype(np.float32))
        ids = inputs["token_ids"]
        original = np.where(labels != 0, labels, ids)
        np.testing.assert_array_equal(inputs["padding_mask"], original != 0)
        chosen = labels != 0
        assert not np.isin(labels[chosen], SPECIALS).any()  # specials are never picked
        picked += chosen.sum()
        ordinary += (~np.isin(original, SPECIALS)).sum()
        to_mask += (ids[chosen] == 4).sum()
        kept += (ids[chosen] == labels[chosen]).sum()
        for row, segments in zip(original, inputs["segment_ids"], strict=True):
            n = int((row != 0).sum())
            originals[tuple(row[:n]), tuple(segments[:n])] += 1
    # The uncorrupted sequences are the classification packing of the same texts.
    expected = Counter(tuple(map(tuple, pair_ids(shared_tokenizer, a, b))) for a, b in texts)
    assert originals == expected
    assert abs(picked / ordinary - 0.15) < 0.01
    assert abs(to_mask / picked - 0.8) < 0.03
    assert abs(kept / picked - 0.1) < 0.03  # (a random replacement may also hit the original)


def test_random_replacements_are_ordinary_ids_above_the_mask_id():
    """BERT's 10% random replacements are drawn from the ids above `mask_id` (the
    docstring's contract), never padding, the begin/end ids, unknown or `<mask>` itself;
    a token not picked is left as it was. Checked with numpy on one large batch."""
    mask_id, size = 4, 50
    ids = np.random.default_rng(0).integers(mask_id + 1, size, size=(64, 128))
    corrupted, labels = mask_tokens(
        tf.constant(ids, tf.int32), tf.constant([1, 2], tf.int64), mask_id, size,
        mask_rate=0.5, special_ids=[0, 1, 2, 3],
    )  # fmt: skip
    corrupted, labels = corrupted.numpy(), labels.numpy()
    picked = labels != 0
    np.testing.assert_array_equal(labels[picked], ids[picked])
    np.testing.assert_array_equal(corrupted[~picked], ids[~picked])
    replaced = corrupted[picked & (corrupted != mask_id) & (corrupted != ids)]
    assert len(replaced) > 0.05 * picked.sum()  # about 10%, less those equal to the original
    assert replaced.min() > mask_id and replaced.max() < size  # no special id, no <mask>
    assert set(replaced.tolist()) == set(range(mask_id + 1, size))  # every ordinary id


def test_masks_are_drawn_anew_every_epoch_and_repeat_for_a_seed(texts, shared_tokenizer):
    def epochs(seed, count):
        dataset = masked_lm_dataset(texts[:200], shared_tokenizer, 50, seed=seed)
        return [np.concatenate([y.ravel() for _, y, _ in _batches(dataset)]) for _ in range(count)]

    first, second = epochs(5, 2)
    assert not np.array_equal(first, second)
    np.testing.assert_array_equal(epochs(5, 1)[0], first)


def test_single_texts_are_packed_without_a_second_segment(shared_tokenizer):
    (inputs, _, _) = _batches(
        masked_lm_dataset(["March 5, 2021"], shared_tokenizer, mask_rate=0.01)
    )[0]
    ids, segments = pair_ids(shared_tokenizer, "March 5, 2021")
    assert list(inputs["segment_ids"][0]) == segments == [0] * len(ids)


def test_masked_lm_needs_a_mask_piece_and_a_sane_rate(texts, shared_tokenizer, monkeypatch):
    with pytest.raises(ValueError, match="mask_rate"):
        masked_lm_dataset(texts, shared_tokenizer, mask_rate=1.5)
    monkeypatch.setattr(type(shared_tokenizer), "mask_id", property(lambda self: None))
    with pytest.raises(ValueError, match="<mask>"):
        masked_lm_dataset(texts, shared_tokenizer)


def test_an_imported_wordpiece_tokenizer_packs_as_serving_and_never_masks_cls_or_sep():
    """It failed (`'WordPieceTokenizer' object has no attribute 'proto'`), and the fixed
    special ids 0/2/3 would have let `[CLS]` and `[SEP]` be picked."""
    from tests.artifacts import WORDPIECE_VOCABULARY
    from transformer_zoo.text.formats import encoder_rows
    from transformer_zoo.text.wordpiece import WordPieceTokenizer

    tokenizer = WordPieceTokenizer(WORDPIECE_VOCABULARY, max_length=16)
    texts = [("the cat sat on the mat", "a quick fox"), "the dogs sat"] * 200
    never = {tokenizer.pad_id, tokenizer.cls_id, tokenizer.sep_id}
    rows = {tuple(ids) for ids, _ in encoder_rows(tokenizer, ["the cat sat on the mat", "the dogs sat"], ["a quick fox", None])}  # fmt: skip
    picked = 0
    for inputs, labels, _ in _batches(masked_lm_dataset(texts, tokenizer, 32, max_length=16)):
        original = np.where(labels != 0, labels, inputs["token_ids"])
        assert {tuple(row[row != 0]) for row in original} <= rows  # serving's packing
        assert not np.isin(labels[labels != 0], list(never)).any()
        picked += (labels != 0).sum()
    assert picked > 0
