"""Evaluation: the metrics (exact match, BLEU, chrF, word and phone error rates over
several references, accuracy, perplexity, per category) and the one evaluation of a model
on a task split, used by `train`, `evaluate`, `export --quantize` and the benchmarks."""

from transformer_zoo.evaluation.metrics import (
    accuracy,
    bleu,
    chrf,
    corpus_perplexity,
    exact_match,
    per_category,
    phone_error_rate,
    word_error_rate,
)

__all__ = [
    "accuracy",
    "bleu",
    "chrf",
    "corpus_perplexity",
    "exact_match",
    "per_category",
    "phone_error_rate",
    "word_error_rate",
]
