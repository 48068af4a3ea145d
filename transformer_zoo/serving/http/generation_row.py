"""`GenerationRow`, one sequence the `GenerationScheduler` generates, and the events its
`emit` receives: each `Token`, the `Prompt`'s own log-probabilities first where asked, then
one `Finished` or `Failed`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from transformer_zoo.generation.greedy import Greedy
from transformer_zoo.generation.sampling import Sampling


@dataclass
class Token:
    """One generated token: its id, its log-probability under the model, and the `top`
    most likely `(id, log-probability)` pairs when the request asked for them."""

    token_id: int
    logprob: float
    top: list[tuple[int, float]] = field(default_factory=list)


@dataclass
class Prompt:
    """The prompt's own tokens, each with its log-probability given the ones before it
    (and the `top` alternatives), for a row that asked (`prompt_logprobs`): emitted
    before the row's first `Token`. `tokens` holds ids[1:]; ids[0] has no context."""

    tokens: list[Token]


@dataclass
class Finished:
    """The row ended: `reason` is `"stop"` (EOS), `"length"` (max_new_tokens),
    `"cancelled"` or `"timeout"`."""

    reason: str


@dataclass
class Failed:
    """The engine raised while running the row's batch."""

    error: BaseException


@dataclass(eq=False)
class GenerationRow:
    """One sequence to generate (a request with `n` > 1 has n rows).

    Attributes:
        ids: prompt ids (decoder-only) or source ids (encoder-decoder).
        max_new_tokens: the most tokens to generate; 0 runs the prompt for its `Prompt`.
        strategy: `Greedy()` or `Sampling(...)`; a sampled row draws from `rng`.
        emit: called on the scheduler's thread with the `Prompt` (if `prompt_logprobs`),
            each `Token`, then one `Finished` or `Failed`.
        top_logprobs: how many alternatives each `Token` lists.
        deadline: `time.monotonic()` past which the row ends with `"timeout"`.
        prompt_logprobs: emit the prompt's own log-probabilities first (`Prompt`).
    """

    ids: list[int]
    max_new_tokens: int
    strategy: Greedy | Sampling
    emit: Callable[[object], None]
    top_logprobs: int = 0
    deadline: float = float("inf")
    prompt_logprobs: bool = False
    rng: np.random.Generator | None = None
    generated: int = 0
    cancelled: bool = False  # set from any thread: the row leaves at the next step
    finished: bool = False  # set by the scheduler once it has emitted the row's end

    def __post_init__(self):
        if isinstance(self.strategy, Sampling):
            self.rng = np.random.default_rng(self.strategy.seed)

    def cancel(self) -> None:
        self.cancelled = True
