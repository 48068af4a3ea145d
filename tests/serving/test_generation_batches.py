"""`ServedModel.generate` and `translate` decode many texts in batches of `batch_size`
texts of similar length, not as one batch padded to the longest: every output is what
the text gives alone, in input order, and a text that cannot fit fails before any batch
runs."""

from __future__ import annotations

import dataclasses
import queue

import numpy as np
import pytest

from tests.artifacts import SENTENCES
from transformer_zoo.cli import main
from transformer_zoo.generation import DEFAULT_NEW_TOKENS, Greedy
from transformer_zoo.serving import InputError, load_onnx
from transformer_zoo.serving.http.generation_row import Finished, GenerationRow, Token
from transformer_zoo.serving.http.generation_scheduler import GenerationScheduler

TEXTS = sorted({s for s in SENTENCES if len(s) < 25}, key=lambda s: (len(s) * 7919) % 13)[:7]


@pytest.mark.parametrize("family", ["encoder-decoder", "decoder-only"])
def test_each_text_gets_what_it_gets_alone_in_input_order(family_artifacts, family):
    served = load_onnx(family_artifacts(family).export_dir)
    lengths = [len(ids) for ids in served.prompt_ids(TEXTS)]
    assert len(set(lengths)) > 2 and lengths != sorted(lengths)  # batches reorder them

    def run(texts, **batching):
        if family == "encoder-decoder":
            return served.translate(texts, 6, **batching)
        return served.generate(texts, 6, **batching)

    alone = [run([text])[0] for text in TEXTS]
    assert run(TEXTS, batch_size=2) == alone  # four batches, shortest first
    assert run(TEXTS) == alone  # one batch (the default holds 64)


def test_a_prompt_that_cannot_fit_fails_before_any_batch_runs(family_artifacts, monkeypatch):
    served = load_onnx(family_artifacts("decoder-only").export_dir)
    calls = []
    monkeypatch.setattr(served, "generate_ids", lambda *args, **kwargs: calls.append(args))
    context = served.dims.max_length
    long = " ".join(["the cat"] * 8)  # the longest, so its batch would run last
    room = context - len(served.prompt_ids([long])[0])
    with pytest.raises(
        InputError, match=f"leaves room for {room} new tokens? in the model's context of {context}"
    ):
        served.generate([*TEXTS, long], room + 1, batch_size=1)
    assert calls == []
    with pytest.raises(InputError, match="`batch_size` must be a positive integer"):
        served.generate(TEXTS, 4, batch_size=0)


def test_the_command_takes_a_batch_size(family_artifacts, capsys):
    export = str(family_artifacts("encoder-decoder").export_dir)
    outputs = []
    for extra in ([], ["--batch-size", "2"]):
        assert main(["translate", *TEXTS, "--model", export, *extra]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] and len(outputs[0].splitlines()) == len(TEXTS)


def test_a_completion_continues_its_prompt_with_the_space_between(family_artifacts):
    """`prompt + completion` is the text of the prompt's and the generated ids together
    (as the server's completions and OpenAI's are): SentencePiece's first piece of a
    completion, `▁word`, keeps its space, which decoding the new ids alone drops."""
    served = load_onnx(family_artifacts("decoder-only").export_dir)
    prompts = [
        text for text in TEXTS if served.tokenizer.decode(served.prompt_ids([text])[0]) == text
    ]
    completions = served.generate(prompts, 6)
    tokens = served.generate_ids(served.prompt_ids(prompts), 6).tokens
    for prompt, ids, row, completion in zip(
        prompts, served.prompt_ids(prompts), tokens, completions, strict=True
    ):
        assert prompt + completion == served.tokenizer.decode([*ids, *row])
    assert any(c.startswith(" ") for c in completions)  # what decoding alone loses


@pytest.mark.parametrize("forced_eos", [False, True])
def test_each_completion_says_whether_it_ended_or_was_cut(family_artifacts, forced_eos):
    """Only the HTTP server said that an output was cut by the length limit: `generate`
    returns bare texts. `generate_completions` gives each text with OpenAI's
    `finish_reason`, which the search's own tokens decide: "stop" at the row's EOS,
    "length" where `max_new_tokens` cut it (a forced EOS too)."""
    directory = family_artifacts("decoder-only").export_dir
    plain = load_onnx(directory)
    rows = plain.prompt_ids(TEXTS)
    tokens = plain.generate_ids(rows, 6).tokens  # no EOS among them: the reference
    eos = int(tokens[0, 2])  # made the end token: row 0 ends at its third token
    ended = [eos in row[: 5 if forced_eos else 6].tolist() for row in tokens]
    assert any(ended) and not all(ended)
    served = load_onnx(directory)
    served.config = dataclasses.replace(
        plain.config, special_ids={**plain.config.special_ids, "eos": eos}
    )
    completions = served.generate_completions(TEXTS, 6, Greedy(forced_eos=forced_eos))
    assert [c.finish_reason for c in completions] == ["stop" if e else "length" for e in ended]
    assert [c.text for c in completions] == served.generate(TEXTS, 6, Greedy(forced_eos=forced_eos))
    # A stop string ends a cut row too: its text before the stop string, "stop".
    cut = next(i for i, e in enumerate(ended) if not e)
    text = completions[cut].text
    stop = text.strip()[1:3]
    (stopped,) = served.generate_completions([TEXTS[cut]], 6, stop=stop)
    assert stopped == (text[: text.index(stop)], "stop")


def test_the_servers_scheduler_ends_each_row_as_generate_completions_does(family_artifacts):
    """The HTTP server's `GenerationScheduler` gives a row that reaches EOS the
    finish_reason "stop" and one cut at `max_new_tokens` "length" (OpenAI's meanings), as
    `generate_completions` does for the same rows, with the tokens before the EOS. The EOS
    is made a token greedy search reaches, as in the test above."""
    directory = family_artifacts("decoder-only").export_dir
    plain = load_onnx(directory)
    rows = plain.prompt_ids(TEXTS)
    tokens = plain.generate_ids(rows, 6).tokens  # no EOS among them: the reference
    eos = int(tokens[0, 2])
    served = load_onnx(directory)
    served.config = dataclasses.replace(
        plain.config, special_ids={**plain.config.special_ids, "eos": eos}
    )
    expected = [c.finish_reason for c in served.generate_completions(TEXTS, 6)]
    assert "stop" in expected and "length" in expected
    events = [queue.Queue() for _ in rows]
    scheduler = GenerationScheduler(served)
    try:
        scheduler.submit(
            [
                GenerationRow(list(ids), 6, Greedy(), row_events.put)
                for ids, row_events in zip(rows, events, strict=True)
            ]
        )
        reasons, emitted = [], []
        for row_events in events:
            ids = []
            while not isinstance(event := row_events.get(timeout=60), Finished):
                assert isinstance(event, Token), event  # not `Failed`
                ids.append(event.token_id)
            reasons.append(event.reason)
            emitted.append(ids)
    finally:
        scheduler.close(10)
    assert reasons == expected
    for ids, row in zip(emitted, tokens.tolist(), strict=True):
        assert ids == (row[: row.index(eos)] if eos in row else row)


def test_without_max_new_tokens_each_prompt_decodes_up_to_its_room(family_artifacts, capsys):
    """The default of 32 new tokens refused every prompt that left less room, though any
    smaller explicit value ran: now it is cut to the room each prompt leaves, and only a
    prompt that fills the context is refused."""
    served = load_onnx(family_artifacts("decoder-only").export_dir)
    context = served.dims.max_length
    prompts = ["dogs", " ".join(["the cat"] * 9), "the cat sat on the mat " * 3, *TEXTS[:2]]
    rooms = [context - len(ids) for ids in served.prompt_ids(prompts)]
    assert 0 < min(rooms) < DEFAULT_NEW_TOKENS <= max(rooms) and len(set(rooms)) > 2
    budgets = [min(DEFAULT_NEW_TOKENS, room) for room in rooms]
    alone = [served.generate([p], budget)[0] for p, budget in zip(prompts, budgets, strict=True)]
    assert served.generate(prompts) == alone  # one batch, a search per budget
    assert served.generate(prompts, batch_size=2) == alone
    lengths = [len(served.generate_ids([ids]).tokens[0]) for ids in served.prompt_ids(prompts)]
    assert lengths == budgets  # an untrained model runs to the end
    with pytest.raises(InputError, match=r"; max_new_tokens=32\."):
        served.generate(prompts, DEFAULT_NEW_TOKENS)  # an explicit value is still checked
    long = prompts[int(np.argmin(rooms))]
    args = ["generate", long, "--model", str(family_artifacts("decoder-only").export_dir)]
    outputs = []
    for extra in ([], ["--max-new-tokens", str(min(rooms))]):  # the command's default too
        assert main([*args, *extra]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] == alone[int(np.argmin(rooms))] + "\n"


def test_rows_whose_clients_left_the_queue_free_their_places(family_artifacts):
    """A client that went away (or timed out) while its rows waited kept their places in
    `max_queue` until the batch had room for them: a new request got 429 with nobody
    waiting. The scheduler's loop is held (its lock) so that the rows stay queued."""
    from transformer_zoo.serving.http.scheduler import QueueFull

    served = load_onnx(family_artifacts("decoder-only", saved_model=False).export_dir)
    scheduler = GenerationScheduler(served, max_batch_size=1, max_queue=2)
    events = [queue.Queue() for _ in range(4)]
    rows = [GenerationRow([5, 6, 7], 2, Greedy(), e.put) for e in events]
    try:
        with scheduler._condition:  # the loop takes no row meanwhile (a re-entrant lock)
            scheduler.submit(rows[:2])
            with pytest.raises(QueueFull):
                scheduler.submit(rows[2:3])
            rows[0].cancel()  # its client went away
            rows[1].deadline = 0.0  # its time ran out while it waited
            scheduler.submit(rows[2:4])  # both fit: nobody is waiting any more
        ends = [e.get(timeout=60) for e in events[:2]]
        assert ends == [Finished("cancelled"), Finished("timeout")]
        for row_events in events[2:]:
            while not isinstance(event := row_events.get(timeout=60), Finished):
                assert isinstance(event, Token), event
            assert event == Finished("length")
    finally:
        scheduler.close(10)
