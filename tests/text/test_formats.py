"""The input formats' arguments: one text where one text is expected."""

import numpy as np
import pytest

from transformer_zoo.errors import InputError
from transformer_zoo.text import is_blank
from transformer_zoo.text.formats import (
    language_model_example,
    pair_ids,
    prompt_ids,
    source_ids,
    translation_example,
)


def test_a_list_where_one_text_is_expected_is_refused_by_name(shared_tokenizer):
    """A tokenizer encodes a list too, so its id lists had been nested in the ids:
    `source_ids(tokenizer, ["the cat", "a dog"])` was `[[...], [...], 3]`, `prompt_ids`
    `[2, [...], [...]]`, and `pair_ids(tokenizer, "x", ["y"])` a list inside the ids."""
    texts = ["the cat", "a dog"]
    nested = shared_tokenizer.encode(texts) + [shared_tokenizer.eos_id]  # what it had been
    assert nested != [source_ids(shared_tokenizer, text) for text in texts]
    calls = {
        "source": lambda: source_ids(shared_tokenizer, texts),
        "prompt": lambda: prompt_ids(shared_tokenizer, texts),
        "text": lambda: pair_ids(shared_tokenizer, texts),
        "text2": lambda: pair_ids(shared_tokenizer, "x", ["y"]),
        "target": lambda: translation_example(shared_tokenizer, shared_tokenizer, "x", ["y"], 8, 8),
        "completion": lambda: language_model_example(shared_tokenizer, "x", None, 8),
    }
    for name, call in calls.items():
        with pytest.raises(ValueError, match=rf"^`{name}` must be one text, a str") as error:
            call()
        assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match="`source` must be one text.*Received: Tokenizer"):
        source_ids("the cat", shared_tokenizer)  # the arguments swapped


def test_a_numpy_string_and_a_numpy_max_length_are_taken(shared_tokenizer):
    expected = prompt_ids(shared_tokenizer, "the cat", 3)
    assert prompt_ids(shared_tokenizer, np.str_("the cat"), np.int64(3)) == expected
    assert source_ids(shared_tokenizer, "the cat", np.int32(2))[-1] == shared_tokenizer.eos_id
    with pytest.raises(ValueError, match="`max_length` must be an integer ≥ 1"):
        prompt_ids(shared_tokenizer, "the cat", 3.0)


def test_blank_text_is_what_the_tokenizer_reads_as_nothing(shared_tokenizer):
    """`is_blank`, the one test of an empty input (a training file's field, a translation
    source, the command line's blank line), against SentencePiece's own encoding."""
    for text in ["", " ", "\t\n", "\u200b", "\x01 \x7f", "\u3000", "\u2028", "\u200ba"]:
        assert is_blank(text) == (shared_tokenizer.encode(text) == []), repr(text)


def test_a_one_segment_model_reads_a_pair_in_segment_zero_as_roberta_does(shared_tokenizer):
    """RoBERTa's checkpoints have `type_vocab_size` 1 and transformers' RoBERTa tokenizer
    gives a pair `token_type_ids` all 0, the texts told apart by their separators: a
    model of one segment row was fed segment 1 and failed in its embedding lookup."""
    bert = pair_ids(shared_tokenizer, "March 5", "the fifth")
    for segments in (1, 0):
        ids, types = pair_ids(
            shared_tokenizer, "March 5", "the fifth", type_vocabulary_size=segments
        )
        assert ids == bert[0] and types == [0] * len(ids)
    assert set(bert[1]) == {0, 1}  # BERT's two segments, unchanged


def test_a_pair_for_a_model_of_two_tokens_is_refused_naming_its_max_length(shared_tokenizer):
    """`[CLS] a [SEP] b [SEP]` needs 3 tokens; one text fits in 2."""
    assert len(pair_ids(shared_tokenizer, "March 5", None, max_length=2)[0]) == 2
    with pytest.raises(InputError, match=r"^A text pair needs max_length ≥ 3 .* at most 2 tokens"):
        pair_ids(shared_tokenizer, "March 5", "the fifth", max_length=2)
