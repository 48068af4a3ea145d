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

from tests.serving.live_server import Hold, LiveServer
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


WAIT = 60  # seconds a condition may take to hold (the engine is held, not slowed)


def _until(condition, seconds: float = WAIT, step: float = 0.01) -> None:
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
    hold = Hold(live.entry("gpt"))  # its prompt's run waits until released
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            answer = pool.submit(live.request, "POST", ROUTE, {**BODY, "max_tokens": 20})
            _until(lambda: _in_flight(live) == 1 and hold.waiting == 1)
            assert _in_flight(live) == 1 and hold.waiting == 1 and not answer.done()
            hold.release()
            assert answer.result()[0] == 200
        _until(lambda: _in_flight(live) == 0)
        assert _in_flight(live) == 0
    finally:
        hold.undo()
    # A stream, scraped from /metrics while it is open (the scrape is in flight too): its
    # first token is sent (a chunk with its `logprobs` entry), the next run held.
    hold = Hold(live.entry("gpt"), passes=1)
    try:
        connection = _open(live, {**BODY, "max_tokens": 20, "stream": True, "logprobs": 0})
        received = b""
        while b"data: " not in received:  # the headers, then the first chunk
            received += connection.recv(4096)
        _until(lambda: hold.waiting == 1)
        _, _, text = live.request("GET", "/metrics")
        lines = text.decode().splitlines()
        assert f'transformer_zoo_requests_in_flight{{endpoint="{ROUTE}"}} 1.0' in lines
        assert 'transformer_zoo_requests_in_flight{endpoint="/metrics"} 1.0' in lines
        assert b"data: [DONE]" not in received
        hold.release()
        while b"data: [DONE]\n\n" not in received:  # (in chunked encoding)
            received += connection.recv(4096)
        connection.close()
        _until(lambda: _in_flight(live) == 0)
        assert _in_flight(live) == 0
    finally:
        hold.undo()


@pytest.mark.parametrize("stream", [False, True])
def test_a_request_whose_client_left_is_in_flight_no_longer(live, stream):
    """Its client leaves while its row is held after its first token: the request ends
    with its row still running (the row is cancelled, and leaves at the next step)."""
    scheduler = live.entry("gpt").worker
    _until(lambda: not scheduler.running)  # a row that left with its client is gone
    hold = Hold(live.entry("gpt"), passes=1)  # the prompt's run, then none
    try:
        connection = _open(live, {**BODY, "max_tokens": 40, "stream": stream})
        _until(lambda: scheduler.running == 1 and hold.waiting == 1)
        assert scheduler.running == 1 and hold.waiting == 1 and _in_flight(live) == 1
        connection.close()
        _until(lambda: _in_flight(live) == 0)
        assert _in_flight(live) == 0 and hold.runs == 1  # before its row ran on
    finally:
        hold.undo()
    _until(lambda: not scheduler.running)
    assert not scheduler.running


def test_refused_requests_are_in_flight_no_longer(live):
    """A full queue's 429s (and the requests that ran meanwhile), an unknown model's 404,
    a malformed body's 422 and a wrong method's 405 all leave nothing in flight. The
    first request's run is held, so one row runs and one waits (`max_batch_size` and
    `max_queue` 1): at least 6 of the 8 are refused before any ends."""
    hold = Hold(live.entry("gpt"))
    try:
        body = {**BODY, "max_tokens": 10}
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            answers = [pool.submit(live.request, "POST", ROUTE, body) for _ in range(8)]
            _until(lambda: sum(a.done() for a in answers) >= 6)
            done = [a.result()[0] for a in answers if a.done()]
            assert len(done) >= 6 and set(done) == {429}
            hold.release()
            statuses = [a.result()[0] for a in answers]
        assert set(statuses) == {200, 429} and statuses.count(429) >= 6
        assert live.request("POST", ROUTE, {**body, "model": "none"})[0] == 404
        assert live.request("POST", ROUTE, {**body, "max_tokens": "3"})[0] == 422
        assert live.request("GET", ROUTE)[0] == 405
    finally:
        hold.undo()
    _until(lambda: not any(_every_in_flight(live).values()))
    assert set(_every_in_flight(live).values()) == {0.0}


def test_a_request_that_timed_out_is_in_flight_no_longer(gpt):
    """The request's run is held past its `request_timeout`, then let go: the server
    answers 504 (a stream: its error event), and the request is in flight no longer."""
    timeout = 1.0
    live = LiveServer({"gpt": gpt}, ServerSettings(request_timeout=timeout)).start()
    try:
        for stream in (False, True):
            status, data = _held_past(live, {**BODY, "max_tokens": 40, "stream": stream}, timeout)
            assert status == (200 if stream else 504)
            if stream:  # an error event, then [DONE]
                assert b'"code":504' in data and data.endswith(b"data: [DONE]\n\n")
            _until(lambda: _in_flight(live) == 0)
            assert _in_flight(live) == 0
    finally:
        live.stop()


def _held_past(live, body: dict, timeout: float) -> tuple[int, bytes]:
    """The status and body of a request whose engine run is held until `timeout`
    seconds after it was seen in flight (past its deadline), then let go."""
    hold = Hold(live.entry("gpt"))
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            answer = pool.submit(live.request, "POST", ROUTE, body)
            _until(lambda: _in_flight(live) == 1 and hold.waiting == 1)
            assert _in_flight(live) == 1 and hold.waiting == 1
            held = time.monotonic()  # after its arrival
            _until(lambda: time.monotonic() > held + timeout)
            hold.release()
            status, _, data = answer.result()
    finally:
        hold.undo()
    return status, data


def test_a_shutdown_drains_the_requests_in_flight_to_none(gpt):
    """Three requests held in flight when the shutdown begins (uvicorn has closed the
    listening socket) all end with their answers, and nothing is in flight after."""
    live = LiveServer({"gpt": gpt}).start()
    hold = Hold(live.entry("gpt"))
    body = {**BODY, "max_tokens": 30}
    try:
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            flying = [pool.submit(live.request, "POST", ROUTE, body) for _ in range(3)]
            _until(lambda: _in_flight(live) == 3 and hold.waiting == 1)
            assert _in_flight(live) == 3 and not any(f.done() for f in flying)
            live.server.should_exit = True  # what SIGTERM does (`LiveServer.stop`)
            _until(lambda: live.socket.fileno() == -1)  # no longer accepting
            assert live.socket.fileno() == -1 and _in_flight(live) == 3
            hold.release()
            live.stop()
            assert [f.result()[0] for f in flying] == [200] * 3
    finally:
        hold.undo()
    assert not live.thread.is_alive() and _in_flight(live) == 0
