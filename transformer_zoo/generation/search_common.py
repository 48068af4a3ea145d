"""What the three searches (`greedy`, `sampling`, `beam_search`) share: the `Engine`
protocol they step, `SearchResult`, the log-probabilities of a step's logits, the
forced-EOS step (`forced_eos_logits`) and the loop of greedy search and sampling
(`decode_rows`).

An engine implements the `Engine` protocol:

- `start(inputs) -> (logits (B, V), state)`: run the prompt (and the encoder), return the
  logits of the next token for every row.
- `step(next_tokens (B,), state) -> (logits (B, V), state)`: append one token per row.
- `reorder(state, indices (B',)) -> state`: keep rows `indices` of the state, in that
  order; beam search uses it both to expand B rows into B·K beams and to follow the beams.
- optionally, `greedy(inputs, max_new_tokens, eos_id, pad_id) -> SearchResult` where its
  `decodes_greedily` is true: the same greedy search in one call of the engine's runtime
  (`CachedEngine` over onnxruntime: an ONNX `Loop`, `onnx_greedy`), which
  `greedy_search` then uses instead of stepping.

The state is opaque to the search code (device tensors, caches, masks).

A row can also end before EOS: greedy search and sampling take `stopping`, a function of
each step's `(tokens (B,), live (B,) bool)` (live: the rows that generated a token other
than EOS at this step) that returns the (B,) rows that end after it (`serving.stops`: a stop string
is complete). Greedy search then steps, even where the engine `decodes_greedily`, and so
it does with `forced_eos`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from transformer_zoo.errors import InputError, check_flag, is_integer


class Engine(Protocol):
    def start(self, inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, Any]: ...

    def step(self, next_tokens: np.ndarray, state: Any) -> tuple[np.ndarray, Any]: ...

    def reorder(self, state: Any, indices: np.ndarray) -> Any: ...


# (tokens (B,), live (B,) bool) -> (B,) bool: the rows that end after this step's tokens
# (live: the rows whose token is neither padding nor EOS).
Stopping = Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass
class SearchResult:
    """Generated continuations.

    Attributes:
        tokens: (B, N) int64 new tokens, N <= max_new_tokens; `pad_id` after a row's EOS
            (or after the token at which `stopping` ended it).
        scores: (B,) sum of the log-probabilities of each row's tokens up to and including
            its EOS (for beam search: divided by length ** length_penalty). A forced EOS
            (`forced_eos`) adds 0: once forced it has probability 1, as transformers
            scores it.
    """

    tokens: np.ndarray
    scores: np.ndarray


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise log-softmax in float64 (the sampler, beam search and evaluation's
    teacher-forced scores)."""
    logits = np.asarray(logits, dtype=np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def token_log_probs(logits: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """`log_softmax(logits)[row, tokens[row]]` for each row of (B, V) logits, as float64,
    without the (B, V) float64 log-softmax: the exponentials in the logits' own precision,
    their sum in float64 (within 1e-5 of `log_softmax`). For one row of 8,000 logits this
    takes about a third of the time of `log_softmax` and indexing its result (48 against
    137 µs on a loaded 2-core machine), time that every decoding step of 1-3 ms spends."""
    return ranked_log_probs(logits, tokens)[0]


def ranked_log_probs(
    logits: np.ndarray, tokens: np.ndarray, top: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each row of (N, V) logits: the log-probability of `tokens[row]` and the `top`
    most likely ids with theirs, most likely first (equal ones by id), all float64, with
    `token_log_probs`' arithmetic (no (N, V) float64 log-softmax: the rows can be every
    position of a prompt over a large vocabulary).

    Returns:
        `(chosen (N,), top_ids (N, top) int64, top_log_probs (N, top))`.
    """
    logits = np.asarray(logits)
    highest = logits.max(axis=-1, keepdims=True)
    log_total = np.log(np.exp(logits - highest).sum(axis=-1, dtype=np.float64))
    picked = logits[np.arange(len(logits)), tokens]  # (take_along_axis took 3x as long)
    chosen = (picked - highest[:, 0]).astype(np.float64) - log_total
    top = min(int(top), logits.shape[-1])
    if top <= 0:
        return chosen, np.zeros((len(logits), 0), np.int64), np.zeros((len(logits), 0))
    candidates = np.argpartition(-logits, top - 1, axis=-1)[:, :top]
    values = np.take_along_axis(logits, candidates, axis=-1)
    order = np.lexsort((candidates, -values), axis=-1)  # by value, then by id
    ids = np.take_along_axis(candidates, order, axis=-1).astype(np.int64)
    values = np.take_along_axis(values, order, axis=-1)
    return chosen, ids, (values - highest).astype(np.float64) - log_total[:, None]


def check_forced_eos(strategy) -> None:
    """Refuses a `forced_eos` that is not a bool (numpy's is kept as Python's)."""
    object.__setattr__(strategy, "forced_eos", check_flag("forced_eos", strategy.forced_eos))


def forced_eos_logits(logits: np.ndarray, eos_id: int) -> np.ndarray:
    """The logits of the step at `max_new_tokens` under `forced_eos`, in place of the
    model's (B, V) `logits`: 0 for EOS and -inf elsewhere (transformers'
    `ForcedEOSTokenLogitsProcessor`), so that every strategy's draw picks EOS, with
    log-probability 0. The one place the forced end is made; the model's logits at that
    step are not needed, so the searches skip the step that would compute them."""
    forced = np.full(np.shape(logits), -np.inf, dtype=np.asarray(logits).dtype)
    forced[:, eos_id] = 0.0
    return forced


def decode_rows(
    engine, inputs, max_new_tokens, eos_id, pad_id, choose, stopping=None, forced_eos=False
) -> SearchResult:
    """The loop shared by greedy search and sampling: one token per row per step;
    `choose` maps (B, V) logits to (B,) tokens. A row ends after its EOS, or after the
    token at which `stopping` says so (every row draws at every step all the same, so a
    seeded sampling's other rows draw what they would have drawn); with `forced_eos`,
    at `max_new_tokens` (`forced_eos_logits`)."""
    check_max_new_tokens(max_new_tokens)
    check_eos_for(forced_eos, eos_id)
    logits, state = engine.start(inputs)
    batch = logits.shape[0]
    done = np.zeros(batch, dtype=bool)
    scores = np.zeros(batch)
    tokens = []
    for t in range(max_new_tokens):
        if forced_eos and t == max_new_tokens - 1:
            logits = forced_eos_logits(logits, eos_id)
        chosen = np.where(done, pad_id, choose(logits)).astype(np.int64)  # (B,)
        scores += np.where(done, 0.0, token_log_probs(logits, chosen))
        tokens.append(chosen)
        live = ~done
        if eos_id is not None:
            done |= chosen == eos_id
        if stopping is not None:
            done |= live & np.asarray(stopping(chosen, live & ~done), dtype=bool)
        if done.all() or t == max_new_tokens - 1:
            break
        if not (forced_eos and t == max_new_tokens - 2):  # the forced step needs no logits
            logits, state = engine.step(chosen, state)
    return SearchResult(np.stack(tokens, axis=1), scores)


def check_eos_for(forced_eos: bool, eos_id) -> None:
    """Refuses `forced_eos` without an `eos_id` to force (every search's check)."""
    if forced_eos and eos_id is None:
        raise ValueError("`forced_eos` ends rows with EOS: it needs an `eos_id`.")


def check_max_new_tokens(max_new_tokens) -> None:
    """Raises `InputError` (a ValueError) unless `max_new_tokens` is a positive integer;
    a bool is not one (`True` would decode one token)."""
    if not is_integer(max_new_tokens) or max_new_tokens < 1:
        raise InputError(
            f"`max_new_tokens` must be a positive integer. Received: {max_new_tokens!r}"
        )
