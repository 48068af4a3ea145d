"""`evaluate`'s batches: they change no prediction, and its two passes (decoding, teacher
forcing) show how far they have come on a terminal, a batch at a time, and write nothing
where standard error is not one."""

from __future__ import annotations

import re

import pytest
from tqdm import tqdm

from transformer_zoo import progress
from transformer_zoo.data.examples import ClassificationExample, PromptCompletion, TranslationPair
from transformer_zoo.data.tasks import Task
from transformer_zoo.evaluation import passes as module
from transformer_zoo.evaluation.evaluate import evaluate
from transformer_zoo.evaluation.passes import predict
from transformer_zoo.serving import load_onnx

TEXTS = ["March 5, 2021", "the cat sat on the mat", "dogs and cats", "a b", "c", "it is late"]


def task_of(family: str) -> Task:
    if family == "encoder-decoder":
        test = [TranslationPair(t, "x") for t in TEXTS]
    elif family == "decoder-only":
        test = [PromptCompletion(t, "x") for t in TEXTS]
    else:
        test = [ClassificationExample("negative", t) for t in TEXTS]
    return Task("hand-made", family, train=[], valid=[], test=test)


class Eager(tqdm):
    """The bar, drawn at every update rather than at most ten times a second."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **{**kwargs, "mininterval": 0, "miniters": 1})


@pytest.mark.parametrize("family", ["encoder-decoder", "decoder-only", "encoder-only"])
def test_both_passes_count_every_example_a_batch_at_a_time(
    family_artifacts, family, monkeypatch, capsys
):
    served = load_onnx(family_artifacts(family).export_dir)
    if family == "encoder-only" and served.config.task != "classification":
        pytest.skip("the encoder-only artifact is not a classifier")
    monkeypatch.setattr(module, "BATCH_SIZE", 4)  # two batches of the six examples
    capsys.readouterr()  # the export's logs, where this test is the first to build it
    quiet = evaluate(served, task_of(family), progress=False)
    assert capsys.readouterr().err == ""

    monkeypatch.setattr(progress, "tqdm", Eager)
    shown = evaluate(served, task_of(family), progress=True)
    err = capsys.readouterr().err
    passes = ["classifying"] if family == "encoder-only" else ["decoding", "teacher forcing"]
    for name in passes:
        assert f"{name}:" in err and re.search(r"[1-5]/6", err.split(f"{name}:", 1)[1])
        assert "6/6" in err.split(f"{name}:", 1)[1]
    shown.pop("seconds"), quiet.pop("seconds")
    assert shown == quiet  # the bars change nothing


def test_no_bar_where_standard_error_is_not_a_terminal(family_artifacts, capsys):
    served = load_onnx(family_artifacts("decoder-only").export_dir)
    capsys.readouterr()  # the export's logs, where this test is the first to build it
    evaluate(served, task_of("decoder-only"))  # pytest's captured stderr is no terminal
    assert capsys.readouterr().err == ""


def test_a_completion_does_not_depend_on_what_it_is_batched_with(family_artifacts, monkeypatch):
    """A short prompt batched with one near the context may still run its whole room (the
    batch's longest prompt used to cap every row's completion)."""
    served = load_onnx(family_artifacts("decoder-only").export_dir)
    context = served.dims.max_length
    prompts = [" ".join(["the cat"] * n) for n in (1, 2, 4, 6)]
    lengths = [len(served.tokenizer.encode(p)) for p in prompts]
    assert lengths[0] < lengths[-1] < context - 4  # rooms differ, and every one is > 0
    examples = [PromptCompletion(p, "") for p in prompts]
    alone = []
    for example in examples:
        alone += predict(served, [example])
    together = predict(served, examples)
    assert together == alone
    # The tiny random model does not stop early: each prompt ran to its own room.
    assert len(served.tokenizer.encode(together[0])) > context - lengths[-1]


@pytest.mark.parametrize("family", ["encoder-decoder", "decoder-only", "encoder-only"])
def test_examples_longer_than_the_context_are_scored_cut_with_one_warning(
    family_artifacts, family, caplog
):
    """`evaluate --test FILE` scored a 5,000-character source cut to the context without a
    word (`train` warns of the same cut; `translate` refuses the source)."""
    served = load_onnx(family_artifacts(family).export_dir)
    if family == "encoder-only" and served.config.task != "classification":
        pytest.skip("the encoder-only artifact is not a classifier")
    task = task_of(family)
    long = " ".join(["the cat sat on the mat"] * 60)
    if family == "encoder-decoder":
        task.test.append(TranslationPair(long, "x"))
    elif family == "decoder-only":
        task.test.append(PromptCompletion(long, "x"))
    else:
        task.test.append(ClassificationExample("negative", long))
    with caplog.at_level("WARNING"):
        evaluate(served, task, progress=False)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1, warnings
    assert "1 of 7" in warnings[0] and f"{served.max_length} tokens" in warnings[0]
