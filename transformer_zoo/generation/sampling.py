"""Sampling: `Sampling`, each token drawn from the model's distribution at a temperature,
cut to its top k and its nucleus of probability top p (`filter_top_k_top_p`), and
`sample`, which decodes with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from transformer_zoo.errors import is_integer, is_number
from transformer_zoo.generation.search_common import (
    Engine,
    SearchResult,
    Stopping,
    check_forced_eos,
    decode_rows,
)


@dataclass(frozen=True)
class Sampling:
    """Sample each token from softmax(logits / temperature), restricted to the `top_k`
    most likely tokens and then to the smallest set whose probability reaches `top_p`.

    `Sampling()` samples the whole distribution; transformers' `do_sample=True` keeps the
    50 most likely tokens unless told otherwise (its `top_k` defaults to 50).

    Attributes:
        temperature: > 0; below 1 sharpens, above 1 flattens the distribution.
        top_k: keep only the k most likely tokens; None, 0 or -1: all (0 as in
            transformers and the HTTP server, -1 as in vLLM), stored as None.
        top_p: keep the nucleus of probability `top_p`, in (0, 1] (None: all).
        seed: a non-negative integer: each row draws from a random generator of its own
            seeded with it, so the same input, seed and engine give the same text whatever
            rows are drawn beside it (as a vLLM request's seed; the HTTP server does the
            same, choice j of a request drawing with seed + j). None draws fresh ones.
        forced_eos: as `Greedy`'s.
    """

    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    seed: int | None = None
    forced_eos: bool = False
    name: ClassVar[str] = "sample"

    def __post_init__(self):
        if not (is_number(self.temperature) and self.temperature > 0):
            raise ValueError(
                f"`temperature` must be a positive number. Received: temperature={self.temperature!r}"
            )
        if self.top_k is not None and not (is_integer(self.top_k) and self.top_k >= -1):
            raise ValueError(
                "`top_k` must be a positive integer, or None, 0 or -1 (all tokens). "
                f"Received: top_k={self.top_k!r}"
            )
        if self.top_k is not None and self.top_k <= 0:  # one meaning of "all": None
            object.__setattr__(self, "top_k", None)
        if self.top_p is not None and not (is_number(self.top_p) and 0.0 < self.top_p <= 1.0):
            raise ValueError(
                f"`top_p` must be a number in (0, 1] or None. Received: top_p={self.top_p!r}"
            )
        if self.seed is not None and not (is_integer(self.seed) and self.seed >= 0):
            raise ValueError(
                f"`seed` must be a non-negative integer or None. Received: seed={self.seed!r}"
            )
        check_forced_eos(self)

    def draw(self, logits: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The next token of each row of (B, V) logits (or log-probabilities: the same
        distribution), drawn with `rng` (one uniform per row: inverse-CDF sampling of the
        filtered distribution)."""
        # Shifted to a maximum of 0 in float64 before the division, so that no temperature
        # overflows: a tiny one sends every other logit to -inf (the argmax, as greedy).
        # The exponentials are the softmax times a constant per row, which the filter's
        # nucleus and the CDF below divide out: no log-softmax is needed.
        logits = np.asarray(logits, dtype=np.float64)
        with np.errstate(over="ignore"):
            weights = np.exp((logits - logits.max(axis=-1, keepdims=True)) / self.temperature)
        probs = filter_top_k_top_p(weights, self.top_k, self.top_p)  # (B, V)
        cdf = np.cumsum(probs / probs.sum(-1, keepdims=True), axis=-1)
        draws = rng.random((probs.shape[0], 1))
        return np.minimum((cdf < draws).sum(-1), probs.shape[-1] - 1)

    def run(
        self, engine: Engine, inputs, max_new_tokens: int, eos_id=None, pad_id=0, stopping=None
    ):
        return sample(engine, inputs, max_new_tokens, self, eos_id, pad_id, stopping)


def sample(
    engine: Engine,
    inputs: dict[str, np.ndarray],
    max_new_tokens: int,
    config: Sampling | None = None,
    eos_id: int | None = None,
    pad_id: int = 0,
    stopping: Stopping | None = None,
) -> SearchResult:
    """Sampling (see `Sampling`). Stateless: every call makes a `numpy.random.Generator`
    per row from the seed, so a row's text does not depend on the rows beside it. Scores
    are log-probabilities under the unmodified model distribution."""
    config = Sampling() if config is None else config
    rngs: list[np.random.Generator] = []  # one per row, made at the first step

    def choose(logits: np.ndarray) -> np.ndarray:
        if not rngs:
            rngs.extend(np.random.default_rng(config.seed) for _ in range(len(logits)))
        return np.concatenate([config.draw(logits[i : i + 1], rng) for i, rng in enumerate(rngs)])

    return decode_rows(
        engine, inputs, max_new_tokens, eos_id, pad_id, choose, stopping, config.forced_eos
    )


def filter_top_k_top_p(probs: np.ndarray, top_k: int | None, top_p: float | None) -> np.ndarray:
    """Zero all but the `top_k` largest probabilities (and those tied with the k-th, as
    Hugging Face's and vLLM's top-k keep them, rather than the lowest ids among ties), then
    all outside the nucleus: the most likely tokens whose total first reaches `top_p` of the
    row's (the top token is always kept). `probs` may be any weights proportional to the
    probabilities."""
    order = np.argsort(-probs, axis=-1, kind="stable")  # (B, V), most likely first
    ranked = np.take_along_axis(probs, order, axis=-1)
    keep = np.ones_like(ranked, dtype=bool)
    if top_k is not None:
        kth = ranked[:, min(top_k, ranked.shape[-1]) - 1 :][:, :1]  # (B, 1)
        keep &= ranked >= kth
    if top_p is not None:
        ranked = np.where(keep, ranked, 0.0)
        before = np.cumsum(ranked, axis=-1) - ranked  # mass of the tokens ranked higher
        keep &= before < top_p * ranked.sum(-1, keepdims=True)
    keep[:, 0] = True
    mask = np.zeros_like(keep)
    np.put_along_axis(mask, order, keep, axis=-1)
    return np.where(mask, probs, 0.0)
