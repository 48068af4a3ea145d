"""What a new user of `ServedModel` tries at the edges of its inputs: text pairs given as
a string, inputs that are not strings or not valid Unicode, bools given for counts, and
which prompt of a batch leaves no room for `max_new_tokens`. Each misuse is one
`InputError` naming the input at fault; each accepted form gives what the plain form gives."""

from __future__ import annotations

import numpy as np
import pytest

from transformer_zoo.serving import InputError, load_onnx
from transformer_zoo.text import is_blank, prompt_ids

FAMILIES = ("decoder-only", "encoder-decoder", "encoder-only")


@pytest.fixture(scope="module")
def served(family_artifacts):
    return {family: load_onnx(family_artifacts(family).export_dir) for family in FAMILIES}


def _run(model, texts):
    """The family's text call on `texts`."""
    if model.family == "decoder-only":
        return model.generate(texts, 2)
    if model.family == "encoder-decoder":
        return model.translate(texts, 2)
    return model.embed(texts)


def test_a_text_pair_given_as_a_string_is_one_pair(served):
    """As one text is one text: `classify("a", "b")` read the pair's characters as four
    pairs ("needs one entry per text: 4 for 1")."""
    model = served["encoder-only"]
    (single,) = model.classify("the cat", "dogs")
    (listed,) = model.classify(["the cat"], ["dogs"])
    assert single["label"] == listed["label"]
    np.testing.assert_allclose(
        list(single["probabilities"].values()), list(listed["probabilities"].values())
    )


def test_a_pair_that_is_not_a_string_is_named_not_dropped(served):
    """A None second text was read as no pair: the text classified alone, silently."""
    with pytest.raises(InputError, match="`text_pairs` must hold strings") as caught:
        served["encoder-only"].classify(["the cat", "dogs"], ["a fox", None])
    assert caught.value.index == 1


@pytest.mark.parametrize("family", FAMILIES)
def test_a_text_that_is_not_valid_unicode_is_named(served, family):
    """A lone surrogate (what Python makes of an argument's non-UTF-8 byte) reached the
    tokenizer, whose error was a RuntimeError or TypeError of its C++ binding."""
    with pytest.raises(InputError, match="not valid UTF-8") as caught:
        _run(served[family], ["the cat", "dogs \udcff"])
    assert caught.value.index == 1
    _run(served[family], ["the cat", "dogs 😀 猫 e\u0301"])  # real characters are fine


def test_bools_are_not_counts(served):
    """`max_new_tokens=True` decoded one token, `batch_size=True` ran batches of one and
    `normalize="no"` normalised: each is refused now."""
    with pytest.raises(InputError, match="max_new_tokens"):
        served["decoder-only"].generate(["the cat"], True)
    with pytest.raises(InputError, match="max_new_tokens"):
        served["encoder-decoder"].translate(["the cat"], True)
    with pytest.raises(InputError, match="batch_size"):
        served["encoder-only"].embed(["the cat"], batch_size=True)
    with pytest.raises(InputError, match="normalize"):
        served["encoder-only"].embed(["the cat"], normalize="no")


def test_the_first_prompt_that_leaves_no_room_is_named(served):
    """The error named no prompt, so the command line could not say which line."""
    model = served["decoder-only"]
    texts = ["dogs", "the cat sat on the mat " * 2, "the cat", "a quick brown fox " * 2]
    lengths = [len(ids) for ids in model.prompt_ids(texts)]
    room = model.dims.max_length - sorted(lengths)[1]  # fits the two shortest only
    first = next(i for i, n in enumerate(lengths) if n + room > model.dims.max_length)
    with pytest.raises(InputError, match="leaves room for .* in the model's context") as caught:
        model.generate(texts, room)
    assert caught.value.index == first


def test_a_blank_source_is_refused_by_name_while_an_empty_prompt_is_continued(served):
    """`translate(["HELLO", ""])` translated the empty source (a model still writes
    something), where the command line answers a blank line with an empty one and the
    server refuses it."""
    with pytest.raises(InputError, match="the source is empty") as error:
        served["encoder-decoder"].translate(["the cat", " "], 3)
    assert error.value.index == 1
    assert len(served["decoder-only"].generate(["", "the cat"], 2)) == 2


# Text that holds nothing to translate, by `is_blank`'s rule: spaces, zero-width and
# control characters. The first four encode to no piece at all.
BLANK = [" ", "\u200b", "\x01\t", "\u3000", "\ufeff\u200d", "\u00ad"]


@pytest.mark.parametrize("text", BLANK)
def test_a_source_that_holds_no_text_is_refused_as_a_blank_one(served, text):
    """`"\\u200b"` got past `text.strip()`: the model ran on `[</s>]` alone and wrote text
    of its own, where `" "` was refused."""
    model = served["encoder-decoder"]
    assert is_blank(text)  # the data loader's rule for an empty field
    if text in BLANK[:4]:
        assert model.tokenizer.encode(text) == []
    with pytest.raises(InputError, match="the source is empty") as error:
        model.translate(["the cat", text], 3)
    assert error.value.index == 1
    model.translate(["the cat", f"a{text}"], 3)  # a visible character is something


def test_a_prompt_that_fills_the_context_is_read_but_leaves_no_room(served):
    """A prompt of exactly the context's length was refused by `prompt_ids` (context - 1),
    though scoring it (the server's `echo` with `max_tokens` 0) needs no new position."""
    model = served["decoder-only"]
    context = model.dims.max_length
    words = next(
        " ".join(["cat"] * n)
        for n in range(1, context)
        if len(prompt_ids(model.tokenizer, " ".join(["cat"] * n))) == context
    )
    assert model.prompt_ids([words]) == [prompt_ids(model.tokenizer, words)]
    with pytest.raises(InputError, match=f"does not fit the model's context of {context}"):
        model.prompt_ids([words + " cat"])
    for max_new_tokens in (None, 1):  # generating needs a position past it
        with pytest.raises(InputError, match="leaves no room for a new token") as error:
            model.generate(["dogs", words], max_new_tokens)
        assert error.value.index == 1
