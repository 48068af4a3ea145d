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
