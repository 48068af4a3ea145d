"""A source with several targets in the test split (a G2P word with two pronunciations)
is translated once and is right when the output equals any of them, in every metric."""

from __future__ import annotations

from transformer_zoo.data.examples import TranslationPair
from transformer_zoo.data.tasks import Task
from transformer_zoo.evaluation.evaluate import evaluate, predict
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
