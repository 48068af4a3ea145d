"""`transformer-zoo serve` against a real uvicorn server on a loopback port, with the real
clients (`openai`, `tritonclient.http`), held against `ServedModel` (the same export,
no server)."""

from __future__ import annotations

import concurrent.futures
import functools
import http.client
import json
import logging
import socket
import time

import numpy as np
import openai
import pytest

from tests.serving.live_server import Hold, LiveServer, slow_down
from tests.serving.references import completions
from transformer_zoo.generation import Sampling
from transformer_zoo.serving.http import ServerSettings
from transformer_zoo.serving.http.metrics import RATE_WINDOW, Metrics

PROMPTS = ["the cat", "a quick brown fox", "dogs", "on the fifth of March"]
SOURCES = ["March 5, 2021", "the cat sat on the mat", "dogs and cats"]


def _metric(server, name, **labels) -> float:
    return server.app.state.metrics.registry.get_sample_value(name, labels) or 0.0


# --- OpenAI ---------------------------------------------------------------------------
def test_models_are_listed(client):
    assert {m.id for m in client.models.list()} == {"gpt", "translator", "classifier", "embedder"}


def test_greedy_completions_equal_served_model(client, local):
    assert completions(local["translator"], SOURCES, 12) == local["translator"].translate(
        SOURCES, 12
    )
    # finish_reason per row as `ServedModel` says ("stop" at EOS, "length" when cut). These
    # untrained exports reach no EOS in 12 tokens, so every row here is "length"; a row
    # ended by EOS is test_generation_batches' scheduler test.
    for model, prompts, expected, ends in (
        ("gpt", PROMPTS, completions(local["gpt"], PROMPTS, 12),
         local["gpt"].generate_completions(PROMPTS, 12)),
        ("translator", SOURCES, completions(local["translator"], SOURCES, 12),
         local["translator"].translate_completions(SOURCES, 12)),
    ):  # fmt: skip
        answer = client.completions.create(
            model=model, prompt=prompts, max_tokens=12, temperature=0
        )
        choices = sorted(answer.choices, key=lambda c: c.index)
        assert [c.text for c in choices] == expected
        assert [c.finish_reason for c in choices] == [c.finish_reason for c in ends]
        prompt_tokens = sum(len(ids) for ids in local[model].prompt_ids(prompts))
        assert answer.usage.prompt_tokens == prompt_tokens
        assert answer.usage.total_tokens == prompt_tokens + answer.usage.completion_tokens


def test_streamed_text_equals_the_whole_answer_and_ends_with_usage(client):
    whole = client.completions.create(model="gpt", prompt="the cat", max_tokens=10, temperature=0)
    chunks = list(
        client.completions.create(
            model="gpt", prompt="the cat", max_tokens=10, temperature=0, stream=True,
            stream_options={"include_usage": True},
        )
    )  # fmt: skip
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == whole.choices[0].text
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 10


@pytest.mark.parametrize("options", [{"include_usage": False}, None])
def test_a_stream_sends_usage_only_when_include_usage_is_true(client, options):
    """OpenAI's `stream_options.include_usage`: the usage chunk (no choices) is sent only
    when true; false or no `stream_options` sends none, and no chunk carries usage."""
    extra = {} if options is None else {"stream_options": options}
    chunks = list(
        client.completions.create(
            model="gpt", prompt="the cat", max_tokens=3, temperature=0, stream=True, **extra
        )
    )
    assert chunks and all(c.choices for c in chunks)
    assert all(c.usage is None for c in chunks)


def test_seeded_samples_repeat_whoever_shares_the_batch(client, local):
    def sample(seed):
        answer = client.completions.create(
            model="gpt", prompt="the cat", max_tokens=12, temperature=1.0, seed=seed, n=3
        )
        return [c.text for c in sorted(answer.choices, key=lambda c: c.index)]

    alone = sample(7)
    # Row j of a request draws with seed + j: the same text as the library's sampler.
    expected = [completions(local["gpt"], "the cat", 12, Sampling(seed=7 + j))[0] for j in range(3)]
    assert alone == expected
    assert len(set(alone)) > 1  # n gives different samples
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        crowd = [pool.submit(sample, 7) for _ in range(3)] + [
            pool.submit(sample, seed) for seed in (1, 2, 3)
        ]
        assert [f.result() for f in crowd[:3]] == [alone] * 3


def test_concurrent_greedy_rows_equal_single_rows(client, local, server):
    prompts = [p + suffix for p in PROMPTS for suffix in ("", " on", " the mat")]
    expected = completions(local["gpt"], prompts, 16)
    before = _metric(server, "transformer_zoo_batch_size_sum", model="gpt")

    def one(prompt):
        return (
            client.completions.create(model="gpt", prompt=prompt, max_tokens=16, temperature=0)
            .choices[0]
            .text
        )

    with concurrent.futures.ThreadPoolExecutor(len(prompts)) as pool:
        assert list(pool.map(one, prompts)) == expected
    rows_stepped = _metric(server, "transformer_zoo_batch_size_sum", model="gpt") - before
    assert rows_stepped >= 15 * len(prompts)


def test_every_engine_run_is_one_batch_size_observation_the_prompts_too(client, server):
    """The histogram is "rows per engine run": the prompts' run counts as one. Before, only
    the steps after it did, so a one-token request never showed (count +0)."""
    count, rows = (
        _metric(server, f"transformer_zoo_batch_size_{kind}", model="gpt")
        for kind in ("count", "sum")
    )
    answer = client.completions.create(model="gpt", prompt=["dogs", "cats"], max_tokens=1)
    assert answer.usage.completion_tokens == 2  # one run: both prompts, one token each
    assert _metric(server, "transformer_zoo_batch_size_count", model="gpt") - count == 1
    assert _metric(server, "transformer_zoo_batch_size_sum", model="gpt") - rows == 2


def test_stop_strings_cut_the_text_and_say_stop(client):
    whole = (
        client.completions.create(model="gpt", prompt="dogs", max_tokens=12, temperature=0)
        .choices[0]
        .text
    )
    stop = whole[3:5]
    assert stop and stop in whole
    answer = client.completions.create(
        model="gpt", prompt="dogs", max_tokens=12, temperature=0, stop=[stop, "never"]
    ).choices[0]
    assert answer.text == whole[: whole.index(stop)] and answer.finish_reason == "stop"
    streamed = client.completions.create(
        model="gpt", prompt="dogs", max_tokens=12, temperature=0, stop=stop, stream=True
    )
    assert "".join(c.choices[0].text for c in streamed) == answer.text
    # More than OpenAI's 4, as evaluation harnesses send them; past 16, refused.
    many = [f"never{i}" for i in range(15)] + [stop]
    assert (
        client.completions.create(
            model="gpt", prompt="dogs", max_tokens=12, temperature=0, stop=many
        )
        .choices[0]
        .text
        == answer.text
    )
    with pytest.raises(openai.UnprocessableEntityError, match="up to 16"):
        client.completions.create(model="gpt", prompt="dogs", stop=[*many, "more"])


def test_embeddings_as_float_and_base64_equal_embed(client, local):
    texts = ["the cat sat on the mat", "a quick fox", "dogs"]
    expected = local["embedder"].embed(texts)
    as_float = client.embeddings.create(model="embedder", input=texts, encoding_format="float")
    as_base64 = client.embeddings.create(model="embedder", input=texts)  # the client's default
    for answer in (as_float, as_base64):
        got = np.array([d.embedding for d in sorted(answer.data, key=lambda d: d.index)])
        np.testing.assert_allclose(got, expected, atol=1e-6)
    assert as_float.usage.prompt_tokens == sum(local["embedder"].token_counts(texts))


def test_dimensions_are_taken_when_they_are_the_models_own(client, local):
    width = local["embedder"].dims.hidden_dim
    answer = client.embeddings.create(
        model="embedder", input="a quick fox", dimensions=width, encoding_format="float"
    )
    np.testing.assert_allclose(
        answer.data[0].embedding, local["embedder"].embed(["a quick fox"])[0], atol=1e-6
    )
    with pytest.raises(openai.BadRequestError, match=f"gives {width} dimensions"):
        client.embeddings.create(model="embedder", input="a quick fox", dimensions=width // 2)


def test_concurrent_embeddings_are_batched_and_equal_embed(client, local, server):
    texts = [f"the cat {'sat ' * i}on the mat" for i in range(12)]
    expected = local["embedder"].embed(texts)
    runs = _metric(server, "transformer_zoo_batch_size_count", model="embedder")
    texts_run = _metric(server, "transformer_zoo_batch_size_sum", model="embedder")

    def one(text):
        return client.embeddings.create(model="embedder", input=text).data[0].embedding

    # Each run 50 ms longer, so that requests arrive while one runs, whatever the machine's
    # load (an idle model runs a lone request at once; only company shares a batch).
    undo = slow_down(server.entry("embedder"), 0.05)
    try:
        with concurrent.futures.ThreadPoolExecutor(len(texts)) as pool:
            got = np.array(list(pool.map(one, texts)))
    finally:
        undo()
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert _metric(server, "transformer_zoo_batch_size_sum", model="embedder") - texts_run == 12
    # Some requests shared a run.
    assert _metric(server, "transformer_zoo_batch_size_count", model="embedder") - runs < 12


# --- refusals ----------------------------------------------------------------------------
BAD_REQUESTS = [
    ({"model": "nope", "prompt": "a"}, 404, "No model 'nope'"),
    ({"model": "embedder", "prompt": "a"}, 400, "encoder-only"),
    ({"model": "translator", "prompt": ""}, 400, "empty"),
    ({"model": "gpt", "prompt": []}, 400, "empty"),
    ({"model": "gpt", "prompt": [[]]}, 400, "empty"),
    ({"model": "gpt", "prompt": "the cat " * 200}, 400, "context"),
    ({"model": "gpt", "prompt": "a", "max_tokens": 0}, 422, "max_tokens"),
    ({"model": "gpt", "prompt": "a", "max_tokens": 0, "echo": None}, 422, "max_tokens"),
    ({"model": "gpt", "prompt": "a", "seed": 2**63}, 422, "seed"),
    ({"model": "gpt", "prompt": "a", "seed": 1.5}, 422, "seed"),
    ({"model": "gpt", "prompt": "a", "max_tokens": 10**6}, 400, "max_tokens"),
    # A translation's room does not depend on its source: the message said "Prompt 1
    # (7 tokens) leaves room for ..." of the source.
    (
        {"model": "translator", "prompt": "a b c", "max_tokens": 10**6},
        400,
        "The target start (1 token) leaves room",
    ),
    ({"model": "gpt", "prompt": "a", "temperature": "hot"}, 422, "temperature"),
    ({"model": "gpt", "prompt": "a", "frobnicate": 1}, 422, "Unknown field `frobnicate`"),
    ({"model": "gpt", "prompt": "a", "presence_penalty": 0.5}, 422, "presence_penalty"),
    ({"model": "gpt", "prompt": [[5, 99999]]}, 400, "token id 99999"),
    ({"model": "gpt", "prompt": "a", "stop": [""]}, 422, "stop"),
    ({"model": "translator", "prompt": "a", "echo": True}, 400, "echo"),
    ({"prompt": "a"}, 422, "model"),
]


@pytest.mark.parametrize(("body", "status", "message"), BAD_REQUESTS)
def test_bad_completion_requests_get_the_documented_error(server, body, status, message):
    got, _, answer = server.request("POST", "/v1/completions", body)
    assert got == status, answer
    error = answer["error"]
    assert message in error["message"] and error["code"] == status
    assert set(error) == {"message", "type", "param", "code"}


def test_malformed_json_wrong_family_and_empty_input_then_still_serving(server, client):
    status, _, answer = server.request(
        "POST",
        "/v1/completions",
        b'{"model": "gpt", "prompt": ',
        {"Content-Type": "application/json"},
    )
    assert status == 400 and "not valid JSON" in answer["error"]["message"]
    for body, status in (
        ({"model": "gpt", "input": "a"}, 400),
        ({"model": "embedder", "input": ""}, 400),
        ({"model": "embedder", "input": "a", "encoding_format": "int8"}, 422),
    ):
        got, _, answer = server.request("POST", "/v1/embeddings", body)
        assert got == status and "error" in answer
    status, _, answer = server.request("GET", "/v1/nothing")
    assert status == 404 and answer["error"]["code"] == 404
    assert client.completions.create(model="gpt", prompt="a", max_tokens=2).usage.completion_tokens


def test_null_n_echo_and_stream_read_as_their_defaults(server, local):
    body = {"model": "gpt", "prompt": "dogs", "max_tokens": 4, "temperature": 0}
    nulls = {"n": None, "echo": None, "stream": None, "max_tokens": None}
    status, headers, answer = server.request("POST", "/v1/completions", {**body, **nulls})
    assert status == 200 and headers["content-type"] == "application/json", answer
    assert [c["text"] for c in answer["choices"]] == completions(local["gpt"], "dogs", 16)


# What the openai client sends, refused at the field it names (pydantic named a union's
# member, `prompt.str`; a check across fields named none).
REFUSED_FIELDS = [
    ("completions", {"prompt": ["the cat", [5, 6]]}, "prompt", "`prompt` must be a string"),
    ("completions", {"prompt": [True, 5]}, "prompt", "`prompt` must be a string"),
    ("completions", {"prompt": "a", "stop": [5]}, "stop", "`stop` must be a string"),
    ("completions", {"prompt": "a", "best_of": 3}, "best_of", "does not implement best_of"),
    ("completions", {"prompt": "a", "suffix": "!"}, "suffix", "does not implement suffix"),
    ("completions", {"prompt": "a", "max_tokens": 0}, "max_tokens", "needs `echo: true`"),
    ("completions", {"prompt": "a", "logprobs": 6}, "logprobs", "less than or equal to 5"),
    ("completions", {"prompt": "a", "top_p": 0}, "top_p", "greater than 0"),
    ("completions", {"prompt": "a", "temperature": -1}, "temperature", "greater than or"),
    ("embeddings", {"input": [1.5]}, "input", "`input` must be a string or a list"),
]


@pytest.mark.parametrize(("endpoint", "fields", "param", "message"), REFUSED_FIELDS)
def test_refusals_name_the_field_at_fault(client, endpoint, fields, param, message):
    defaults = {"model": "gpt", "max_tokens": 2} if endpoint == "completions" else {}
    request = {"model": "embedder", **defaults, **fields}
    with pytest.raises(openai.UnprocessableEntityError) as refused:
        getattr(client, endpoint).create(**request)
    error = refused.value.body
    assert error["param"] == param and message in error["message"], error


def test_neutral_values_of_unimplemented_fields_are_taken(client, local):
    # What clients send by default, or to mean "nothing": an empty suffix appends nothing.
    answer = client.completions.create(
        model="gpt", prompt="dogs", max_tokens=4, temperature=0, suffix="", best_of=1,
        presence_penalty=0, frequency_penalty=0, logit_bias={}, user="someone",
    )  # fmt: skip
    assert [c.text for c in answer.choices] == completions(local["gpt"], "dogs", 4)


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/completions", b'{"model": "gpt", "prompt": "\\ud800"}'),
        ("/v1/completions", b'{"model": "gpt", "prompt": "a", "stop": "\\udc00"}'),
        ("/v1/embeddings", b'{"model": "embedder", "input": "a \\udc00"}'),
        ("/v1/completions", b'{"model": "gpt", "prompt": "a", "temperature": NaN}'),
        ("/v1/completions", b'{"model": "gpt", "prompt": "a", "temperature": Infinity}'),
    ],
)
def test_json_that_python_reads_but_no_text_holds_is_malformed(server, client, path, body):
    """A lone surrogate escape (the tokenizers failed on it: 500) and NaN or Infinity are
    not JSON (RFC 8259): 400, and the server serves on."""
    status, _, answer = server.request("POST", path, body, {"Content-Type": "application/json"})
    assert status == 400 and "not valid JSON" in answer["error"]["message"], answer
    assert client.completions.create(model="gpt", prompt="a", max_tokens=1).choices


@pytest.mark.parametrize("kind", ["text/plain", "application/x-www-form-urlencoded"])
def test_a_body_that_says_it_is_not_json_is_refused(server, client, kind):
    """A browser sends these cross-origin without a CORS preflight: reading them as JSON
    let any web page start generations. No Content-Type, or a JSON one, is read."""
    body = json.dumps({"model": "gpt", "prompt": "a", "max_tokens": 1}).encode()
    status, _, answer = server.request("POST", "/v1/completions", body, {"Content-Type": kind})
    assert status == 415 and answer["error"]["code"] == 415 and kind in answer["error"]["message"]
    for headers in ({}, {"Content-Type": "application/json; charset=utf-8"}):
        status, _, answer = server.request("POST", "/v1/completions", body, headers)
        assert status == 200, answer
    assert client.completions.create(model="gpt", prompt="a", max_tokens=1).choices


def test_a_model_is_retrieved_by_name(server, client):
    assert client.models.retrieve("gpt").id == "gpt"
    with pytest.raises(openai.NotFoundError) as missing:
        client.models.retrieve("nope")
    assert missing.value.body["param"] == "model"
    status, _, answer = server.request("GET", "/v1/models/")
    assert status == 200 and {m["id"] for m in answer["data"]} >= {"gpt", "embedder"}


def test_a_wrong_method_is_405_with_allow_in_the_protocols_shape(server):
    status, headers, answer = server.request("GET", "/v1/completions")
    assert status == 405 and headers["allow"] == "POST" and answer["error"]["code"] == 405
    status, headers, answer = server.request("POST", "/v2/health/live")
    assert status == 405 and headers["allow"] == "GET, HEAD" and "error" in answer


def test_token_ids_for_embeddings_are_refused_by_name(client):
    for ids in ([5, 6, 7], [[5, 6, 7]]):
        with pytest.raises(openai.UnprocessableEntityError) as refused:
            client.embeddings.create(model="embedder", input=ids)
        message = str(refused.value)
        assert "token ids are not supported for embeddings" in message and "string" in message


def test_any_int64_seed_samples_as_its_generator_does(client, local):
    # Negative seeds name generators too: seed mod 2**64, row j of a request seed + j.
    for seed, generators in ((-1, [2**64 - 1, 0]), (-(2**63), [2**63, 2**63 + 1])):
        answer = client.completions.create(
            model="gpt", prompt="the cat", max_tokens=8, temperature=1.0, seed=seed, n=2
        )
        expected = [
            completions(local["gpt"], "the cat", 8, Sampling(seed=generator))[0]
            for generator in generators
        ]
        assert [c.text for c in sorted(answer.choices, key=lambda c: c.index)] == expected


def test_an_unexpected_failure_answers_500_and_the_connection_serves_on(
    server, monkeypatch, caplog
):
    """The 500 is the protocol's error, logged, and the kept-alive connection that carried
    it takes the next request (Starlette's catch-all handler re-raised, so uvicorn closed it)."""
    worker = server.entry("embedder").worker

    def broken(*args):
        raise RuntimeError("the batcher broke")

    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    headers = {"Content-Type": "application/json"}
    v1 = json.dumps({"model": "embedder", "input": "the cat"})
    v2 = json.dumps(
        {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["a"]}]}
    )
    try:
        monkeypatch.setattr(worker, "submit", broken)
        for path, body, error in (
            ("/v1/embeddings", v1, lambda answer: answer["error"]["message"]),
            ("/v2/models/embedder/infer", v2, lambda answer: answer["error"]),
        ):
            connection.request("POST", path, body, headers)
            response = connection.getresponse()
            answer = json.loads(response.read())
            assert response.status == 500 and "the batcher broke" in error(answer)
            assert response.getheader("connection") != "close"
        assert any(
            record.exc_info and "the batcher broke" in str(record.exc_info[1])
            for record in caplog.records
        )
        socket_before = connection.sock
        monkeypatch.undo()
        connection.request("POST", "/v1/embeddings", v1, headers)
        response = connection.getresponse()
        assert response.status == 200 and json.loads(response.read())["data"]
        assert connection.sock is socket_before  # the same connection, not a new one
    finally:
        connection.close()


def test_a_failure_inside_a_stream_ends_it_with_an_error_event_and_done(server, monkeypatch):
    from transformer_zoo.serving.http.completions import Choice

    def broken(self, *args, **kwargs):
        raise RuntimeError("logprobs broke")

    monkeypatch.setattr(Choice, "logprobs", broken)
    status, _, raw = server.request(
        "POST", "/v1/completions",
        {"model": "gpt", "prompt": "the cat", "max_tokens": 4, "logprobs": 1, "stream": True},
    )  # fmt: skip
    events = [line.removeprefix(b"data: ") for line in raw.split(b"\n\n") if line]
    assert status == 200 and events[-1] == b"[DONE]"
    error = json.loads(events[-2])["error"]
    assert error["code"] == 500 and "logprobs broke" in error["message"]


def test_an_embedding_request_larger_than_the_queue_is_served_whole(exports, local):
    live = LiveServer({"embedder": exports["embedder"]}, ServerSettings(max_queue=4)).start()
    try:
        client = openai.OpenAI(base_url=live.url + "/v1", api_key="unused", max_retries=0)
        texts = [f"the cat {'sat ' * (i % 5)}on the mat {i}" for i in range(300)]
        answer = client.embeddings.create(model="embedder", input=texts, encoding_format="float")
        got = np.array([d.embedding for d in sorted(answer.data, key=lambda d: d.index)])
        np.testing.assert_allclose(got, local["embedder"].embed(texts), atol=1e-6)
        with pytest.raises(openai.BadRequestError, match="2049 texts; the most is 2048"):
            client.embeddings.create(model="embedder", input=["a"] * 2049)
    finally:
        live.stop()


def test_an_oversized_body_is_refused_before_it_is_read(exports):
    live = LiveServer({"gpt": exports["gpt"]}, ServerSettings(max_body_bytes=1000)).start()
    try:
        status, _, answer = live.request(
            "POST", "/v1/completions", {"model": "gpt", "prompt": "x" * 2000}
        )
        assert status == 413 and "1000" in answer["error"]["message"]
    finally:
        live.stop()


# --- production ----------------------------------------------------------------------------
def test_a_full_queue_answers_429_and_the_rest_complete(exports):
    live = LiveServer({"gpt": exports["gpt"]}, ServerSettings(max_batch_size=1, max_queue=1))
    live.start()
    undo = slow_down(live.entry("gpt"), 0.01)  # a row runs for 10 x 10 ms or more
    try:
        body = {"model": "gpt", "prompt": "the cat", "max_tokens": 10, "temperature": 0}
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            answers = list(
                pool.map(lambda _: live.request("POST", "/v1/completions", body), range(8))
            )
        statuses = sorted(status for status, _, _ in answers)
        assert 429 in statuses and set(statuses) == {200, 429}
        # A request larger than the queue is taken once nothing waits; past 2,048 rows, never.
        larger = live.request("POST", "/v1/completions", {**body, "n": 2})
        assert larger[0] == 200 and len(larger[2]["choices"]) == 2
        too_many = live.request("POST", "/v1/completions", {**body, "prompt": ["a"] * 129, "n": 16})
        assert (
            too_many[0] == 400
            and "2064 sequences; the most is 2048" in too_many[2]["error"]["message"]
        )
        for status, headers, answer in answers:
            if status == 429:
                assert (
                    headers["retry-after"] == "1" and answer["error"]["type"] == "rate_limit_error"
                )
            else:
                assert answer["usage"]["completion_tokens"] == 10
    finally:
        undo()
        live.stop()


def test_a_disconnected_stream_frees_its_row(server):
    scheduler = server.entry("gpt").worker
    undo = slow_down(server.entry("gpt"), 0.02)
    try:
        connection = socket.create_connection(("127.0.0.1", server.port))
        body = json.dumps(
            {
                "model": "gpt",
                "prompt": "the cat",
                "max_tokens": 40,
                "stream": True,
                "temperature": 0,
            }
        )
        connection.sendall(
            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n{body}".encode()
        )
        received = b""
        while b"data: " not in received:  # the headers, then the first chunk
            received += connection.recv(4096)
        _until(lambda: scheduler.running == 1, 2)  # it joins as its first token goes out
        assert scheduler.running == 1
        connection.close()
        _until(lambda: not scheduler.running, 5)
        assert scheduler.running == 0  # left long before its 40 tokens (0.8 s)
    finally:
        undo()


def _until(condition, seconds: float, step: float = 0.01) -> None:
    """Polls `condition` until it holds or `seconds` have passed (the caller asserts)."""
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(step)


def _v2_body(texts, max_tokens=None) -> dict:
    tensor = {"name": "text", "datatype": "BYTES", "shape": [len(texts)], "data": texts}
    parameters = {} if max_tokens is None else {"parameters": {"max_tokens": max_tokens}}
    return {"inputs": [tensor], **parameters}


@pytest.mark.parametrize(
    ("path", "route"),
    [("/v1/completions", "/v1/completions"), ("/v2/models/gpt/infer", "/v2/models/{name}/infer")],
)
def test_a_client_that_gives_up_on_a_whole_answer_frees_its_row(server, path, route):
    """A non-streamed request's row leaves the batch once its client has gone, though its
    tokens keep arriving (a running row emits one every step, never leaving the waiter
    idle), and the request counts as 499, not 200."""
    scheduler = server.entry("gpt").worker
    max_tokens = 40
    if path.startswith("/v1"):
        body = {"model": "gpt", "prompt": "the cat", "max_tokens": max_tokens, "temperature": 0}
    else:
        body = _v2_body(["the cat"], max_tokens)
    tokens = _metric(server, "transformer_zoo_generated_tokens_total", model="gpt")
    gone = _metric(server, "transformer_zoo_requests_total", endpoint=route, status="499")
    undo = slow_down(server.entry("gpt"), 0.03)  # 40 tokens take 1.2 s or more
    try:
        connection = socket.create_connection(("127.0.0.1", server.port))
        raw = json.dumps(body)
        connection.sendall(
            f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n".encode()
            + f"Content-Length: {len(raw)}\r\n\r\n{raw}".encode()
        )
        _until(lambda: scheduler.running == 1, 5)
        assert scheduler.running == 1
        connection.close()
        _until(lambda: not scheduler.running, 10)
        generated = _metric(server, "transformer_zoo_generated_tokens_total", model="gpt") - tokens
        assert generated < max_tokens / 2  # it left long before its 40 tokens
        _until(
            lambda: (
                _metric(server, "transformer_zoo_requests_total", endpoint=route, status="499")
                != gone
            ),
            5,
        )
        assert _metric(server, "transformer_zoo_requests_total", endpoint=route, status="499") == (
            gone + 1
        )
    finally:
        undo()


@pytest.mark.parametrize("path", ["/v1/completions", "/v2/models/gpt/infer"])
def test_too_many_prompts_are_refused_before_any_is_tokenized(server, path):
    """200,000 one-character prompts (1 MB, under the body limit) are refused by their count
    at once, not after tokenizing them all on the event loop, which meanwhile answers."""
    prompts = ["a"] * 200_000
    if path.startswith("/v1"):
        body = {"model": "gpt", "prompt": prompts, "max_tokens": 1}
    else:
        body = _v2_body(prompts, 1)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        started = time.monotonic()
        answer = pool.submit(server.request, "POST", path, body)
        slowest_health = 0.0
        while not answer.done():
            before = time.monotonic()
            assert server.request("GET", "/health")[0] == 200
            slowest_health = max(slowest_health, time.monotonic() - before)
        status, _, data = answer.result()
        took = time.monotonic() - started
    message = data["error"]["message"] if path.startswith("/v1") else data["error"]
    assert status == 400 and "200000 sequences; the most is 2048" in message
    assert took < 5 and slowest_health < 2.5  # tokenizing them all held the loop 6-20 s


def test_a_request_past_the_timeout_gets_504(exports):
    live = LiveServer({"gpt": exports["gpt"]}, ServerSettings(request_timeout=0.1)).start()
    undo = slow_down(live.entry("gpt"), 0.02)
    try:
        status, _, answer = live.request(
            "POST", "/v1/completions", {"model": "gpt", "prompt": "a", "max_tokens": 30}
        )
        assert status == 504 and answer["error"]["type"] == "timeout"
        assert live.entry("gpt").worker.running == 0
    finally:
        undo()
        live.stop()


def _head(path: str, length: int) -> bytes:
    """A POST's request line and headers, for a JSON body of `length` bytes."""
    return (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


@pytest.mark.parametrize("path", ["/v1/completions", "/v2/models/gpt/infer"])
def test_a_stalled_body_gets_408_within_the_timeout_and_its_connection_is_closed(exports, path):
    """A client that sends part of a body and stalls held its connection for as long as
    it stayed (300 such clients, 300 descriptors), whatever `--timeout` said."""
    live = LiveServer({"gpt": exports["gpt"]}, ServerSettings(request_timeout=1.0)).start()
    connection = socket.create_connection(("127.0.0.1", live.port), timeout=10)
    try:
        body = json.dumps(_v2_body(["the cat"], 4) if "v2" in path else {"model": "gpt"})
        started = time.monotonic()
        connection.sendall(_head(path, len(body)) + body[:10].encode())
        received = b""
        while chunk := connection.recv(4096):  # until the server closes the connection
            received += chunk
        took = time.monotonic() - started
        head, _, answer = received.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408") and 0.9 < took < 5
        error = json.loads(answer)["error"]
        assert "timeout" in (error if "v2" in path else error["message"])
        if path.startswith("/v1"):
            assert (error["code"], error["type"]) == (408, "timeout")
        _until(lambda: not live.server.server_state.connections, 2)
        assert not live.server.server_state.connections  # its descriptor is released
    finally:
        connection.close()
        live.stop()


def test_a_client_that_leaves_while_sending_its_body_counts_499_without_a_traceback(server, caplog):
    """Counted as 500 and logged with a 46-line traceback ending in `ClientDisconnect`."""
    route = "/v1/completions"
    counts = {
        status: _metric(server, "transformer_zoo_requests_total", endpoint=route, status=status)
        for status in ("499", "500")
    }
    body = json.dumps({"model": "gpt", "prompt": "the cat", "max_tokens": 4}).encode()
    connection = socket.create_connection(("127.0.0.1", server.port))
    connection.sendall(_head(route, len(body)) + body[:10])
    time.sleep(0.2)  # the route is reading the body
    connection.close()

    def count(status):
        return _metric(server, "transformer_zoo_requests_total", endpoint=route, status=status)

    _until(lambda: count("499") != counts["499"], 5)
    assert count("499") == counts["499"] + 1 and count("500") == counts["500"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


def test_a_stream_counts_as_it_ended_not_as_it_began(exports):
    """A stream opens with 200; one its client left is 499 and one that ended with a
    timeout's error event is 504 (both were counted as 200), a complete one 200."""
    live = LiveServer({"gpt": exports["gpt"]}, ServerSettings(request_timeout=0.5)).start()
    route = "/v1/completions"

    def count(status):
        return _metric(live, "transformer_zoo_requests_total", endpoint=route, status=status)

    body = {"model": "gpt", "prompt": "the cat", "stream": True, "temperature": 0}
    undo = slow_down(live.entry("gpt"), 0.03)  # 40 tokens take 1.2 s or more
    try:
        status, _, raw = live.request("POST", route, {**body, "max_tokens": 2})
        _until(lambda: count("200") == 1, 5)  # counted once the response has ended
        assert status == 200 and raw.endswith(b"data: [DONE]\n\n") and count("200") == 1
        status, _, raw = live.request("POST", route, {**body, "max_tokens": 40})
        events = [line.removeprefix(b"data: ") for line in raw.split(b"\n\n") if line]
        assert status == 200 and json.loads(events[-2])["error"]["code"] == 504
        _until(lambda: count("504") == 1, 5)
        assert count("504") == 1 and count("200") == 1
        connection = socket.create_connection(("127.0.0.1", live.port))
        raw = json.dumps({**body, "max_tokens": 40})
        connection.sendall(_head(route, len(raw)) + raw.encode())
        received = b""
        while b"data: " not in received:  # the headers, then the first chunk
            received += connection.recv(4096)
        connection.close()
        _until(lambda: count("499") == 1, 5)
        assert count("499") == 1 and count("200") == 1 and count("504") == 1
    finally:
        undo()
        live.stop()


def test_shutdown_finishes_the_requests_in_flight(exports):
    live = LiveServer({"gpt": exports["gpt"]}).start()
    hold = Hold(live.entry("gpt"))  # the requests run once the shutdown has begun
    body = {"model": "gpt", "prompt": "the cat", "max_tokens": 30, "temperature": 0}

    def in_flight() -> float:
        return _metric(live, "transformer_zoo_requests_in_flight", endpoint="/v1/completions")

    try:
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            flying = [pool.submit(live.request, "POST", "/v1/completions", body) for _ in range(3)]
            _until(lambda: in_flight() == 3 and hold.waiting == 1, 60)
            assert in_flight() == 3 and not any(f.done() for f in flying)
            live.server.should_exit = True  # what SIGTERM does (`LiveServer.stop`)
            _until(lambda: live.socket.fileno() == -1, 60)  # no longer accepting
            hold.release()
            live.stop()
            answers = [f.result() for f in flying]
    finally:
        hold.undo()
    assert [status for status, _, _ in answers] == [200] * 3
    assert all(a["usage"]["completion_tokens"] == 30 for _, _, a in answers)
    assert not live.thread.is_alive()
    with pytest.raises(OSError):
        live.request("GET", "/health")


def test_health_is_503_while_loading(exports, monkeypatch):
    from transformer_zoo.serving.http.models import ModelRegistry

    load = ModelRegistry._load

    def slow_load(self, name, directory):
        time.sleep(0.5)
        return load(self, name, directory)

    monkeypatch.setattr(ModelRegistry, "_load", slow_load)
    live = LiveServer({"gpt": exports["gpt"]}).start(wait_ready=False)
    try:
        assert live.request("GET", "/health")[:3:2] == (503, {"status": "loading"})
        status, _, answer = live.request("POST", "/v1/completions", {"model": "gpt", "prompt": "a"})
        assert status == 503 and "loading" in answer["error"]["message"]
        assert live.request("GET", "/v2/health/ready")[0] == 503
        _until(lambda: live.request("GET", "/health")[0] == 200, 30, step=0.05)
        assert live.request("GET", "/v2/health/ready")[0] == 200
    finally:
        live.stop()


def test_api_key_and_cors(exports):
    settings = ServerSettings(api_key="sesame", cors_origins=["https://app.example"])
    live = LiveServer({"gpt": exports["gpt"]}, settings).start()
    try:
        status, _, answer = live.request("GET", "/v1/models")
        assert status == 401 and answer["error"]["type"] == "authentication_error"
        for _ in range(2):
            assert live.request("POST", "/v2/models/gpt/infer", {})[0] == 401
        wrong = openai.OpenAI(base_url=live.url + "/v1", api_key="guess", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            wrong.models.list()
        # Counted by route, as every other request (they were all endpoint="auth"), once
        # each, and in flight no longer (both once the response has gone: polled).
        registry = live.app.state.metrics.registry

        def samples(name: str, **labels) -> dict[str, float]:
            return {
                sample.labels["endpoint"]: sample.value
                for metric in registry.collect()
                for sample in metric.samples
                if sample.name == name and labels.items() <= sample.labels.items()
            }

        expected = {"/v1/models": 2.0, "/v2/models/{name}/infer": 2.0}
        refused = functools.partial(samples, "transformer_zoo_requests_total", status="401")
        in_flight = functools.partial(samples, "transformer_zoo_requests_in_flight")
        _until(lambda: refused() == expected and not any(in_flight().values()), 30)
        assert refused() == expected
        assert set(expected) <= set(in_flight()) and set(in_flight().values()) == {0.0}
        right = openai.OpenAI(base_url=live.url + "/v1", api_key="sesame", max_retries=0)
        assert [m.id for m in right.models.list()] == ["gpt"]
        assert live.request("GET", "/health")[0] == 200  # probes need no key
        _, headers, _ = live.request("GET", "/health", headers={"Origin": "https://app.example"})
        assert headers["access-control-allow-origin"] == "https://app.example"
    finally:
        live.stop()
    plain = LiveServer({"gpt": exports["gpt"]}).start()
    try:
        _, headers, _ = plain.request("GET", "/health", headers={"Origin": "https://app.example"})
        assert "access-control-allow-origin" not in headers
    finally:
        plain.stop()


@pytest.mark.parametrize("key", ["", "  "])
def test_an_empty_api_key_is_refused_not_taken_for_none(key):
    with pytest.raises(ValueError, match="api_key must be a key or None"):
        ServerSettings(api_key=key)


def test_metrics_report_requests_queue_batches_and_first_tokens(server, client):
    client.completions.create(model="gpt", prompt="a", max_tokens=3, temperature=0)
    status, _, text = server.request("GET", "/metrics")
    text = text.decode()
    assert status == 200
    for line in (
        'transformer_zoo_requests_total{endpoint="/v1/completions",status="200"}',
        'transformer_zoo_queue_depth{model="gpt"}',
        'transformer_zoo_batch_size_count{model="gpt"}',
        'transformer_zoo_time_to_first_token_seconds_count{model="gpt"}',
        'transformer_zoo_generated_tokens_total{model="gpt"}',
        'transformer_zoo_tokens_per_second{model="gpt"}',
    ):
        assert line in text


def test_tokens_per_second_is_the_rate_of_the_last_seconds_when_scraped():
    """Not the rate of the last full second of decoding, set as tokens arrive: that one
    stayed up while idle, missed bursts under a second and averaged the next burst over
    the idle time before it."""
    now = [1000.0]
    metrics = Metrics(clock=lambda: now[0])
    observe = metrics.observer("gpt")

    def rate():
        labels = {"model": "gpt"}
        return metrics.registry.get_sample_value("transformer_zoo_tokens_per_second", labels)

    assert rate() == 0
    for _ in range(10):  # a burst of 0.5 s
        observe("tokens", 50)
        now[0] += 0.05
    assert rate() == pytest.approx(500 / RATE_WINDOW)
    now[0] += RATE_WINDOW
    assert rate() == 0  # idle
    now[0] += 3600
    observe("tokens", 100)
    assert rate() == pytest.approx(100 / RATE_WINDOW)  # not averaged over the idle hour


def test_generated_tokens_are_the_completions_tokens(server, client):
    """Neither an EOS nor an echo-only row's scoring (`max_tokens` 0) is a token."""
    before = _metric(server, "transformer_zoo_generated_tokens_total", model="gpt")
    answers = [
        client.completions.create(
            model="gpt", prompt="the cat sat", max_tokens=0, echo=True, logprobs=1
        ),
        client.completions.create(model="gpt", prompt=PROMPTS, max_tokens=8, n=2, seed=3),
    ]
    generated = _metric(server, "transformer_zoo_generated_tokens_total", model="gpt") - before
    assert generated == sum(answer.usage.completion_tokens for answer in answers)


def test_generated_tokens_equal_the_usage_with_stop_strings(server, client):
    """A row that meets a stop string ends on the event loop, while the scheduler decodes
    on until the cancel reaches it: counting its draws gave 2,933 tokens for a usage of
    2,249 (200 requests, `stop` ["a", "e"], n 2)."""
    before = _metric(server, "transformer_zoo_generated_tokens_total", model="gpt")
    answers = [
        client.completions.create(
            model="gpt", prompt=prompt, max_tokens=30, n=2, seed=seed, stop=["a", "e"]
        )
        for seed, prompt in enumerate(PROMPTS * 2)
    ]
    assert any(c.finish_reason == "stop" for answer in answers for c in answer.choices)
    generated = _metric(server, "transformer_zoo_generated_tokens_total", model="gpt") - before
    assert generated == sum(answer.usage.completion_tokens for answer in answers)


def test_v2_generation_records_its_time_to_first_token(server):
    name = "transformer_zoo_time_to_first_token_seconds_count"
    before = _metric(server, name, model="gpt")
    status, _, _ = server.request("POST", "/v2/models/gpt/infer", _v2_body(["the cat"], 3))
    assert status == 200 and _metric(server, name, model="gpt") == before + 1
