"""Evaluation of decoded outputs: exact match, BLEU and chrF for translation, word and phone
error rates for sequences with several right answers (grapheme-to-phoneme), accuracy for
classification, perplexity for language modelling. No TensorFlow: plain Python lists (or
1-D numpy arrays) in, floats out, so the ONNX side can use them too."""

from __future__ import annotations

import math
import numbers
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence

import numpy as np
import sacrebleu
from rapidfuzz.distance import Levenshtein

from transformer_zoo.errors import is_integer


def _check_lengths(
    predictions: Sequence,
    references: Sequence,
    names: tuple[str, str] = ("predictions", "references"),
) -> None:
    """Both are sequences (lists, tuples, 1-D numpy arrays) of one entry per example, of the
    same length, not empty. A str is refused: iterated, it would be one example per
    character (`exact_match("abc", "abd")` would be 2/3)."""
    for name, value in zip(names, (predictions, references), strict=True):
        if isinstance(value, (str, bytes)):
            raise ValueError(
                f"`{name}` must be a list with one entry per example (`[text]` for one "
                f"example). Received: a single {type(value).__name__} {value!r:.60}"
            )
        if isinstance(value, np.ndarray) and value.ndim != 1:
            raise ValueError(
                f"`{name}` must hold one entry per example: a list or a 1-D array. "
                f"Received: an array of shape {value.shape}"
            )
    if len(predictions) != len(references):
        raise ValueError(
            f"`{names[0]}` and `{names[1]}` must have the same length. Received: "
            f"{len(predictions)} and {len(references)}"
        )
    if len(references) == 0:
        raise ValueError(f"Nothing to evaluate: `{names[1]}` is empty.")


# Every metric takes, per prediction, one reference (a str) or several right ones (a list).
Reference = str | Sequence[str]
OVERALL = "all"  # `per_category`'s key for the score over all examples


def exact_match(predictions: Sequence[str], references: Sequence[Reference]) -> float:
    """Share of predictions equal to one of their references, whole string, with
    whitespace collapsed on both sides (`matches`): a tokenizer that collapses spaces, as
    every line tokenizer here does, cannot write a double space, and BLEU and chrF do not
    see it either."""
    _check_lengths(predictions, references)
    hits = sum(matches(p, refs) for p, refs in zip(predictions, references, strict=True))
    return hits / len(references)


def matches(prediction: str, reference: Reference) -> bool:
    """Whether `prediction` equals one of `reference`'s alternatives once surrounding
    whitespace is dropped and every run of whitespace inside is one space."""
    given = " ".join(prediction.split())
    return any(given == " ".join(r.split()) for r in _alternatives(reference))


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
    if tokenize not in sacrebleu.BLEU.TOKENIZERS:
        raise ValueError(
            f"`tokenize` must be one of sacreBLEU's {sorted(sacrebleu.BLEU.TOKENIZERS)}. "
            f"Received: tokenize={tokenize!r}"
        )
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


def space_separated(references: Sequence[Reference]) -> bool:
    """Whether an error rate over `references` counts whitespace-separated symbols
    (phones, words), as it does where any reference holds whitespace inside, or else
    characters. Decided once per corpus and applied to every prediction and reference
    alike: a one-phone pronunciation (`AY1`) is one phone, not three characters."""
    return any(
        any(c.isspace() for c in r.strip()) for refs in references for r in _alternatives(refs)
    )


def symbols(text: str, spaced: bool) -> list[str]:
    """The units an error rate counts in `text`: its whitespace-separated symbols where
    `spaced` (`space_separated`), else its characters (surrounding whitespace dropped)."""
    return text.split() if spaced else list(text.strip())


def word_error_rate(predictions: Sequence[str], references: Sequence[Reference]) -> float:
    """Share of predictions equal to none of their references (`matches`: whitespace
    collapsed): the word error rate of grapheme-to-phoneme, where each word is one
    prediction and may have several right pronunciations; one minus `exact_match`."""
    _check_lengths(predictions, references)
    wrong = sum(not matches(p, refs) for p, refs in zip(predictions, references, strict=True))
    return wrong / len(references)


def phone_error_rate(
    predictions: Sequence[str], references: Sequence[Reference], spaced: bool | None = None
) -> float:
    """Corpus symbol error rate: for each prediction, the Levenshtein distance (rapidfuzz)
    in `symbols` to its closest reference, summed and divided by the summed lengths of
    those closest references. The symbols are phones where any reference is
    space-separated, else characters (`space_separated`), the same for every string;
    `spaced` gives that choice instead, decided over a whole corpus, so that a subset of
    it (a category of one-phone words) counts the same symbols as the corpus does."""
    _check_lengths(predictions, references)
    spaced = space_separated(references) if spaced is None else spaced
    edits = length = 0
    for prediction, reference in zip(predictions, references, strict=True):
        given = symbols(prediction, spaced)
        distance, size = min(
            (Levenshtein.distance(given, wanted), len(wanted))
            for wanted in (symbols(r, spaced) for r in _alternatives(reference))
        )
        edits, length = edits + distance, length + size
    if not length:
        raise ValueError("The references are empty: no symbols to count errors over.")
    return edits / length


def accuracy(predictions: Sequence, labels: Sequence) -> float:
    """Share of predicted labels equal to the true ones."""
    _check_lengths(predictions, labels, ("predictions", "labels"))
    return float(sum(p == t for p, t in zip(predictions, labels, strict=True)) / len(labels))


def corpus_perplexity(total_negative_log_likelihood: float, token_count: int) -> float:
    """exp(total NLL / tokens): the corpus perplexity from summed token log-losses (nats).

    Args:
        total_negative_log_likelihood: the sum over the tokens of -log p(token), each ≥ 0
            (a probability is at most 1), so the sum is too.
        token_count: how many tokens that sum is over, ≥ 1.

    Returns:
        The perplexity, ≥ 1; `inf` where it exceeds a float (a mean loss over 709 nats).
    """
    if not is_integer(token_count) or token_count <= 0:
        raise ValueError(
            f"`token_count` must be a positive integer. Received: token_count={token_count!r}"
        )
    total = total_negative_log_likelihood
    if isinstance(total, bool) or not isinstance(total, numbers.Real) or not total >= 0:
        raise ValueError(
            "`total_negative_log_likelihood` must be a number ≥ 0: the sum of the tokens' "
            f"-log p, each ≥ 0. Received: total_negative_log_likelihood={total!r}"
        )
    mean = total / int(token_count)
    return math.exp(mean) if mean < math.log(sys.float_info.max) else math.inf


def check_categories(categories: Sequence[str]) -> None:
    """Raises `ValueError` where a category is named `OVERALL`, the name of the score
    over all examples, which it would stand for."""
    if OVERALL in categories:
        raise ValueError(
            f"An example's category is named {OVERALL!r}, the name of the score over all "
            f"examples: rename that category. Received: category {OVERALL!r} at example "
            f"{list(categories).index(OVERALL)}"
        )


def per_category(
    metric: Callable[[Sequence, Sequence], float],
    predictions: Sequence,
    references: Sequence,
    categories: Sequence[str],
) -> dict[str, float]:
    """`metric` over each category's examples and, last, over all examples (`OVERALL`,
    "all"). An example of category "" has none: it counts in "all" only.

    Raises:
        ValueError: mismatched lengths, or a category named "all" (`check_categories`).
    """
    _check_lengths(predictions, references)
    _check_lengths(categories, references, ("categories", "references"))
    check_categories(categories)
    groups: dict[str, tuple[list, list]] = defaultdict(lambda: ([], []))
    for prediction, reference, category in zip(predictions, references, categories, strict=True):
        if category:
            groups[category][0].append(prediction)
            groups[category][1].append(reference)
    scores = {c: metric(p, r) for c, (p, r) in sorted(groups.items())}
    scores[OVERALL] = metric(predictions, references)
    return scores
