"""Generated text in batches: `completions_in_batches` runs id lists through a search in
batches of similar lengths and makes each row's text, ended by stop strings as its tokens
come (greedy search, sampling) or cut afterwards (beam search), with the reason it ended
(`finish_reason`). `ServedModel.generate` and `translate` use it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from transformer_zoo.generation.beam_search import BeamSearch
from transformer_zoo.generation.search_common import Stopping
from transformer_zoo.progress import progress_bar
from transformer_zoo.serving.detokenize import continuation_text
from transformer_zoo.serving.input_checks import check_batch_size
from transformer_zoo.serving.length_batches import sorted_batches
from transformer_zoo.serving.stops import StopText, first_stop


class Completion(NamedTuple):
    """One generated text and why it ended, as OpenAI's completions name it
    (`finish_reason`): "stop" (the model's EOS or a stop string) or "length" (its
    `max_new_tokens`, or the room left in the context, cut it)."""

    text: str
    finish_reason: str


def finish_reason(
    tokens: Sequence[int], eos: int | None, max_new_tokens: int, stopped: bool, forced_eos: bool
) -> str:
    """How a generated row ended: "stop" where its EOS or a stop string (`stopped`) ended
    it, "length" where `max_new_tokens` did, as the HTTP server reports it. A forced EOS
    (`forced_eos`: the row's `max_new_tokens`-th token is EOS whatever the model says) is
    the length limit's."""
    if stopped:
        return "stop"
    tokens = [int(token) for token in tokens]
    if eos is not None and eos in tokens:
        if not (forced_eos and tokens.index(eos) == max_new_tokens - 1):
            return "stop"
    return "length"


def completions_in_batches(
    ids: list[list[int]],
    budgets: list[int],
    batch_size: int,
    run,
    tokenizer,
    continues_prompt: bool,
    eos: int | None,
    search=None,
    stops=(),
    shown=("", False, "texts"),
) -> list[Completion]:
    """The output text of each id list and its `finish_reason`, in input order, from
    `run(id lists, max_new_tokens, stopping)` (a `SearchResult`) called on batches of
    at most `batch_size`: all of them at once when they fit, else batches of similar
    lengths, sorted so that each pads little. Each row decodes at most its own
    `budgets[i]` new tokens: a batch whose rows' budgets differ runs once per budget.
    A row's output does not depend on its batch (a seeded sampling gives each row a
    generator of its own), except with int8 weights, whose activation scale spans the
    batch (`export.quantize`).

    With `stops`, each row's text is followed as its tokens come (`StopText`) and the
    row ends when a stop string is complete (`stopping`); beam search's finished
    text is cut instead. `tokenizer` decodes the output ids (`continuation_text`, up
    to `eos`): with `continues_prompt` (a decoder-only model's) a row's text continues
    its prompt's, else it starts afresh (a translation's). `shown`: `(what, progress,
    unit)` of the bar that counts the rows done (`progress.progress_bar`)."""
    check_batch_size(batch_size)
    if len(ids) <= batch_size:
        batches = [list(range(len(ids)))]
    else:
        batches = sorted_batches([len(row) for row in ids], batch_size)
    forced_eos = bool(getattr(search, "forced_eos", False))
    completions = [Completion("", "stop")] * len(ids)
    with progress_bar(len(ids), *shown) as bar:
        for batch in batches:
            for budget in dict.fromkeys(budgets[i] for i in batch):
                rows = [i for i in batch if budgets[i] == budget]
                followed: list[StopText] = []  # each row's text as the search goes
                stopping = None
                if stops and not isinstance(search, BeamSearch):
                    followed = [
                        _stop_text(tokenizer, ids[i], continues_prompt, stops) for i in rows
                    ]
                    stopping = _stopping(followed)
                result = run([ids[i] for i in rows], budget, stopping)
                for j, (i, tokens) in enumerate(zip(rows, result.tokens, strict=True)):
                    text = _completion_text(tokenizer, ids[i], tokens, continues_prompt, eos)
                    at = first_stop(text, stops) if stops else None
                    if at is not None:  # where the row stopped (beam search: cut afterwards)
                        text = text[:at]
                    elif followed and followed[j].stopped:  # the tokens' texts held it,
                        text = followed[j].text  # the whole decoded text not (unseen yet)
                    stopped = at is not None or bool(followed and followed[j].stopped)
                    reason = finish_reason(tokens, eos, budget, stopped, forced_eos)
                    completions[i] = Completion(text, reason)
                bar.update(len(rows))
    return completions


def _stop_text(tokenizer, start_ids: list[int], continues_prompt: bool, stops) -> StopText:
    """A row's text as its tokens come, after the prompt it continues (a
    decoder-only model's) or from nothing (a translation's)."""
    context = start_ids if continues_prompt else []
    return StopText(tokenizer, context, stops)


def _completion_text(tokenizer, start_ids, tokens, continues_prompt: bool, eos) -> str:
    """A decoder-only completion as it continues its prompt's text; a translation's
    text (its target starts afresh)."""
    return continuation_text(tokenizer, start_ids if continues_prompt else [], tokens, eos)


def _stopping(rows: list[StopText]) -> Stopping:
    """The `search_common.Stopping` of a batch's rows: a row ends when its token completes a
    stop string (its `StopText` reads each token a live row generates)."""

    def stopping(tokens: np.ndarray, live: np.ndarray) -> np.ndarray:
        return np.array(
            [bool(live[j]) and row.add(int(tokens[j])) for j, row in enumerate(rows)], bool
        )

    return stopping
