"""A source with several targets in the test split (a G2P word with two pronunciations)
is translated once and is right when the output equals any of them, in every metric."""

from __future__ import annotations

import pytest

from transformer_zoo.data.examples import TranslationPair
from transformer_zoo.data.tasks import Task
from transformer_zoo.evaluation.evaluate import evaluate
from transformer_zoo.evaluation.passes import predict
from transformer_zoo.serving import load_onnx

SOURCES = ["March 5, 2021", "the cat sat on the mat", "dogs and cats"]


def test_each_source_is_scored_against_all_its_targets(family_artifacts):
    served = load_onnx(family_artifacts("encoder-decoder").export_dir)
    outputs = predict(served, [TranslationPair(s, "") for s in SOURCES])  # what it scores
    # Every source has a wrong target and a right one (the model's own output); the last
    # source has only a wrong one.
    test = []
    for source, output in zip(SOURCES[:2], outputs[:2], strict=True):
        test += [TranslationPair(source, output + " x"), TranslationPair(source, output)]
    test.append(TranslationPair(SOURCES[2], outputs[2] + " x"))
    task = Task("hand-made", "encoder-decoder", train=[], valid=[], test=test)
    result = evaluate(served, task)
    assert result["examples"] == 5 and result["sources"] == 3
    assert result["exact_match"]["all"] == 2 / 3
    assert result["wer"]["all"] == 1 / 3
    assert 0 < result["per"]["all"] < 1
    assert [e["input"] for errors in result["errors"].values() for e in errors] == [SOURCES[2]]


def test_examples_without_a_category_count_in_all_only(family_artifacts):
    """A test split where some examples have a category and some none: "all" is the score
    over every example, not over those without a category; a category named "all" is
    refused before anything is decoded."""
    served = load_onnx(family_artifacts("encoder-decoder").export_dir)
    outputs = predict(served, [TranslationPair(s, "") for s in SOURCES])
    test = [
        TranslationPair(SOURCES[0], outputs[0] + " x", "dates"),
        TranslationPair(SOURCES[1], outputs[1]),
        TranslationPair(SOURCES[2], outputs[2]),
    ]
    result = evaluate(served, Task("hand-made", "encoder-decoder", [], [], test))
    assert result["exact_match"] == {"dates": 0.0, "all": 2 / 3}
    assert result["wer"] == {"dates": 1.0, "all": 1 / 3}
    assert set(result["per"]) == {"dates", "all"}
    assert result["errors"].keys() == {"dates", "all"}
    assert [e["input"] for e in result["errors"]["all"]] == [SOURCES[0]]
    test[0] = TranslationPair(SOURCES[0], outputs[0], "all")
    with pytest.raises(ValueError, match="category 'all' at example 0"):
        evaluate(served, Task("hand-made", "encoder-decoder", [], [], test))
