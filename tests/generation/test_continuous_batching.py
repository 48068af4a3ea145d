"""Rows that join a running batch and leave it (`CachedEngine.concatenate` and `keep`)
decode exactly as they do alone: the operations continuous batching is built from."""

import numpy as np
import pytest

from transformer_zoo.generation.greedy import Greedy, greedy_search
from transformer_zoo.serving import load_onnx

STEPS = 8


def _inputs(family, ids):
    ids = np.asarray([ids])
    if family == "decoder-only":
        return {"token_ids": ids}
    return {"encoder_token_ids": ids, "decoder_token_ids": np.array([[2]])}


@pytest.mark.parametrize("family", ["decoder-only", "encoder-decoder"])
def test_a_row_that_joins_late_and_one_that_leaves_early_decode_as_alone(family_artifacts, family):
    engine = load_onnx(family_artifacts(family).export_dir).engine
    prompts = {"a": [5, 9, 12, 7, 8, 3], "b": [11, 4], "c": [6, 13, 10]}
    alone = {
        k: greedy_search(engine, _inputs(family, p), STEPS).tokens[0].tolist()
        for k, p in prompts.items()
    }

    def start(key):
        logits, state = engine.start(_inputs(family, prompts[key]))
        return Greedy().draw(logits), state

    produced = {k: [] for k in prompts}
    first, state = start("a")
    rows, last = ["a"], list(first)
    for step in range(STEPS + 4):
        for key, token in zip(rows, last, strict=True):
            produced[key].append(int(token))
        if step == 2:  # b joins a running batch, c right after it
            for key in ("b", "c"):
                token, joined = start(key)
                state = engine.concatenate([state, joined])
                rows.append(key)
                last = np.concatenate([last, token])
                produced[key].append(int(token[0]))
        done = [i for i, key in enumerate(rows) if len(produced[key]) >= STEPS]
        if done:
            keep = [i for i in range(len(rows)) if i not in done]
            if not keep:
                break
            state = engine.keep(state, keep)
            rows, last = [rows[i] for i in keep], np.asarray(last)[keep]
        logits, state = engine.step(np.asarray(last), state)
        last = Greedy().draw(logits)
    assert {k: v[:STEPS] for k, v in produced.items()} == alone


def test_rows_left_after_the_longest_leaves_keep_their_whole_past(family_artifacts):
    """`keep` trims only the leading columns that padding holds in every kept row (TGI's
    `filter`): once the longest row leaves, the next longest still holds real tokens in
    columns where a shorter row holds padding, and must keep them. Each remaining row's
    logits, several steps after the trim, equal those it gets decoded alone."""
    engine = load_onnx(family_artifacts("decoder-only").export_dir).engine
    prompts = [[5, 9, 12, 7, 8, 3, 4, 6], [11, 4], [6, 13, 10, 9, 5]]  # lengths 8, 2, 5
    steps = 4
    alone = []  # each row alone: the logits of its first `steps + 1` steps after the prompt
    for prompt in prompts[1:]:
        logits, state = engine.start({"token_ids": np.asarray([prompt])})
        rows = []
        for _ in range(steps + 1):
            logits, state = engine.step(Greedy().draw(logits), state)
            rows.append(logits[0])
        alone.append(np.stack(rows))
    states, last = [], []
    for prompt in prompts:
        logits, state = engine.start({"token_ids": np.asarray([prompt])})
        states.append(state)
        last.append(Greedy().draw(logits))
    state, last = engine.concatenate(states), np.concatenate(last)
    logits, state = engine.step(last, state)
    state = engine.keep(state, [1, 2])  # the longest row leaves
    together = [logits[1:]]
    for _ in range(steps):
        logits, state = engine.step(Greedy().draw(together[-1]), state)
        together.append(logits)
    together = np.stack(together, axis=1)  # (rows, steps + 1, V)
    for row, expected in zip(together, alone, strict=True):
        np.testing.assert_allclose(row, expected, atol=1e-4)
