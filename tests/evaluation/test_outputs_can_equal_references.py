"""A model can write its references: the tokenizer whose pieces make its output text (an
encoder-decoder's target tokenizer, a decoder-only model's) keeps every character of its
training text, so a perfect model, whose output is decode(encode(reference)), scores full
marks on references of full-width punctuation and digits and ligatures, scored raw as
sacreBLEU expects them. The tokenizers that only read (the source side) keep NFKC."""

import unicodedata

import pytest

from transformer_zoo.data.examples import PromptCompletion, TranslationPair
from transformer_zoo.data.task import Task
from transformer_zoo.evaluation.metrics import bleu, chrf, exact_match

# NFKC makes `，` a `,`, `２` a `2` and `ﬁ` `fi`; the last has a run of two spaces.
TARGETS = [
    "你好，世界！",
    "今天是星期五，天气很好。",
    "他说：“我们走吧？”",
    "２０２１年３月５日",
    "ﬁve  o'clock",
]
OPTIONS = {"vocabulary_size": 60, "target_vocabulary_size": 40, "target_model_type": "char"}


def copy_task(family: str) -> Task:
    """A task whose sources (prompts) are its targets (completions), five times over."""
    if family == "encoder-decoder":
        train = [TranslationPair(t, t) for t in TARGETS] * 5
    else:
        train = [PromptCompletion(f"{t} =>", t) for t in TARGETS] * 5
    return Task("hand-made", family, train, [], [], tokenizer_options=OPTIONS)


@pytest.mark.parametrize(
    "family, target_kind",
    [
        ("encoder-decoder", None),  # the task's own: character pieces
        ("encoder-decoder", "unigram"),
        ("encoder-decoder", "bpe"),
        ("decoder-only", None),
    ],
)
def test_a_perfect_model_scores_full_marks_on_full_width_references(family, target_kind):
    source, target = copy_task(family).fit_tokenizers(target_kind=target_kind)
    outputs = [target.decode(target.encode(t)) for t in TARGETS]
    # Every character comes back; only the run of spaces is collapsed.
    assert outputs == [" ".join(t.split()) for t in TARGETS]
    assert exact_match(outputs, TARGETS) == 1.0
    assert bleu(outputs, TARGETS, tokenize="zh") == pytest.approx(100.0)
    assert chrf(outputs, TARGETS) == pytest.approx(100.0)
    if family == "encoder-decoder":  # the source tokenizer only reads: NFKC
        nfkc = [" ".join(unicodedata.normalize("NFKC", t).split()) for t in TARGETS]
        assert [source.decode(source.encode(t)) for t in TARGETS] == nfkc
