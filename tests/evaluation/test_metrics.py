"""Evaluation helpers: exact match, sacreBLEU with its Chinese tokenizer, accuracy,
perplexity, per-category breakdowns."""

import math

import pytest
import sacrebleu

from transformer_zoo.evaluation.metrics import (
    accuracy,
    bleu,
    corpus_perplexity,
    exact_match,
    per_category,
)


def test_exact_match_compares_whole_strings():
    assert exact_match(["2021年3月5日", "下午三点"], ["2021年3月5日", "下午三点十五分"]) == 0.5
    assert exact_match([" 十五 "], ["十五"]) == 1.0


def test_exact_match_collapses_whitespace_on_both_sides():
    """A tokenizer that collapses spaces cannot write the double space of a reference:
    runs of whitespace count as one space, on either side; no space is not one."""
    assert exact_match(["five o'clock"], ["five  o'clock"]) == 1.0
    assert exact_match(["a \t b", "ab"], [" a b", "a b"]) == 0.5


def test_bleu_uses_sacrebleus_chinese_tokenizer():
    predictions = ["2021年3月6日星期五", "下午三点十五分"]
    references = ["2021年3月5日星期五", "下午三点十五分"]
    score = bleu(predictions, references)
    assert score == pytest.approx(
        sacrebleu.corpus_bleu(predictions, [references], tokenize="zh").score
    )
    # Without splitting Chinese characters a one-character slip would zero the sentence.
    assert score > sacrebleu.corpus_bleu(predictions, [references], tokenize="13a").score
    assert bleu(references, references) == pytest.approx(100.0)


def test_accuracy_and_perplexity():
    assert accuracy([1, 0, 1, 1], [1, 1, 1, 0]) == 0.5
    assert corpus_perplexity(4 * math.log(3.0), 4) == pytest.approx(3.0)
    with pytest.raises(ValueError, match="token_count"):
        corpus_perplexity(1.0, 0)


def test_per_category_scores_each_category_and_all():
    scores = per_category(
        exact_match,
        ["a", "b", "c", "d"],
        ["a", "x", "c", "d"],
        ["dates", "dates", "times", "numbers"],
    )
    assert scores == {"all": 0.75, "dates": 0.5, "numbers": 1.0, "times": 1.0}


def test_examples_without_a_category_count_in_all_only_and_all_is_no_category():
    """An empty category is none: its examples count in the overall score alone, which
    no category can overwrite; a category named "all" is refused, by name."""
    predictions, references = ["a b c d", "x y z w", "a b c d"], ["a b c d", "p q r s", "a b c d"]
    scores = per_category(exact_match, predictions, references, ["dates", "", "dates"])
    assert scores == {"dates": 1.0, "all": 2 / 3}
    assert list(scores)[-1] == "all"
    with pytest.raises(ValueError, match="category 'all' at example 1"):
        per_category(exact_match, predictions, references, ["dates", "all", "dates"])


def test_mismatched_or_empty_inputs_are_rejected():
    with pytest.raises(ValueError, match="same length"):
        exact_match(["a"], ["a", "b"])
    with pytest.raises(ValueError, match="empty"):
        accuracy([], [])


def test_chrf_scores_short_targets_where_bleu_gives_zero():
    from transformer_zoo.evaluation.metrics import chrf

    digits = ["12", "7", "305"]
    assert bleu(digits, digits, tokenize="13a") == 0.0  # no word 4-grams in one word
    assert chrf(digits, digits) == 100.0
    assert 0 < chrf(["12", "8", "305"], digits) < 100


# --- several right answers: grapheme-to-phoneme's word and phone error rates -------------
G2P_PREDICTIONS = ["R IY D", "L IY D", "K AE T S", "D AO G"]
G2P_REFERENCES = [
    ["R EH D", "R IY D"],  # READ: the second pronunciation is predicted
    ["L EH D", "L IY D"],  # LEAD: likewise
    "K AE T",  # CATS -> CAT: one insertion over 3 phones
    ["D AA G", "D AO G Z"],  # DOG: one substitution (3) or one deletion (4); closest 1/3
]


def test_word_error_rate_counts_words_matching_no_reference():
    from transformer_zoo.evaluation.metrics import word_error_rate

    assert word_error_rate(G2P_PREDICTIONS, G2P_REFERENCES) == 2 / 4
    assert word_error_rate(["  R  IY D "], [["R IY D"]]) == 0.0  # spacing is not an error


def test_phone_error_rate_uses_the_closest_reference_and_its_length():
    from transformer_zoo.evaluation.metrics import phone_error_rate

    # Edits 0 + 0 + 1 + 1 over closest-reference lengths 3 + 3 + 3 + 3. For DOG both
    # references are one edit away; the first found (D AA G, 3 phones) counts.
    assert phone_error_rate(G2P_PREDICTIONS, G2P_REFERENCES) == pytest.approx(2 / 12)
    # Without spaces the symbols are characters: kitten -> sitting is 3 edits over 7.
    assert phone_error_rate(["kitten"], ["sitting"]) == pytest.approx(3 / 7)


def test_phone_error_rate_splits_every_string_as_its_corpus_does():
    """Phones where any reference is space-separated, else characters, for every
    prediction and reference alike: a one-phone pronunciation is one phone."""
    from transformer_zoo.evaluation.metrics import phone_error_rate

    # AY1 -> AA1 is one substitution over 1 + 3 phones (not 1 of 3 characters).
    assert phone_error_rate(["AY1", "K AE1 T"], ["AA1", "K AE1 T"]) == pytest.approx(1 / 4)
    # Likewise where only one reference of several is spaced: AA1 is 0 edits from its
    # second reference (1 phone), AY1 1 substitution from AA1 (1 phone).
    assert phone_error_rate(["AA1", "AY1"], [["EY1 EY1", "AA1"], "AA1"]) == 1 / 2
    # A character corpus: the space a prediction holds is a character, one insertion
    # over 5 characters, not 2 symbols (2021, 年) against 5.
    assert phone_error_rate(["2021 年"], ["2021年"]) == pytest.approx(1 / 5)


def test_character_error_rates_drop_the_whitespace_around_each_string():
    """Counted in characters (no reference holds inner whitespace), each string is first
    stripped: rapidfuzz's Levenshtein distance between the stripped texts, over the
    stripped references' length; a trailing space or newline is no error."""
    from rapidfuzz.distance import Levenshtein

    from transformer_zoo.evaluation.metrics import phone_error_rate

    predictions, references = ["ab ", "\txyz\n", "abd "], ["ab", "xyz", " abc"]
    edits = sum(
        Levenshtein.distance(p.strip(), r.strip())
        for p, r in zip(predictions, references, strict=True)
    )
    expected = edits / sum(len(r.strip()) for r in references)
    assert phone_error_rate(predictions, references) == pytest.approx(expected) == 1 / 8


def test_a_category_of_one_phone_words_counts_phones_as_its_corpus_does(monkeypatch):
    """evaluate scores PER per category with the whole test set's choice of symbols: a
    category whose references are all one phone long still counts phones, not characters
    (it had counted AH1 against AY1 as 1 edit over 3 characters)."""
    from types import SimpleNamespace

    from transformer_zoo.data.examples import TranslationPair
    from transformer_zoo.data.task import Task
    from transformer_zoo.evaluation import evaluate as module
    from transformer_zoo.evaluation.metrics import phone_error_rate

    test = [TranslationPair("a", "AY1", "one"), TranslationPair("bee", "B IY1", "two")]
    task = Task("hand-made", "encoder-decoder", [], [], test)
    served = SimpleNamespace(family="encoder-decoder")
    monkeypatch.setattr(module, "_warn_cut", lambda *args: None)
    monkeypatch.setattr(module, "predict", lambda *args: ["AH1", "B IY1"])
    monkeypatch.setattr(module, "token_scores", lambda *args: {})
    result = module.evaluate(served, task, progress=False)
    # AH1 -> AY1: one wrong phone of one; the corpus: one of three phones.
    assert result["per"] == {"one": 1.0, "two": 0.0, "all": pytest.approx(1 / 3)}
    # Alone, the category's references hold no space: characters, 1 edit over 3.
    assert phone_error_rate(["AH1"], ["AY1"]) == pytest.approx(1 / 3)
    assert phone_error_rate(["AH1"], ["AY1"], spaced=True) == 1.0


def test_exact_match_bleu_and_chrf_take_several_references():
    from transformer_zoo.evaluation.metrics import bleu, chrf, exact_match

    assert exact_match(G2P_PREDICTIONS, G2P_REFERENCES) == 2 / 4
    predictions = ["the cat sat on the mat"]
    assert bleu(
        predictions, [["a dog", "the cat sat on the mat"]], tokenize="13a"
    ) == pytest.approx(100)
    assert chrf(predictions, [["a dog", "the cat sat on the mat"]]) == pytest.approx(100)
    # A reference given twice scores as given once.
    once = bleu(["the cat sat"], ["the cat sat on the mat"], tokenize="13a")
    assert bleu(["the cat sat"], [["the cat sat on the mat"] * 2], tokenize="13a") == once


def test_rows_with_fewer_references_score_as_their_first_one_repeated():
    """Rows may hold different numbers of references: sacreBLEU takes streams of equal
    length, so a row with fewer fills the others with its first reference (which scores
    as given once), never with an empty one: an empty reference is the closest length to
    a short prediction and lifts BLEU's brevity penalty (the bug scored 100 here)."""
    from transformer_zoo.evaluation.metrics import chrf

    predictions = ["the cat sat on the mat", "a dog", "two birds"]
    references = [
        ["the cat sat on the mat", "a cat sat on the mat"],
        "a dog ran in the park today",
        ["two birds sang", "birds", "a bird"],
    ]
    streams = [  # written out by hand: stream k holds each row's k-th, else its first
        ["the cat sat on the mat", "a dog ran in the park today", "two birds sang"],
        ["a cat sat on the mat", "a dog ran in the park today", "birds"],
        ["the cat sat on the mat", "a dog ran in the park today", "a bird"],
    ]
    expected = sacrebleu.corpus_bleu(predictions, streams, tokenize="13a").score
    assert bleu(predictions, references, tokenize="13a") == pytest.approx(expected, rel=1e-12)
    assert expected < 99  # "a dog" is short of its one reference
    expected = sacrebleu.corpus_chrf(predictions, streams).score
    assert chrf(predictions, references) == pytest.approx(expected, rel=1e-12)


# --- arguments a newcomer plausibly passes -----------------------------------------------
SENTENCE = "the cat sat on the mat"


@pytest.mark.parametrize(
    "metric, prediction, reference, silent, right",
    [
        ("exact_match", "abc", "abd", 2 / 3, 0.0),
        ("bleu", SENTENCE, SENTENCE, 0.0, 100.0),
        ("chrf", "the cat", "the dog", 50.0, 19.17),
        ("word_error_rate", "a b c", "a b d", 0.2, 1.0),
    ],
)
def test_a_bare_string_is_refused_not_read_as_one_example_per_character(
    metric, prediction, reference, silent, right
):
    """A str iterates as characters: the strings had been scored as examples of one
    character each (`silent`, e.g. `exact_match("abc", "abd")` 2/3), not as the one
    example they are (`right`, what the one-item lists score)."""
    from transformer_zoo.evaluation import metrics

    metric = getattr(metrics, metric)
    with pytest.raises(ValueError, match=r"`predictions` must be a list .* Received: a single str"):
        metric(prediction, reference)
    with pytest.raises(ValueError, match=rf"`references` must be a list .* str '{reference}'"):
        metric([prediction], reference)
    assert metric([prediction], [reference]) == pytest.approx(right, abs=0.01)
    assert right != pytest.approx(silent, abs=0.01)


def test_numpy_arrays_of_labels_and_texts_are_taken_as_lists():
    """`if not references` had raised numpy's "truth value of an array is ambiguous"."""
    import numpy as np

    assert accuracy(np.array([0, 1, 1]), np.array([0, 1, 0])) == pytest.approx(2 / 3)
    assert accuracy(np.array([0, 1, 1]), [0, 1, 0]) == accuracy([0, 1, 1], [0, 1, 0])
    texts = np.array(["the cat sat on the mat", "a dog"])
    assert exact_match(texts, np.array(["the cat sat on the mat", "a cat"])) == 0.5
    assert bleu(texts, texts, tokenize="13a") == pytest.approx(bleu(list(texts), list(texts)))
    with pytest.raises(
        ValueError, match=r"`predictions` .* 1-D array. Received: an array of shape \(2, 2\)"
    ):
        accuracy(np.array([[0.1, 0.9], [0.8, 0.2]]), np.array([1, 0]))  # logits, not labels
    with pytest.raises(ValueError, match="`labels` is empty"):
        accuracy(np.array([]), np.array([]))


def test_an_unknown_bleu_tokenizer_is_named_with_the_choices():
    with pytest.raises(ValueError, match=r"`tokenize` must be one of .*'zh'.*tokenize='ZH'"):
        bleu(["a"], ["a"], tokenize="ZH")


def test_corpus_perplexity_refuses_a_negative_loss_and_overflows_to_infinity():
    """Its arguments are a sum of -log p (each ≥ 0) and a token count: a negative sum had
    given a perplexity below 1 (0.82 for -1 over 5 tokens), and a mean loss past 709
    nats an OverflowError rather than the perplexity, which is larger than any float."""
    import numpy as np

    with pytest.raises(ValueError, match="total_negative_log_likelihood=-1.0"):
        corpus_perplexity(-1.0, 5)
    for wrong in (float("nan"), [1.0, 2.0], "3", True):
        with pytest.raises(ValueError, match="total_negative_log_likelihood"):
            corpus_perplexity(wrong, 5)
    for count in (2.5, "4", True, -3):
        with pytest.raises(ValueError, match="`token_count` must be a positive integer"):
            corpus_perplexity(1.0, count)
    assert corpus_perplexity(1e6, 1) == math.inf
    assert corpus_perplexity(0, 3) == 1.0
    assert corpus_perplexity(np.float64(2 * math.log(5.0)), np.int64(2)) == pytest.approx(5.0)
