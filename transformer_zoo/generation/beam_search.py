"""Beam search: `BeamSearch`, the `num_beams` most likely partial sequences kept per row,
and `beam_search`, which decodes with it as transformers' `_beam_search` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from transformer_zoo.errors import is_flag, is_integer, is_number
from transformer_zoo.generation.search_common import (
    Engine,
    SearchResult,
    check_eos_for,
    check_forced_eos,
    check_max_new_tokens,
    forced_eos_logits,
    log_softmax,
)


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
        check_forced_eos(self)

    def run(self, engine: Engine, inputs, max_new_tokens: int, eos_id=None, pad_id=0):
        return beam_search(engine, inputs, max_new_tokens, self, eos_id, pad_id)


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
    check_eos_for(config.forced_eos, eos_id)
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
