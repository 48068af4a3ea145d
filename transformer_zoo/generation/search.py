"""Decoding algorithms over any engine that steps a model: greedy, sampling, beam search.

Numpy only, on purpose: the one engine (`transformer_zoo.generation.engine.CachedEngine`,
over the Keras model, a SavedModel or the ONNX files) and the uncached reference plug
into the same code instead of copying it (STYLE habit 9).

A strategy is a typed value: `Greedy()`, `Sampling(temperature, top_k, top_p, seed)` or
`BeamSearch(num_beams, length_penalty, early_stopping)`, checked when it is made;
`generate(engine, inputs, max_new_tokens, search=...)` runs it. `STRATEGIES` maps the
names the command line and the HTTP server use to the classes. Each also takes
`forced_eos`: a row still running at `max_new_tokens` ends with EOS as its last token
(transformers' `forced_eos_token_id`, which opus-mt's generation config sets), by one
logits step, `forced_eos_logits`, that the three searches apply at that step.

Each strategy lives beside its search: `greedy` (`Greedy`, `greedy_search`), `sampling`
(`Sampling`, `sample`) and `beam_search` (`BeamSearch`, `beam_search`); `search_common`
holds what they share (the `Engine` protocol, `SearchResult`, the log-probabilities,
`forced_eos_logits`). This module runs the one a caller names: `generate` and
`search_config`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from transformer_zoo.generation.beam_search import BeamSearch
from transformer_zoo.generation.greedy import Greedy
from transformer_zoo.generation.sampling import Sampling
from transformer_zoo.generation.search_common import Engine, SearchResult, Stopping

SearchConfig = Greedy | Sampling | BeamSearch
STRATEGIES: dict[str, type] = {cls.name: cls for cls in (Greedy, Sampling, BeamSearch)}


def search_config(strategy: str = "greedy", **options) -> SearchConfig:
    """The strategy named `strategy` (a key of `STRATEGIES`) with `options`, the way the
    command line and the HTTP server name them.

    Raises:
        ValueError: an unknown strategy, an option the strategy does not take (it would
            be ignored), or a bad value.

    Example:
    >>> search_config("sample", top_k=5)
    Sampling(temperature=1.0, top_k=5, top_p=None, seed=None, forced_eos=False)
    """
    if strategy not in STRATEGIES:
        raise ValueError(
            f"`strategy` must be one of {tuple(STRATEGIES)}. Received: strategy={strategy!r}"
        )
    cls = STRATEGIES[strategy]
    accepted = {f.name for f in dataclasses.fields(cls)}
    ignored = sorted(set(options) - accepted)
    if ignored:
        raise ValueError(
            f"The {strategy} strategy takes no {', '.join(ignored)}"
            + (f"; it takes {', '.join(sorted(accepted))}." if accepted else ".")
        )
    return cls(**options)


def generate(
    engine: Engine,
    inputs: dict[str, np.ndarray],
    max_new_tokens: int,
    search: SearchConfig | None = None,
    eos_id: int | None = None,
    pad_id: int = 0,
    stopping: Stopping | None = None,
) -> SearchResult:
    """Decode with the strategy `search` (default `Greedy()`).

    Args:
        engine: an `Engine`.
        inputs: what the engine's `start` takes (prompt ids and masks).
        max_new_tokens: the most tokens to generate per row.
        search: `Greedy()`, `Sampling(...)` or `BeamSearch(...)`.
        eos_id: a row stops after generating it; None runs to `max_new_tokens` (and
            refuses a strategy's `forced_eos`).
        pad_id: written after a row's EOS.
        stopping: greedy search and sampling: ends rows before EOS (`Stopping`). Beam
            search takes none: its beams are reordered at every step, so a caller cuts
            its finished text instead (`ServedModel`'s stop strings).
    """
    search = Greedy() if search is None else search
    if not isinstance(search, (Greedy, Sampling, BeamSearch)):
        raise ValueError(
            "`search` must be Greedy(), Sampling(...) or BeamSearch(...). "
            f"Received: search={search!r}"
        )
    if stopping is None:
        return search.run(engine, inputs, max_new_tokens, eos_id, pad_id)
    if isinstance(search, BeamSearch):
        raise ValueError("Beam search takes no `stopping`: cut its output afterwards.")
    return search.run(engine, inputs, max_new_tokens, eos_id, pad_id, stopping)
