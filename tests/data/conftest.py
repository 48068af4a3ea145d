"""Small shared fixtures: a few thousand generated examples and tokenizers trained on them
(each trains in well under a second)."""

import pytest

from transformer_zoo.data.builtin import DatesZh
from transformer_zoo.text import train_tokenizer


@pytest.fixture(scope="session")
def dates():
    return DatesZh(seed=0, train_size=2000, valid_size=100, test_size=300)


@pytest.fixture(scope="session")
def source_tokenizer(dates):
    return train_tokenizer([p.source for p in dates.pairs("train")], 300)


@pytest.fixture(scope="session")
def target_tokenizer(dates):
    return train_tokenizer([p.target for p in dates.pairs("train")], 100, model_type="char")


@pytest.fixture(scope="session")
def shared_tokenizer(dates):
    pairs = dates.pairs("train")
    return train_tokenizer([p.source for p in pairs] + [p.target for p in pairs], 400)
