"""`builtin:dates-zh`: determinism, disjoint splits, the three shapes, near misses."""

import random
import re
from collections import Counter
from pathlib import Path

import pytest

from transformer_zoo.data.builtin import DatesZh
from transformer_zoo.data.builtin.dates_zh import CATEGORIES, LABELS, SPLITS, _near_miss

README = Path(__file__).resolve().parents[2] / "README.md"


def test_same_seed_gives_the_same_splits_and_another_seed_does_not():
    a, b = (DatesZh(seed=3, train_size=500, valid_size=50, test_size=50) for _ in range(2))
    c = DatesZh(seed=4, train_size=500, valid_size=50, test_size=50)
    for split in SPLITS:
        assert a.pairs(split) == b.pairs(split)
        assert a.classification(split) == b.classification(split)
    assert a.pairs("train") != c.pairs("train")


def test_splits_have_the_requested_sizes_and_share_no_source(dates):
    sources = {split: [p.source for p in dates.pairs(split)] for split in SPLITS}
    assert [len(sources[s]) for s in SPLITS] == [2000, 100, 300]
    for split in ("valid", "test"):  # distinct; the training split may repeat a source
        assert len(set(sources[split])) == len(sources[split])
    assert not set(sources["train"]) & set(sources["test"])
    assert not set(sources["train"]) & set(sources["valid"])
    assert not set(sources["valid"]) & set(sources["test"])


def test_training_repeats_keep_small_families_in_the_mix():
    pairs = DatesZh(seed=0).pairs("train")
    one_digit = [p for p in pairs if p.category == "numbers" and len(p.target) == 1]
    assert len(one_digit) > 300  # 20 distinct sources, far more draws
    assert len({p.source for p in pairs if p.category == "times"}) == 7500  # times never repeat


def test_every_split_holds_every_category_in_proportion(dates):
    counts = Counter(p.category for p in dates.pairs("test"))
    assert counts == {"dates": 120, "numbers": 105, "times": 75}


def test_default_size_generates_quickly_and_reports_shared_targets():
    task = DatesZh(seed=0)
    train_targets = {p.target for p in task.pairs("train")}
    shared = Counter(p.category for p in task.pairs("test") if p.target in train_targets)
    counts = task.shared_target_count("test")
    assert counts == {**{c: shared[c] for c in CATEGORIES}, "all": sum(shared.values())}
    # The README states the figure for the default seed.
    assert (
        f"{counts['all']:,} of the {len(task.pairs('test')):,} test targets" in README.read_text()
    )


def test_prompt_completions_are_source_then_target(dates):
    for pair, example in zip(dates.pairs("valid"), dates.prompt_completions("valid"), strict=True):
        assert example.prompt == f"{pair.source} =>"
        assert example.completion == pair.target
        assert example.text == f"{pair.source} => {pair.target}"


def _differing_fields(a: str, b: str) -> int:
    """How many of the numbers/characters in two Chinese renderings differ, position by position."""
    split = re.compile(r"\d+|\D")
    x, y = split.findall(a), split.findall(b)
    return sum(p != q for p, q in zip(x, y, strict=False)) + abs(len(x) - len(y))


def test_classification_pairs_each_source_with_its_translation_and_one_near_miss(dates):
    examples = dates.classification("test")
    targets = {p.source: p.target for p in dates.pairs("test")}
    assert len(examples) == 2 * len(targets)
    by_source = {}
    for e in examples:
        assert e.label in LABELS
        by_source.setdefault(e.text, {})[e.label] = e.text2
    for source, labelled in by_source.items():
        assert labelled["correct"] == targets[source]
        assert labelled["incorrect"] != targets[source]
    dates_only = [
        s for s, e in by_source.items() if e["correct"].endswith(("日", "月", "五", "一"))
    ]
    near = [
        _differing_fields(by_source[s]["correct"], by_source[s]["incorrect"]) for s in dates_only
    ]
    assert sum(n <= 2 for n in near) / len(near) > 0.9  # mostly one changed field


def test_number_near_misses_change_exactly_one_digit():
    rng = random.Random(0)
    for n in [0, 7, 15, 1005, 123456, 999999]:
        for _ in range(20):
            (m,) = _near_miss("numbers", (n,), rng)
            a, b = str(n), str(m)
            assert len(a) == len(b) and sum(p != q for p, q in zip(a, b, strict=True)) == 1


@pytest.mark.parametrize("size", [-1, 1.5])
def test_bad_sizes_are_rejected(size):
    with pytest.raises(ValueError, match="test_size"):
        DatesZh(test_size=size)


def test_too_many_times_are_rejected():
    with pytest.raises(ValueError, match="time sources"):
        DatesZh(train_size=50000)
