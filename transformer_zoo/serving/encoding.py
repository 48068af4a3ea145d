"""The numpy side of an encoder-only `ServedModel`: its texts tokenized (`tokenize`) and
padded into the graph's feeds (`encoder_feeds`), and the graph's outputs made sentence
embeddings (`mean_pool`) and class scores (`class_scores`)."""

from __future__ import annotations

import numpy as np

from transformer_zoo.serving.input_checks import warn_truncated
from transformer_zoo.text import pair_ids
from transformer_zoo.text.formats import encoder_rows
from transformer_zoo.text.wordpiece import WordPieceTokenizer

POOLING_OUTPUTS = ("sentence_embedding", "last_hidden_state")


def tokenize(
    tokenizer, texts: list[str], text_pairs, max_length: int, type_vocabulary_size: int = 2
) -> list[tuple[list[int], list[int]]]:
    """`(ids, segment ids)` per text (or pair), truncated to `max_length`, for a model of
    `type_vocabulary_size` segments (`text.formats.pair_row`)."""
    rows = encoder_rows(tokenizer, texts, text_pairs, None, type_vocabulary_size)
    warn_truncated([len(ids) for ids, _ in rows], max_length)
    if all(len(ids) <= max_length for ids, _ in rows):
        return rows
    return encoder_rows(tokenizer, texts, text_pairs, max_length, type_vocabulary_size)


def tokenizer_lengths(tokenizer, texts: list[str]) -> list[int]:
    """The untruncated length of each text's ids (WordPiece's in one batch)."""
    if isinstance(tokenizer, WordPieceTokenizer):
        return tokenizer.lengths(texts)
    return [len(pair_ids(tokenizer, text, None)[0]) for text in texts]


def encoder_feeds(
    encoded: list[tuple[list[int], list[int]]], pad: int, type_vocabulary_size: int
) -> dict:
    """The graph's feeds for tokenized texts, padded to the longest."""
    width = max(len(ids) for ids, _ in encoded)
    feeds = {"input_ids": np.full((len(encoded), width), pad, np.int64)}
    feeds["attention_mask"] = np.zeros_like(feeds["input_ids"])
    segments = np.zeros_like(feeds["input_ids"])
    for row, (ids, segment) in enumerate(encoded):
        feeds["input_ids"][row, : len(ids)] = ids
        feeds["attention_mask"][row, : len(ids)] = 1
        segments[row, : len(ids)] = segment
    if type_vocabulary_size:
        feeds["token_type_ids"] = segments
    return feeds


def class_scores(logits: np.ndarray, problem_type: str | None) -> np.ndarray:
    """(N, C) scores of (N, C) logits as transformers' `TextClassificationPipeline` gives
    them for a model's `problem_type`: `"regression"`, the logits themselves;
    `"multi_label_classification"`, or a single label (cross-encoder/ms-marco-*), a sigmoid
    per label; otherwise a softmax over the labels."""
    logits = np.asarray(logits, np.float64)
    if problem_type == "regression":
        scores = logits
    elif problem_type == "multi_label_classification" or logits.shape[-1] == 1:
        scores = np.exp(-np.logaddexp(0.0, -logits))  # sigmoid, without overflow
    else:
        shifted = np.exp(logits - logits.max(-1, keepdims=True))
        scores = shifted / shifted.sum(-1, keepdims=True)
    return scores.astype(np.float32)


def mean_pool(sequence: np.ndarray, padding_mask: np.ndarray, normalize: bool = True) -> np.ndarray:
    """Masked mean over tokens of (B, S, D), then L2 normalisation: (B, D). The clamps
    (1e-9 tokens, 1e-12 norm) are sentence-transformers' and `EncoderOnly.embed`'s."""
    weights = padding_mask.astype(np.float32)  # (B, S)
    # The masked sum as one (B, 1, S) @ (B, S, D) product: about half the time of
    # multiplying and summing (B, S, D), which counts at batch 1.
    pooled = np.matmul(weights[:, None, :], sequence)[:, 0]
    pooled /= np.maximum(weights.sum(1, keepdims=True), 1e-9)
    if normalize:
        norms = np.sqrt(np.einsum("ij,ij->i", pooled, pooled))[:, None]
        pooled /= np.maximum(norms, 1e-12)
    return pooled
