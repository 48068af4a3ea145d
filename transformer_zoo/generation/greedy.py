"""Greedy search: `Greedy`, the most likely token at every step, and `greedy_search`.

Where the engine `decodes_greedily` (`CachedEngine` over onnxruntime: an ONNX `Loop`,
`onnx_greedy`), `greedy_search` runs the whole search in one call of the engine's
`greedy`, with the same tokens, instead of stepping it; it steps all the same where
`stopping` or `forced_eos` may end rows (`search_common`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from transformer_zoo.generation.search_common import (
    Engine,
    SearchResult,
    Stopping,
    check_forced_eos,
    check_max_new_tokens,
    decode_rows,
)


@dataclass(frozen=True)
class Greedy:
    """Pick the most likely token at every step.

    Attributes:
        forced_eos: a row still running at `max_new_tokens` ends with EOS as its last
            token (transformers' `forced_eos_token_id`; see `forced_eos_logits`).
    """

    forced_eos: bool = False
    name: ClassVar[str] = "greedy"

    def __post_init__(self):
        check_forced_eos(self)

    def draw(self, logits: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
        """The next token of each row of (B, V) logits (or log-probabilities): the most
        likely."""
        return np.asarray(logits).argmax(-1)

    def run(
        self, engine: Engine, inputs, max_new_tokens: int, eos_id=None, pad_id=0, stopping=None
    ):
        return greedy_search(
            engine, inputs, max_new_tokens, eos_id, pad_id, stopping, self.forced_eos
        )


def greedy_search(
    engine: Engine,
    inputs: dict[str, np.ndarray],
    max_new_tokens: int,
    eos_id: int | None = None,
    pad_id: int = 0,
    stopping: Stopping | None = None,
    forced_eos: bool = False,
) -> SearchResult:
    """Pick the most likely token at every step; in one call where the engine
    `decodes_greedily` (the same tokens; see the module docstring), unless `stopping`
    may end rows early (a function the engine's runtime cannot call) or `forced_eos`
    ends them at `max_new_tokens` (`Greedy.forced_eos`; the in-graph loop has no such
    step)."""
    if getattr(engine, "decodes_greedily", False) and stopping is None and not forced_eos:
        check_max_new_tokens(max_new_tokens)
        return engine.greedy(inputs, max_new_tokens, eos_id, pad_id)
    return decode_rows(
        engine, inputs, max_new_tokens, eos_id, pad_id, Greedy().draw, stopping, forced_eos
    )
