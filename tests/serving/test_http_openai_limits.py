"""What `/v1/completions` costs the server, against a real one: `echo` with `logprobs`
scores and works out a prompt once for its `n` choices, off the event loop, within the
request's timeout and up to a bounded size; prompts are counted before their shape is
read; and a field of the wrong JSON type is refused (OpenAI's spec: an integer, a
boolean, a number), not read as another."""

from __future__ import annotations

import concurrent.futures
import json
import time
from pathlib import Path

import numpy as np
import pytest

from tests.serving import references
from tests.serving.conftest import prompt_of
from tests.serving.live_server import LiveServer
from tests.serving.references import decoder_log_probs, log_softmax, token_texts
from transformer_zoo.serving.http import ServerSettings, completions, openai_protocol
from transformer_zoo.serving.http.scheduler import MAX_REQUEST

README = Path(__file__).resolve().parents[2] / "README.md"


class Counted:
    """Counts the calls of `owner.name` (an instance's method), optionally slowed."""

    def __init__(self, monkeypatch, owner, name: str, sleep: float = 0.0):
        self.calls = 0
        real = getattr(owner, name)

        def counted(*args, **kwargs):
            self.calls += 1
            time.sleep(sleep)
            return real(*args, **kwargs)

        monkeypatch.setattr(owner, name, counted)


def _events(raw: bytes) -> list[dict]:
    lines = [line.removeprefix(b"data: ") for line in raw.split(b"\n\n") if line]
    assert lines[-1] == b"[DONE]"
    return [json.loads(line) for line in lines[:-1]]


def _streamed(raw: bytes) -> dict[int, dict]:
    """Each choice of a stream as a whole answer's choice, its chunks in order."""
    choices: dict[int, dict] = {}
    for event in _events(raw):
        for chunk in event["choices"]:
            got = choices.setdefault(
                chunk["index"], {"text": "", "chunks": 0, "finish_reason": None, "tokens": []}
            )
            assert got["finish_reason"] is None  # nothing after the last chunk
            got["text"] += chunk["text"]
            got["chunks"] += 1
            got["finish_reason"] = chunk["finish_reason"]
            if chunk["logprobs"]:
                got["tokens"].append(chunk["logprobs"]["tokens"])
    return choices


def _health_during(server, send):
    """`send()`'s result, and the slowest `/health` answer while it ran."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        answer = pool.submit(send)
        slowest = 0.0
        while not answer.done():
            before = time.monotonic()
            assert server.request("GET", "/health")[0] == 200
            slowest = max(slowest, time.monotonic() - before)
            time.sleep(0.01)
        return answer.result(), slowest


# --- echo with logprobs -------------------------------------------------------------------
def test_an_echoed_prompt_is_scored_and_worked_out_once_for_its_n_choices(
    server, local, monkeypatch
):
    gpt = local["gpt"]
    served = server.entry("gpt").served
    prompts = [gpt.prompt_ids("the cat sat on the mat")[0], gpt.prompt_ids("dogs and cats")[0]]
    body = {"model": "gpt", "prompt": prompts, "max_tokens": 0, "echo": True, "logprobs": 3}
    counts = {}
    answers = {}
    for n in (1, 4):
        scoring = Counted(monkeypatch, served.engine, "start_scoring")
        decoding = Counted(monkeypatch, served.target_tokenizer, "decode")
        status, _, answers[n] = server.request("POST", "/v1/completions", {**body, "n": n})
        assert status == 200, answers[n]
        counts[n] = (scoring.calls, decoding.calls)
        monkeypatch.undo()
    assert counts[4] == counts[1] and counts[1][0] == len(prompts)
    for choice in answers[4]["choices"]:
        alone = answers[1]["choices"][choice["index"] // 4]
        assert choice["text"] == alone["text"] and choice["logprobs"] == alone["logprobs"]
        ids = prompts[choice["index"] // 4]
        assert choice["logprobs"]["tokens"] == token_texts(gpt, [], ids)
        scores = decoder_log_probs(gpt, ids)[np.arange(len(ids) - 1), ids[1:]]
        np.testing.assert_allclose(choice["logprobs"]["token_logprobs"][1:], scores, atol=1e-4)


def test_streamed_choices_of_a_scored_prompt_start_with_it_once_its_scores_come(server):
    # Only the prompt's first row scores it; the others, decoded meanwhile, wait for its
    # scores to send their first chunk, which holds the prompt.
    ids = server.entry("gpt").served.prompt_ids("the cat sat")[0]
    body = {
        "model": "gpt", "prompt": [ids, ids[:3]], "n": 3, "max_tokens": 3, "temperature": 0,
        "echo": True, "logprobs": 1,
    }  # fmt: skip
    status, _, whole = server.request("POST", "/v1/completions", body)
    assert status == 200
    status, _, raw = server.request("POST", "/v1/completions", {**body, "stream": True})
    streamed = _streamed(raw)
    assert status == 200 and sorted(streamed) == list(range(6))
    for choice in whole["choices"]:
        got = streamed[choice["index"]]
        assert got["text"] == choice["text"] and got["finish_reason"] == choice["finish_reason"]
        prompt = [ids, ids[:3]][choice["index"] // 3]
        assert len(got["tokens"][0]) >= len(prompt)  # the prompt's tokens, in the first chunk
        assert sum(got["tokens"], []) == choice["logprobs"]["tokens"]


@pytest.mark.parametrize("stream", [False, True])
def test_echoed_prompts_are_worked_out_off_the_event_loop(server, monkeypatch, stream):
    # Each decode of the prompt's tokens slowed to 2 ms: about 1.5 s of work for this
    # answer, which once ran on the event loop (and `n` times over), so that /health
    # waited for all of it.
    ids = server.entry("gpt").served.prompt_ids("the cat sat on the mat " * 3)[0][:31]
    body = {"model": "gpt", "prompt": [ids, ids[::-1]], "max_tokens": 0, "echo": True}
    body.update(logprobs=5, n=2, stream=stream)
    Counted(monkeypatch, server.entry("gpt").served.target_tokenizer, "decode", 0.002)
    started = time.monotonic()
    (status, _, answer), slowest = _health_during(
        server, lambda: server.request("POST", "/v1/completions", body)
    )
    took = time.monotonic() - started
    assert status == 200 and took > 0.5  # the work was there to be done
    if stream:
        assert [c["finish_reason"] for c in _streamed(answer).values()] == ["length"] * 4
    assert slowest < 0.6, (slowest, took)  # on the loop it waited for all of it (1.5 s)


def test_echo_past_the_timeout_gets_504_whole_or_streamed(exports, monkeypatch):
    # Decodes slowed to 4 ms: the prompts' text (0.5 s) is done within the timeout, its
    # tokens' alternatives (2.5 s more) are not, and were answered with 200 after them.
    live = LiveServer({"gpt": exports["gpt"]}, ServerSettings(request_timeout=1.0)).start()
    try:
        ids = live.entry("gpt").served.prompt_ids("the cat sat on the mat " * 3)[0][:31]
        Counted(monkeypatch, live.entry("gpt").served.target_tokenizer, "decode", 0.004)
        body = {"model": "gpt", "prompt": [ids, ids[::-1]], "max_tokens": 0, "echo": True}
        body["logprobs"] = 5
        status, _, answer = live.request("POST", "/v1/completions", body)
        assert status == 504 and answer["error"]["type"] == "timeout", answer  # was 200
        status, _, raw = live.request("POST", "/v1/completions", {**body, "stream": True})
        assert status == 200 and _events(raw)[-1]["error"]["code"] == 504
    finally:
        live.stop()


def test_echo_with_logprobs_past_its_bound_is_refused_before_any_work(server, local, monkeypatch):
    assert completions.MAX_ECHOED == 262_144 and "262,144 prompt tokens" in README.read_text()
    gpt, served = local["gpt"], server.entry("gpt").served
    prompts = ["the cat sat on the mat", "dogs and cats"]
    shown = sum(len(ids) - 1 for ids in gpt.prompt_ids(prompts))  # not the begin token
    monkeypatch.setattr(completions, "MAX_ECHOED", 3 * shown)
    scoring = Counted(monkeypatch, served.engine, "start_scoring")
    body = {"model": "gpt", "prompt": prompts, "max_tokens": 0, "echo": True, "logprobs": 1}
    status, _, answer = server.request("POST", "/v1/completions", {**body, "n": 4})
    assert status == 400 and answer["error"]["param"] == "echo", answer
    assert f"{4 * shown} prompt tokens" in answer["error"]["message"]
    assert scoring.calls == 0
    status, _, answer = server.request("POST", "/v1/completions", {**body, "n": 3})
    assert status == 200 and len(answer["choices"]) == 6
    del body["logprobs"]  # the text alone is not bounded so
    assert server.request("POST", "/v1/completions", {**body, "n": 4})[0] == 200


# --- prompts counted first ----------------------------------------------------------------
def test_too_many_prompts_of_ids_are_refused_by_their_count_before_their_shape(server, monkeypatch):
    """260,000 one-id prompts (1 MB): their shape was checked, then validated again as
    each member of the union, for 2 s of the event loop before the count refused them."""
    read = Counted(monkeypatch, openai_protocol, "_id_lists")
    for count in (MAX_REQUEST + 1, 260_000):
        body = {"model": "gpt", "prompt": [[5]] * count, "max_tokens": 1}
        compact = json.dumps(body, separators=(",", ":")).encode()  # under the body limit
        headers = {"Content-Type": "application/json"}
        status, _, answer = server.request("POST", "/v1/completions", compact, headers)
        assert status == 400 and answer["error"]["param"] == "prompt"
        assert f"{count} sequences; the most is {MAX_REQUEST}" in answer["error"]["message"]
    assert read.calls == 0
    body = {"model": "gpt", "prompt": [[5], [6]], "max_tokens": 1}
    assert server.request("POST", "/v1/completions", body)[0] == 200 and read.calls == 1


# --- JSON's own types ---------------------------------------------------------------------
WRONG_TYPES = [
    ("max_tokens", "3"), ("max_tokens", True), ("max_tokens", 3.0), ("n", True),
    ("n", "2"), ("echo", "yes"), ("echo", 1), ("stream", "on"), ("stream", 0),
    ("logprobs", "2"), ("logprobs", True), ("temperature", "0.5"), ("temperature", True),
    ("top_p", "1"), ("top_k", 1.0), ("top_k", False), ("seed", "12"), ("seed", 1e3),
    ("best_of", True), ("presence_penalty", False), ("stream_options", {"include_usage": 1}),
]  # fmt: skip


@pytest.mark.parametrize(("field", "value"), WRONG_TYPES)
def test_a_completion_field_of_the_wrong_type_is_refused_not_read_as_another(server, field, value):
    body = {"model": "gpt", "prompt": "the cat", "max_tokens": 2, field: value}
    if field == "stream_options":
        body["stream"] = True
    status, _, answer = server.request("POST", "/v1/completions", body)
    assert status == 422, answer
    assert answer["error"]["param"].split(".")[0] == field


@pytest.mark.parametrize(
    ("field", "value"), [("dimensions", "64"), ("dimensions", True), ("input", 5)]
)
def test_an_embedding_field_of_the_wrong_type_is_refused(server, field, value):
    body = {"model": "embedder", "input": "a sentence", field: value}
    status, _, answer = server.request("POST", "/v1/embeddings", body)
    assert status == 422 and answer["error"]["param"] == field, answer


def test_an_integer_is_a_number(server):
    # JSON has no separate integers: OpenAI's number fields take 1 for 1.0.
    body = {"model": "gpt", "prompt": "the cat", "max_tokens": 4, "seed": 3}
    floats = {"temperature": 1.0, "top_p": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0}
    ints = {"temperature": 1, "top_p": 1, "presence_penalty": 0, "frequency_penalty": 0}
    status, _, expected = server.request("POST", "/v1/completions", {**body, **floats})
    assert status == 200
    status, _, answer = server.request("POST", "/v1/completions", {**body, **ints})
    assert status == 200 and answer["choices"] == expected["choices"]
    assert server.request("POST", "/v1/completions", {**body, "temperature": 0})[0] == 200


# --- max_tokens: a value sent, and the default ---------------------------------------------
def _complete(server, **fields):
    return server.request("POST", "/v1/completions", {"temperature": 0, **fields})


def test_the_default_max_tokens_is_cut_to_the_servers_limit_and_a_value_sent_is_not(
    server, local, monkeypatch
):
    """With `--max-tokens 8` every request without `max_tokens` was refused for a
    `max_tokens=16` it never sent."""
    monkeypatch.setattr(server.app.state.settings, "max_tokens", 4)
    for model in ("gpt", "translator"):
        status, _, answer = _complete(server, model=model, prompt="dogs")
        assert status == 200, answer
        assert answer["choices"][0]["text"] == references.completions(local[model], ["dogs"], 4)[0]
        status, _, answer = _complete(server, model=model, prompt="dogs", max_tokens=5)
        assert status == 400 and answer["error"]["param"] == "max_tokens"
        assert "max_tokens=5 is more than this server's 4" in answer["error"]["message"]


def test_the_default_max_tokens_is_cut_to_the_room_each_prompt_leaves(server, local):
    gpt = local["gpt"]
    context = gpt.dims.max_length
    long = prompt_of(gpt, context - 3)
    status, _, answer = _complete(server, model="gpt", prompt=[long, "dogs"])
    assert status == 200, answer
    assert [c["text"] for c in answer["choices"]] == [
        references.completions(gpt, [long], 3)[0],
        references.completions(gpt, ["dogs"], 16)[0],
    ]  # fmt: skip
    status, _, answer = _complete(server, model="gpt", prompt=long, max_tokens=4)
    message = answer["error"]["message"]
    assert status == 400 and "leaves room for 3 new tokens" in message and "max_tokens=4" in message
    shorter = prompt_of(gpt, context - 1)
    status, _, answer = _complete(server, model="gpt", prompt=shorter, max_tokens=2)
    assert status == 400 and "leaves room for 1 new token in" in answer["error"]["message"]


# --- a prompt that fills the context ------------------------------------------------------
def test_a_prompt_that_fills_the_context_is_scored_with_echo_and_no_new_tokens(
    server, local, family_artifacts
):
    """lm-evaluation-harness's scoring of a text as long as the context: the prompt of ids
    was refused ("Prompt 1 is 48 tokens; the most is 47."), the text's too."""
    gpt = local["gpt"]
    context = gpt.dims.max_length
    text = prompt_of(gpt, context)
    ids = gpt.prompt_ids(text)[0]
    model = family_artifacts("decoder-only").model  # the Keras model, not the export
    logits = np.asarray(
        model({"token_ids": np.array([ids]), "padding_mask": np.ones((1, context))})
    )
    expected = log_softmax(logits[0])[np.arange(context - 1), ids[1:]]
    for prompt in (text, ids):
        status, _, answer = _complete(
            server, model="gpt", prompt=prompt, max_tokens=0, echo=True, logprobs=1
        )
        assert status == 200, answer
        choice = answer["choices"][0]
        assert choice["finish_reason"] == "length" and answer["usage"]["completion_tokens"] == 0
        scores = choice["logprobs"]["token_logprobs"]
        scores = scores[1:] if prompt is ids else scores  # the first id a client sent: None
        np.testing.assert_allclose(scores, expected, atol=1e-4)
        # with room for no new token, the default is refused, as a value sent is
        status, _, answer = _complete(server, model="gpt", prompt=prompt)
        assert status == 400 and "leaves no room for a new token" in answer["error"]["message"]
        status, _, answer = _complete(server, model="gpt", prompt=prompt, max_tokens=1)
        assert status == 400 and "leaves room for 0 new tokens" in answer["error"]["message"]


def test_a_prompt_of_ids_past_the_context_is_refused_in_the_words_of_a_text(server, local):
    gpt = local["gpt"]
    text = prompt_of(gpt, gpt.dims.max_length - 2) + " dogs dogs dogs"
    ids = gpt.tokenizer.encode(text)
    ids = [gpt.config.special_ids["bos"], *ids]
    answers = [
        _complete(server, model="gpt", prompt=prompt, max_tokens=1) for prompt in (text, ids)
    ]
    assert [status for status, _, _ in answers] == [400, 400]
    messages = [answer["error"]["message"] for _, _, answer in answers]
    assert messages[0] == messages[1], messages
    assert (
        f"is {len(ids)} tokens long" in messages[1] and answers[1][2]["error"]["param"] == "prompt"
    )


# --- blank texts --------------------------------------------------------------------------
@pytest.mark.parametrize("blank", ["", " \t", "\u200b", "\ufeff\x01"])
def test_a_blank_embedding_input_is_refused_by_its_index(server, blank):
    """ "" was refused without its index, and a zero-width space (no tokens) embedded."""
    status, _, answer = server.request(
        "POST", "/v1/embeddings", {"model": "embedder", "input": ["the", blank]}
    )
    error = answer["error"]
    assert status == 400 and "input[1] is empty or blank" in error["message"], answer
    assert error["param"] == "input"
