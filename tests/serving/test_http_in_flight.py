"""`transformer_zoo_requests_in_flight` of `/metrics` against a real uvicorn server: a
request is in flight, under the endpoint label `transformer_zoo_requests_total` counts it
by, from its arrival until its response has ended, however it ends (whole, a stream's
`[DONE]`, its client gone, refused, timed out, or drained by a shutdown)."""

from __future__ import annotations

import concurrent.futures
import json
import socket
import time

import pytest

from tests.serving.live_server import LiveServer, slow_down
from transformer_zoo.serving.http import ServerSettings

ROUTE = "/v1/completions"
BODY = {"model": "gpt", "prompt": "the cat", "temperature": 0}


@pytest.fixture(scope="module")
def gpt(family_artifacts):
    return str(family_artifacts("decoder-only", saved_model=False).export_dir)


@pytest.fixture(scope="module")
def live(gpt):
    server = LiveServer({"gpt": gpt}, ServerSettings(max_batch_size=1, max_queue=1)).start()
    yield server
    server.stop()


def _in_flight(live, route: str = ROUTE) -> float:
    name = "transformer_zoo_requests_in_flight"
    return live.app.state.metrics.registry.get_sample_value(name, {"endpoint": route}) or 0.0


def _every_in_flight(live) -> dict[str, float]:
    return {
        sample.labels["endpoint"]: sample.value
        for metric in live.app.state.metrics.registry.collect()
        if metric.name == "transformer_zoo_requests_in_flight"
        for sample in metric.samples
    }


def _until(condition, seconds: float, step: float = 0.01) -> None:
    """Polls `condition` until it holds or `seconds` have passed (the caller asserts)."""
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(step)


def _open(live, body: dict) -> socket.socket:
    """A connection that has sent `body` to `ROUTE` (the caller reads or leaves)."""
    connection = socket.create_connection(("127.0.0.1", live.port), timeout=30)
    raw = json.dumps(body)
    connection.sendall(
        f"POST {ROUTE} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n".encode()
        + f"Content-Length: {len(raw)}\r\n\r\n{raw}".encode()
    )
    return connection


def test_a_request_is_in_flight_until_its_answer_has_ended(live):
    undo = slow_down(live.entry("gpt"), 0.02)  # 20 tokens take 0.4 s or more
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            answer = pool.submit(live.request, "POST", ROUTE, {**BODY, "max_tokens": 20})
            _until(lambda: _in_flight(live) == 1, 5)
            assert _in_flight(live) == 1 and not answer.done()
            assert answer.result()[0] == 200
        _until(lambda: _in_flight(live) == 0, 5)
        assert _in_flight(live) == 0
        # A stream, scraped from /metrics while it is open (the scrape is in flight too).
        connection = _open(live, {**BODY, "max_tokens": 20, "stream": True})
        received = b""
        while b"data: " not in received:  # the headers, then the first chunk
            received += connection.recv(4096)
        _, _, text = live.request("GET", "/metrics")
        lines = text.decode().splitlines()
        assert f'transformer_zoo_requests_in_flight{{endpoint="{ROUTE}"}} 1.0' in lines
        assert 'transformer_zoo_requests_in_flight{endpoint="/metrics"} 1.0' in lines
        while b"data: [DONE]\n\n" not in received:  # (in chunked encoding)
            received += connection.recv(4096)
        connection.close()
        _until(lambda: _in_flight(live) == 0, 5)
        assert _in_flight(live) == 0
    finally:
        undo()


@pytest.mark.parametrize("stream", [False, True])
def test_a_request_whose_client_left_is_in_flight_no_longer(live, stream):
    scheduler = live.entry("gpt").worker
    _until(lambda: not scheduler.running, 5)  # a row that left with its client is gone
    undo = slow_down(live.entry("gpt"), 0.03)  # 40 tokens take 1.2 s or more
    try:
        connection = _open(live, {**BODY, "max_tokens": 40, "stream": stream})
        _until(lambda: scheduler.running == 1, 5)
        assert scheduler.running == 1 and _in_flight(live) == 1
        connection.close()
        _until(lambda: _in_flight(live) == 0, 5)
        assert _in_flight(live) == 0
    finally:
        undo()


def test_refused_requests_are_in_flight_no_longer(live):
    """A full queue's 429s (and the requests that ran meanwhile), an unknown model's 404,
    a malformed body's 422 and a wrong method's 405 all leave nothing in flight."""
    undo = slow_down(live.entry("gpt"), 0.01)
    try:
        body = {**BODY, "max_tokens": 10}
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda _: live.request("POST", ROUTE, body), range(8)))
        assert 429 in {status for status, _, _ in answers}
        assert live.request("POST", ROUTE, {**body, "model": "none"})[0] == 404
        assert live.request("POST", ROUTE, {**body, "max_tokens": "3"})[0] == 422
        assert live.request("GET", ROUTE)[0] == 405
    finally:
        undo()
    _until(lambda: not any(_every_in_flight(live).values()), 5)
    assert set(_every_in_flight(live).values()) == {0.0}


def test_a_request_that_timed_out_is_in_flight_no_longer(gpt):
    live = LiveServer({"gpt": gpt}, ServerSettings(request_timeout=1.0)).start()
    undo = slow_down(live.entry("gpt"), 0.05)  # 40 tokens take 2 s or more
    try:
        for stream in (False, True):
            body = {**BODY, "max_tokens": 40, "stream": stream}
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                answer = pool.submit(live.request, "POST", ROUTE, body)
                _until(lambda: _in_flight(live) == 1, 5)
                assert _in_flight(live) == 1
                status, _, data = answer.result()
            assert status == (200 if stream else 504)
            if stream:  # an error event, then [DONE]
                assert b'"code":504' in data and data.endswith(b"data: [DONE]\n\n")
            _until(lambda: _in_flight(live) == 0, 5)
            assert _in_flight(live) == 0
    finally:
        undo()
        live.stop()


def test_a_shutdown_drains_the_requests_in_flight_to_none(gpt):
    live = LiveServer({"gpt": gpt}).start()
    undo = slow_down(live.entry("gpt"), 0.01)
    body = {**BODY, "max_tokens": 30}
    try:
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            flying = [pool.submit(live.request, "POST", ROUTE, body) for _ in range(3)]
            _until(lambda: _in_flight(live) == 3, 5)
            assert _in_flight(live) == 3
            live.stop()  # what SIGTERM does
            assert [f.result()[0] for f in flying] == [200] * 3
    finally:
        undo()
    assert not live.thread.is_alive() and _in_flight(live) == 0
