"""Evaluation of decoded outputs: exact match, BLEU and chrF for translation, accuracy for
classification, perplexity for language modelling. No TensorFlow: plain Python lists in,
floats out, so the ONNX side can use them too."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence

import sacrebleu


def _check_lengths(predictions: Sequence, references: Sequence) -> None:
    if len(predictions) != len(references):
        raise ValueError(
            "`predictions` and `references` must have the same length. Received: "
            f"{len(predictions)} and {len(references)}"
        )
    if not references:
        raise ValueError("Nothing to evaluate: `references` is empty.")


def exact_match(predictions: Sequence[str], references: Sequence[str]) -> float:
    """Share of predictions equal to their reference, whole string (surrounding
    whitespace ignored)."""
    _check_lengths(predictions, references)
    hits = sum(p.strip() == r.strip() for p, r in zip(predictions, references, strict=True))
    return hits / len(references)


def bleu(predictions: Sequence[str], references: Sequence[str], tokenize: str = "zh") -> float:
    """Corpus BLEU (0-100) from `sacrebleu`; `tokenize="zh"` splits Chinese characters,
    as sacreBLEU does for WMT Chinese targets."""
    _check_lengths(predictions, references)
    return sacrebleu.corpus_bleu(list(predictions), [list(references)], tokenize=tokenize).score


def chrf(predictions: Sequence[str], references: Sequence[str]) -> float:
    """Corpus chrF (0-100) from `sacrebleu`: the F-score of character n-grams up to 6.
    Unlike BLEU it means something on short targets (a few digits) and in any script."""
    _check_lengths(predictions, references)
    return sacrebleu.corpus_chrf(list(predictions), [list(references)]).score


def accuracy(predictions: Sequence, labels: Sequence) -> float:
    """Share of predicted labels equal to the true ones."""
    _check_lengths(predictions, labels)
    return sum(p == t for p, t in zip(predictions, labels, strict=True)) / len(labels)


def corpus_perplexity(total_negative_log_likelihood: float, token_count: int) -> float:
    """exp(total NLL / tokens): the corpus perplexity from summed token log-losses (nats)."""
    if token_count <= 0:
        raise ValueError(f"`token_count` must be positive. Received: token_count={token_count}")
    return math.exp(total_negative_log_likelihood / token_count)


def per_category(
    metric: Callable[[Sequence, Sequence], float],
    predictions: Sequence,
    references: Sequence,
    categories: Sequence[str],
) -> dict[str, float]:
    """`metric` over all examples ("all") and over each category's examples."""
    _check_lengths(predictions, references)
    _check_lengths(categories, references)
    groups: dict[str, tuple[list, list]] = defaultdict(lambda: ([], []))
    for prediction, reference, category in zip(predictions, references, categories, strict=True):
        groups[category][0].append(prediction)
        groups[category][1].append(reference)
    scores = {"all": metric(predictions, references)}
    scores.update({c: metric(p, r) for c, (p, r) in sorted(groups.items())})
    return scores
