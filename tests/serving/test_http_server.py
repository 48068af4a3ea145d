"""`transformer-zoo serve` against a real uvicorn server on a loopback port, with the real
clients (`openai`, `tritonclient.http`), held against `ServedModel` (the same export,
no server)."""

from __future__ import annotations

import concurrent.futures
import json
import socket
import time

import numpy as np
import openai
import pytest
import tritonclient.http as triton

from tests.serving.live_server import LiveServer, slow_down
from transformer_zoo.generation.search import Sampling
from transformer_zoo.serving import load_onnx
from transformer_zoo.serving.http import ServerSettings

PROMPTS = ["the cat", "a quick brown fox", "dogs", "on the fifth of March"]
SOURCES = ["March 5, 2021", "the cat sat on the mat", "dogs and cats"]


@pytest.fixture(scope="module")
def exports(family_artifacts, wordpiece_artifacts):
    return {
        "gpt": str(family_artifacts("decoder-only").export_dir),
        "translator": str(family_artifacts("encoder-decoder").export_dir),
        "classifier": str(family_artifacts("encoder-only").export_dir),
        "embedder": str(wordpiece_artifacts.export_dir),
    }


@pytest.fixture(scope="module")
def server(exports):
    live = LiveServer(exports, ServerSettings(max_batch_size=8)).start()
    yield live
    live.stop()


@pytest.fixture(scope="module")
def local(exports):
    """The same exports served without HTTP: what the server must agree with."""
    return {name: load_onnx(directory) for name, directory in exports.items()}


@pytest.fixture
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)


def _metric(server, name, **labels) -> float:
    return server.app.state.metrics.registry.get_sample_value(name, labels) or 0.0


# --- OpenAI ---------------------------------------------------------------------------
def test_models_are_listed(client):
    assert {m.id for m in client.models.list()} == {"gpt", "translator", "classifier", "embedder"}


def test_greedy_completions_equal_served_model(client, local):
    for model, prompts, expected in (
        ("gpt", PROMPTS, local["gpt"].generate(PROMPTS, 12)),
        ("translator", SOURCES, local["translator"].translate(SOURCES, 12)),
    ):
        answer = client.completions.create(
            model=model, prompt=prompts, max_tokens=12, temperature=0
        )
        assert [c.text for c in sorted(answer.choices, key=lambda c: c.index)] == expected
        prompt_tokens = sum(len(ids) for ids in local[model].prompt_ids(prompts))
        assert answer.usage.prompt_tokens == prompt_tokens
        assert answer.usage.total_tokens == prompt_tokens + answer.usage.completion_tokens
        assert {c.finish_reason for c in answer.choices} <= {"stop", "length"}


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


def test_seeded_samples_repeat_whoever_shares_the_batch(client, local):
    def sample(seed):
        answer = client.completions.create(
            model="gpt", prompt="the cat", max_tokens=12, temperature=1.0, seed=seed, n=3
        )
        return [c.text for c in sorted(answer.choices, key=lambda c: c.index)]

    alone = sample(7)
    # Row j of a request draws with seed + j: the same text as the library's sampler.
    expected = [local["gpt"].generate("the cat", 12, Sampling(seed=7 + j))[0] for j in range(3)]
    assert alone == expected
    assert len(set(alone)) > 1  # n gives different samples
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        crowd = [pool.submit(sample, 7) for _ in range(3)] + [
            pool.submit(sample, seed) for seed in (1, 2, 3)
        ]
        assert [f.result() for f in crowd[:3]] == [alone] * 3


def test_concurrent_greedy_rows_equal_single_rows(client, local, server):
    prompts = [p + suffix for p in PROMPTS for suffix in ("", " on", " the mat")]
    expected = local["gpt"].generate(prompts, 16)
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


def test_logprobs_are_the_models(client, local):
    answer = client.completions.create(
        model="gpt", prompt="the cat", max_tokens=6, temperature=0, logprobs=2
    ).choices[0]
    result = local["gpt"].generate_ids(local["gpt"].prompt_ids("the cat"), 6)
    assert np.isclose(sum(answer.logprobs.token_logprobs), result.scores[0], atol=1e-4)
    logprobs = answer.logprobs
    for chosen, top in zip(logprobs.token_logprobs, logprobs.top_logprobs, strict=True):
        assert len(top) == 2 and np.isclose(max(top.values()), chosen)


def test_echo_prepends_the_prompt(client):
    plain = client.completions.create(model="gpt", prompt="dogs", max_tokens=4, temperature=0)
    echoed = client.completions.create(
        model="gpt", prompt="dogs", max_tokens=4, temperature=0, echo=True
    )
    assert echoed.choices[0].text == "dogs" + plain.choices[0].text


def test_echo_with_logprobs_scores_the_prompt_as_decoding_scored_it(client, local):
    # The prompt "the cat" + the first 4 greedy tokens, echoed with logprobs: the scores of
    # those 4 tokens must equal what decoding gave them (the cached step graph, one token
    # at a time), and every prompt position the step graph's log-softmax over the whole
    # prompt at once. Then one more greedy token: the decoding's fifth.
    gpt = local["gpt"]
    decoded = client.completions.create(
        model="gpt", prompt="the cat", max_tokens=5, temperature=0, logprobs=2
    ).choices[0]
    prompt = gpt.prompt_ids("the cat")[0]
    generated = gpt.generate_ids([prompt], 5).tokens[0].tolist()
    ids = prompt + generated[:4]
    answer = client.completions.create(
        model="gpt", prompt=ids, max_tokens=1, temperature=0, echo=True, logprobs=2
    ).choices[0]
    scored = answer.logprobs
    shown = len(ids) - 1  # the begin token is not echoed
    assert scored.tokens[:shown] == [_piece(gpt, i) for i in ids[1:]]
    assert (
        answer.text
        == gpt.output_text(ids[1:]) + decoded.text[len(gpt.output_text(generated[:4])) :]
    )
    np.testing.assert_allclose(
        scored.token_logprobs[shown - 4 :], decoded.logprobs.token_logprobs, atol=1e-4
    )
    for got, expected in zip(
        scored.top_logprobs[shown - 4 :], decoded.logprobs.top_logprobs, strict=True
    ):
        assert got.keys() == expected.keys()
        np.testing.assert_allclose(list(got.values()), list(expected.values()), atol=1e-4)
    logits = gpt.engine.forward(
        {"token_ids": np.array([ids]), "padding_mask": np.ones((1, len(ids)), bool)}
    )[0]
    x = logits.astype(np.float64)
    log_softmax = x - x.max(-1, keepdims=True)
    log_softmax -= np.log(np.exp(log_softmax).sum(-1, keepdims=True))
    np.testing.assert_allclose(
        scored.token_logprobs[:shown], log_softmax[np.arange(shown), ids[1:]], atol=1e-4
    )
    assert scored.text_offset[:shown] == sorted(scored.text_offset[:shown])
    # Streamed: the same tokens and scores, the prompt's in the first chunk.
    chunks = [c.choices[0] for c in client.completions.create(
        model="gpt", prompt=ids, max_tokens=1, temperature=0, echo=True, logprobs=2, stream=True
    ) if c.choices]  # fmt: skip
    assert len(chunks[0].logprobs.tokens) == shown
    streamed = [lp for c in chunks if c.logprobs for lp in c.logprobs.token_logprobs]
    np.testing.assert_allclose(streamed, scored.token_logprobs, atol=1e-6)
    assert "".join(c.text for c in chunks) == answer.text


def test_echo_with_logprobs_of_ids_without_the_begin_token(client, local):
    # A prompt of ids that does not start with the begin token: its first token has no
    # context, so no log-probability (OpenAI's and vLLM's `None`).
    ids = local["gpt"].prompt_ids("the cat sat")[0][1:]
    answer = client.completions.create(
        model="gpt", prompt=ids, max_tokens=2, temperature=0, echo=True, logprobs=1
    ).choices[0]
    assert answer.logprobs.token_logprobs[0] is None and answer.logprobs.top_logprobs[0] is None
    assert all(isinstance(lp, float) for lp in answer.logprobs.token_logprobs[1:])
    assert len(answer.logprobs.tokens) == len(ids) + 2 and answer.logprobs.text_offset[0] == 0
    # Several prompts, n of each: every choice carries its own prompt's scores first.
    prompts = [ids, local["gpt"].prompt_ids("dogs")[0]]
    answer = client.completions.create(
        model="gpt", prompt=prompts, n=2, max_tokens=2, temperature=0, echo=True, logprobs=1
    )
    for choice in answer.choices:
        prompt = prompts[choice.index // 2]
        shown = len(prompt) - (prompt[0] == local["gpt"].config.special_ids["bos"])
        assert len(choice.logprobs.tokens) == shown + 2
        assert choice.logprobs.tokens[:shown] == [_piece(local["gpt"], i) for i in prompt[-shown:]]


def _piece(served, token_id: int) -> str:
    return served.target_tokenizer.id_to_piece(token_id).replace("\u2581", " ")


def test_embeddings_as_float_and_base64_equal_embed(client, local):
    texts = ["the cat sat on the mat", "a quick fox", "dogs"]
    expected = local["embedder"].embed(texts)
    as_float = client.embeddings.create(model="embedder", input=texts, encoding_format="float")
    as_base64 = client.embeddings.create(model="embedder", input=texts)  # the client's default
    for answer in (as_float, as_base64):
        got = np.array([d.embedding for d in sorted(answer.data, key=lambda d: d.index)])
        np.testing.assert_allclose(got, expected, atol=1e-6)
    assert as_float.usage.prompt_tokens == sum(local["embedder"].token_counts(texts))


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
    ({"model": "gpt", "prompt": ""}, 400, "empty"),
    ({"model": "gpt", "prompt": []}, 400, "empty"),
    ({"model": "gpt", "prompt": "the cat " * 200}, 400, "context"),
    ({"model": "gpt", "prompt": "a", "max_tokens": 0}, 422, "max_tokens"),
    ({"model": "gpt", "prompt": "a", "max_tokens": 10**6}, 400, "max_tokens"),
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
        too_many = live.request("POST", "/v1/completions", {**body, "n": 2})
        assert too_many[0] == 400 and "at most 1" in too_many[2]["error"]["message"]
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
        deadline = time.monotonic() + 2  # the row joins the batch as its first token goes out
        while scheduler.running != 1 and time.monotonic() < deadline:
            time.sleep(0.005)
        assert scheduler.running == 1
        connection.close()
        deadline = time.monotonic() + 5
        while scheduler.running and time.monotonic() < deadline:
            time.sleep(0.02)
        assert scheduler.running == 0  # left long before its 40 tokens (0.8 s)
    finally:
        undo()


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


def test_shutdown_finishes_the_requests_in_flight(exports):
    live = LiveServer({"gpt": exports["gpt"]}).start()
    undo = slow_down(live.entry("gpt"), 0.01)
    body = {"model": "gpt", "prompt": "the cat", "max_tokens": 30, "temperature": 0}
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        flying = [pool.submit(live.request, "POST", "/v1/completions", body) for _ in range(3)]
        time.sleep(0.15)  # the requests are running
        live.stop()  # what SIGTERM does
        answers = [f.result() for f in flying]
    undo()
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
        deadline = time.monotonic() + 30
        while live.request("GET", "/health")[0] != 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert live.request("GET", "/v2/health/ready")[0] == 200
    finally:
        live.stop()


def test_api_key_and_cors(exports):
    settings = ServerSettings(api_key="sesame", cors_origins=["https://app.example"])
    live = LiveServer({"gpt": exports["gpt"]}, settings).start()
    try:
        status, _, answer = live.request("GET", "/v1/models")
        assert status == 401 and answer["error"]["type"] == "authentication_error"
        wrong = openai.OpenAI(base_url=live.url + "/v1", api_key="guess", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            wrong.models.list()
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


# --- Open Inference Protocol v2 -------------------------------------------------------------
@pytest.fixture
def triton_client(server):
    return triton.InferenceServerClient(server.url.removeprefix("http://"))


def _text_input(texts, binary=True):
    tensor = triton.InferInput("text", [len(texts)], "BYTES")
    tensor.set_data_from_numpy(np.array(texts, dtype=object), binary_data=binary)
    return tensor


def test_triton_readiness_and_metadata(triton_client, server):
    assert triton_client.is_server_live() and triton_client.is_server_ready()
    assert triton_client.is_model_ready("gpt")
    assert "binary_tensor_data" in triton_client.get_server_metadata()["extensions"]
    metadata = triton_client.get_model_metadata("classifier")
    assert metadata["inputs"] == [{"name": "text", "datatype": "BYTES", "shape": [-1]}]
    assert {o["name"] for o in metadata["outputs"]} == {"label", "probabilities", "embedding"}
    assert not triton_client.is_model_ready("nope")


@pytest.mark.parametrize("binary", [True, False])
def test_triton_infer_for_every_family(triton_client, local, binary):
    outputs = None if binary else [triton.InferRequestedOutput("text", binary_data=False)]
    result = triton_client.infer(
        "gpt", [_text_input(PROMPTS, binary)], outputs=outputs, parameters={"max_tokens": 12}
    )
    got = [t.decode() if isinstance(t, bytes) else t for t in result.as_numpy("text")]
    assert got == local["gpt"].generate(PROMPTS, 12)
    result = triton_client.infer("translator", [_text_input(SOURCES, binary)])
    got = [t.decode() if isinstance(t, bytes) else t for t in result.as_numpy("text")]
    assert got == local["translator"].translate(SOURCES)
    result = triton_client.infer("classifier", [_text_input(SOURCES, binary)])
    expected = local["classifier"].classify(SOURCES)
    probabilities = result.as_numpy("probabilities")
    np.testing.assert_allclose(
        probabilities, [[r["probabilities"][k] for k in ("negative", "positive")] for r in expected],
        atol=1e-6,
    )  # fmt: skip
    assert [t.decode() for t in result.as_numpy("label")] == [r["label"] for r in expected]
    result = triton_client.infer("embedder", [_text_input(["the cat", "dogs"], binary)])
    np.testing.assert_allclose(
        result.as_numpy("embedding"), local["embedder"].embed(["the cat", "dogs"]), atol=1e-6
    )


def test_triton_bad_requests_raise_the_servers_error(triton_client, server):
    wrong_type = triton.InferInput("text", [2], "INT64")
    wrong_type.set_data_from_numpy(np.array([1, 2], np.int64))
    for call, message in (
        (lambda: triton_client.infer("nope", [_text_input(["a"])]), "No model 'nope'"),
        (lambda: triton_client.infer("gpt", [wrong_type]), "BYTES"),
        (lambda: triton_client.infer("gpt", [_text_input([""])]), "empty"),
        (
            lambda: triton_client.infer("gpt", [_text_input(["a"])], parameters={"max_tokens": 0}),
            "max_tokens",
        ),
        (
            lambda: triton_client.infer("gpt", [_text_input(["a"])], parameters={"beams": 2}),
            "Unknown parameter 'beams'",
        ),
    ):
        with pytest.raises(triton.InferenceServerException, match=message):
            call()
    status, _, answer = server.request(
        "POST", "/v2/models/gpt/infer", b'{"inputs": [{"name": "text"}]}'
    )
    assert status == 400 and "datatype" in answer["error"]
    status, _, answer = server.request(
        "POST", "/v2/models/gpt/infer", b"{}", {"Inference-Header-Content-Length": "99"}
    )
    assert status == 400 and "body has 2 bytes" in answer["error"]
    assert triton_client.is_server_ready()
