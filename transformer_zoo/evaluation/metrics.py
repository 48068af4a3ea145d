"""Evaluation of decoded outputs: exact match, BLEU and chrF for translation, word and phone
error rates for sequences with several right answers (grapheme-to-phoneme), accuracy for
classification, perplexity for language modelling. No TensorFlow: plain Python lists in,
floats out, so the ONNX side can use them too."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence

import sacrebleu
from rapidfuzz.distance import Levenshtein


def _check_lengths(predictions: Sequence, references: Sequence) -> None:
    if len(predictions) != len(references):
        raise ValueError(
            "`predictions` and `references` must have the same length. Received: "
            f"{len(predictions)} and {len(references)}"
        )
    if not references:
        raise ValueError("Nothing to evaluate: `references` is empty.")


# Every metric takes, per prediction, one reference (a str) or several right ones (a list).
Reference = str | Sequence[str]


def exact_match(predictions: Sequence[str], references: Sequence[Reference]) -> float:
    """Share of predictions equal to one of their references, whole string (surrounding
    whitespace ignored)."""
    _check_lengths(predictions, references)
    hits = sum(
        any(p.strip() == r.strip() for r in _alternatives(refs))
        for p, refs in zip(predictions, references, strict=True)
    )
    return hits / len(references)


def reference_streams(references: Sequence[Reference]) -> list[list[str]]:
    """sacreBLEU's reference streams: stream k holds each prediction's k-th reference (its
    first one where it has fewer; a repeated reference changes neither BLEU nor chrF)."""
    rows = [_alternatives(r) for r in references]
    return [
        [row[k] if k < len(row) else row[0] for row in rows] for k in range(max(map(len, rows)))
    ]


def bleu(
    predictions: Sequence[str], references: Sequence[Reference], tokenize: str = "zh"
) -> float:
    """Corpus BLEU (0-100) from `sacrebleu`; `tokenize="zh"` splits Chinese characters,
    as sacreBLEU does for WMT Chinese targets."""
    _check_lengths(predictions, references)
    streams = reference_streams(references)
    return sacrebleu.corpus_bleu(list(predictions), streams, tokenize=tokenize).score


def chrf(predictions: Sequence[str], references: Sequence[Reference]) -> float:
    """Corpus chrF (0-100) from `sacrebleu`: the F-score of character n-grams up to 6.
    Unlike BLEU it means something on short targets (a few digits) and in any script."""
    _check_lengths(predictions, references)
    return sacrebleu.corpus_chrf(list(predictions), reference_streams(references)).score


def _alternatives(reference: str | Sequence[str]) -> list[str]:
    return [reference] if isinstance(reference, str) else list(reference)


def symbols(text: str) -> list[str]:
    """The units an error rate counts: whitespace-separated symbols (phones, words) where
    the text has spaces, else its characters."""
    text = text.strip()
    return text.split() if any(c.isspace() for c in text) else list(text)


def word_error_rate(predictions: Sequence[str], references: Sequence[Reference]) -> float:
    """Share of predictions equal to none of their references (surrounding and repeated
    whitespace ignored): the word error rate of grapheme-to-phoneme, where each word is
    one prediction and may have several right pronunciations."""
    _check_lengths(predictions, references)
    wrong = 0
    for prediction, reference in zip(predictions, references, strict=True):
        given = " ".join(prediction.split())
        wrong += all(given != " ".join(r.split()) for r in _alternatives(reference))
    return wrong / len(references)


def phone_error_rate(predictions: Sequence[str], references: Sequence[Reference]) -> float:
    """Corpus symbol error rate: for each prediction, the Levenshtein distance (rapidfuzz)
    in `symbols` to its closest reference, summed and divided by the summed lengths of
    those closest references."""
    _check_lengths(predictions, references)
    edits = length = 0
    for prediction, reference in zip(predictions, references, strict=True):
        given = symbols(prediction)
        distance, size = min(
            (Levenshtein.distance(given, symbols(r)), len(symbols(r)))
            for r in _alternatives(reference)
        )
        edits, length = edits + distance, length + size
    if not length:
        raise ValueError("The references are empty: no symbols to count errors over.")
    return edits / length


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
