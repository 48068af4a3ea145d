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

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np

from transformer_zoo.errors import InputError, is_flag, is_integer, is_number


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
        _check_forced_eos(self)

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
        _check_forced_eos(self)

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


@dataclass(frozen=True)
class BeamSearch:
    """Keep the `num_beams` most likely partial sequences per row (see `beam_search`).
    It returns each row's best hypothesis (no `num_return_sequences`).

    Attributes:
        num_beams: K; 1 is greedy search.
        length_penalty: hypotheses are compared by `sum_logprob / length **
            length_penalty`; > 0 favours longer outputs.
        early_stopping: when a row stops, with transformers' three meanings: True (ours
            by default) once it has K finished hypotheses; False (transformers' default)
            once, besides, its best running beam scored at its current length is no
            better than the worst of them (a heuristic: with a positive length penalty
            a longer one may still have won); "never" the same, scored at the longest
            length it can reach where the length penalty is positive (exact: the
            canonical beam search).
        forced_eos: as `Greedy`'s; the forced EOS's log-probability is 0, so a
            hypothesis ended by it is ranked by its other tokens (as in transformers).
    """

    num_beams: int = 4
    length_penalty: float = 1.0
    early_stopping: bool | str = True
    forced_eos: bool = False
    name: ClassVar[str] = "beam"

    def __post_init__(self):
        if not (is_integer(self.num_beams) and self.num_beams >= 1):
            raise ValueError(
                f"`num_beams` must be a positive integer. Received: num_beams={self.num_beams!r}"
            )
        if not is_number(self.length_penalty):
            raise ValueError(
                "`length_penalty` must be a finite number. "
                f"Received: length_penalty={self.length_penalty!r}"
            )
        if is_flag(self.early_stopping):
            object.__setattr__(self, "early_stopping", bool(self.early_stopping))
        elif not (isinstance(self.early_stopping, str) and self.early_stopping == "never"):
            raise ValueError(
                '`early_stopping` must be True, False or "never". '
                f"Received: early_stopping={self.early_stopping!r}"
            )
        _check_forced_eos(self)

    def run(self, engine: Engine, inputs, max_new_tokens: int, eos_id=None, pad_id=0):
        return beam_search(engine, inputs, max_new_tokens, self, eos_id, pad_id)


def _check_forced_eos(strategy) -> None:
    """Refuses a `forced_eos` that is not a bool (numpy's is kept as Python's)."""
    forced_eos = strategy.forced_eos
    if not is_flag(forced_eos):
        raise ValueError(f"`forced_eos` must be True or False. Received: forced_eos={forced_eos!r}")
    object.__setattr__(strategy, "forced_eos", bool(forced_eos))


def forced_eos_logits(logits: np.ndarray, eos_id: int) -> np.ndarray:
    """The logits of the step at `max_new_tokens` under `forced_eos`, in place of the
    model's (B, V) `logits`: 0 for EOS and -inf elsewhere (transformers'
    `ForcedEOSTokenLogitsProcessor`), so that every strategy's draw picks EOS, with
    log-probability 0. The one place the forced end is made; the model's logits at that
    step are not needed, so the searches skip the step that would compute them."""
    forced = np.full(np.shape(logits), -np.inf, dtype=np.asarray(logits).dtype)
    forced[:, eos_id] = 0.0
    return forced


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
    return _decode_rows(
        engine, inputs, max_new_tokens, eos_id, pad_id, Greedy().draw, stopping, forced_eos
    )


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

    return _decode_rows(
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


def _decode_rows(
    engine, inputs, max_new_tokens, eos_id, pad_id, choose, stopping=None, forced_eos=False
) -> SearchResult:
    """The loop shared by greedy search and sampling: one token per row per step;
    `choose` maps (B, V) logits to (B,) tokens. A row ends after its EOS, or after the
    token at which `stopping` says so (every row draws at every step all the same, so a
    seeded sampling's other rows draw what they would have drawn); with `forced_eos`,
    at `max_new_tokens` (`forced_eos_logits`)."""
    check_max_new_tokens(max_new_tokens)
    _check_eos_for(forced_eos, eos_id)
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


def _check_eos_for(forced_eos: bool, eos_id) -> None:
    if forced_eos and eos_id is None:
        raise ValueError("`forced_eos` ends rows with EOS: it needs an `eos_id`.")


def beam_search(
    engine: Engine,
    inputs: dict[str, np.ndarray],
    max_new_tokens: int,
    config: BeamSearch | None = None,
    eos_id: int | None = None,
    pad_id: int = 0,
) -> SearchResult:
    """Keep the `num_beams` (K) most likely partial sequences per row.

    At each step the 2K best extensions of the K beams are ranked by summed log-probability;
    those ending in EOS among the first K become finished hypotheses and the best K others
    continue. At `max_new_tokens` every one of the first K is a finished hypothesis, EOS or
    not (with `forced_eos`, every beam ends there with EOS, whose log-probability is then
    0). A row keeps its K best finished hypotheses and stops as `config.early_stopping`
    says (`_row_done`: transformers' three meanings), and returns the best of them.
    Hypotheses are compared by `sum_logprob / length ** length_penalty` (length =
    generated tokens including EOS): > 0 favours longer outputs. With `num_beams=1` this is
    greedy search. transformers' `_beam_search` does the same (tested against 5.25's).
    """
    check_max_new_tokens(max_new_tokens)
    config = BeamSearch() if config is None else config
    _check_eos_for(config.forced_eos, eos_id)
    length_penalty = config.length_penalty
    k = int(config.num_beams)
    logits, state = engine.start(inputs)
    batch, vocab = logits.shape
    state = engine.reorder(state, np.repeat(np.arange(batch), k))  # B rows -> B·K beams
    logp = np.repeat(log_softmax(logits), k, axis=0)  # (B·K, V)
    # Only the first beam of each row is live at first, so the K beams start distinct.
    beam_scores = np.tile(np.r_[0.0, np.full(k - 1, -np.inf)], (batch, 1))  # (B, K)
    beam_tokens = np.zeros((batch, k, 0), dtype=np.int64)
    # Each row's best K finished hypotheses (normalized score, tokens), best first.
    finished: list[list[tuple[float, np.ndarray]]] = [[] for _ in range(batch)]
    done = np.zeros(batch, dtype=bool)
    width = min(2 * k, k * vocab)

    def normalized(score, length):
        return score / float(length) ** length_penalty

    for t in range(max_new_tokens):
        last = t == max_new_tokens - 1
        if last and config.forced_eos:
            logp = forced_eos_logits(logp, eos_id)
        candidates = (beam_scores[:, :, None] + logp.reshape(batch, k, vocab)).reshape(batch, -1)
        top = np.argsort(-candidates, axis=-1, kind="stable")[:, :width]  # (B, 2K)
        next_scores = np.full((batch, k), -np.inf)
        next_beams = np.zeros((batch, k), dtype=np.int64)
        next_words = np.full((batch, k), pad_id, dtype=np.int64)
        for b in range(batch):
            if done[b]:
                continue
            filled = 0
            for rank, flat in enumerate(top[b]):
                beam, word = divmod(int(flat), vocab)
                score = candidates[b, flat]
                if score == -np.inf:
                    break
                # At the length limit an extension ends like one with EOS, so a row whose
                # K-th EOS comes on that step still weighs the full-length ones against it
                # (transformers' `max_length` stopping criterion does the same).
                if last or (eos_id is not None and word == eos_id):
                    if rank < k:
                        sequence = np.r_[beam_tokens[b, beam], word]
                        finished[b].append((normalized(score, t + 1), sequence))
                    continue
                next_scores[b, filled], next_beams[b, filled], next_words[b, filled] = (
                    score,
                    beam,
                    word,
                )
                filled += 1
                if filled == k:
                    break
            finished[b] = sorted(finished[b], key=lambda h: -h[0])[:k]
            done[b] = _row_done(config, finished[b], next_scores[b, 0], t + 1, max_new_tokens)
        if done.all() or last:
            break
        beam_tokens = np.concatenate(
            [
                np.take_along_axis(beam_tokens, next_beams[:, :, None], axis=1),
                next_words[:, :, None],
            ],
            axis=2,
        )
        beam_scores = next_scores
        if config.forced_eos and t == max_new_tokens - 2:
            continue  # the forced step needs no logits: `logp` is replaced
        flat_beams = (np.arange(batch)[:, None] * k + next_beams).reshape(-1)
        state = engine.reorder(state, flat_beams)
        logits, state = engine.step(next_words.reshape(-1), state)
        logp = log_softmax(logits)

    best = [hypotheses[0] for hypotheses in finished]
    out_tokens = np.full((batch, max(len(seq) for _, seq in best)), pad_id, dtype=np.int64)
    for b, (_, sequence) in enumerate(best):
        out_tokens[b, : len(sequence)] = sequence
    return SearchResult(out_tokens, np.array([score for score, _ in best]))


def _row_done(
    config: BeamSearch, hypotheses: list, best_running: float, length: int, max_new_tokens: int
) -> bool:
    """Whether a row of beam search stops after a step that leaves its running beams
    `length` tokens long, the best of them scoring `best_running` (summed), with its
    best finished `hypotheses` (best first): transformers' `early_stopping` (its
    `_check_early_stop_heuristic`). All need K finished hypotheses; True stops there.
    False and "never" stop once the best running beam, normalized at a length it might
    reach, is no better than the worst of them: at its current length (False; exact
    where the length penalty is <= 0, since the scores only fall), or at
    `max_new_tokens` where a positive length penalty favours longer ones ("never")."""
    if len(hypotheses) < config.num_beams:
        return False
    if config.early_stopping is True:
        return True
    if config.early_stopping == "never" and config.length_penalty > 0:
        length = max_new_tokens
    return best_running / float(length) ** config.length_penalty <= hypotheses[-1][0]


def check_max_new_tokens(max_new_tokens) -> None:
    """Raises `InputError` (a ValueError) unless `max_new_tokens` is a positive integer;
    a bool is not one (`True` would decode one token)."""
    if not is_integer(max_new_tokens) or max_new_tokens < 1:
        raise InputError(
            f"`max_new_tokens` must be a positive integer. Received: {max_new_tokens!r}"
        )
