"""`transformer-zoo serve` as a process: it starts where TensorFlow cannot be imported,
answers the `openai` client, and exits cleanly on SIGTERM; a wrong directory is one
usage line."""

from __future__ import annotations

import http.client
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time

import openai
import pytest

from tests.serving.test_served_model import BLOCK_TENSORFLOW


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(*args, prelude: str = "", env=None):
    script = (
        BLOCK_TENSORFLOW
        + prelude
        + textwrap.dedent(
            """
        from transformer_zoo.cli import main
        code = main(sys.argv[1:])
        banned = ("tensorflow", "keras", "transformer_zoo.models", "transformer_zoo.layers")
        loaded = [m for m in sys.modules if m.startswith(banned)]
        assert not loaded, loaded
        sys.exit(code)
        """
        )
    )
    return subprocess.Popen(
        [sys.executable, "-c", script, "serve", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def _health(port: int) -> int | None:
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        connection.request("GET", "/health")
        return connection.getresponse().status
    except OSError:
        return None


def test_serve_answers_without_tensorflow_and_exits_on_sigterm(family_artifacts):
    port = _free_port()
    decoder = family_artifacts("decoder-only").export_dir
    process = _serve(decoder, "--port", port, "--name", "gpt", "--log-level", "warning")
    try:
        deadline = time.monotonic() + 60
        while _health(port) != 200:
            assert process.poll() is None, process.communicate()[1][-2000:]
            assert time.monotonic() < deadline, "the server did not become ready"
            time.sleep(0.1)
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="-", max_retries=0)
        answer = client.completions.create(
            model="gpt", prompt="the cat", max_tokens=5, temperature=0
        )
        assert answer.usage.completion_tokens == 5
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 0, stderr[-2000:]
    assert "Traceback" not in stderr
    assert f"http://127.0.0.1:{port} serving gpt" in stderr and "; no API key is required" in stderr


def _ready(port: int, process) -> None:
    deadline = time.monotonic() + 60
    while _health(port) != 200:
        assert process.poll() is None, process.communicate()[1][-2000:]
        assert time.monotonic() < deadline, "the server did not become ready"
        time.sleep(0.1)


def _sigterm_with_a_request_open(family_artifacts, body: bytes, sent: int, prelude: str = ""):
    """SIGTERM to a `--timeout 0.5` server while a client has sent `sent` bytes of `body` to
    /v1/completions and waits: `(exit status, seconds to exit, stderr, what the client
    received)`."""
    port = _free_port()
    decoder = family_artifacts("decoder-only").export_dir
    process = _serve(
        decoder, "--port", port, "--name", "gpt", "--timeout", 0.5, "--log-level", "warning",
        prelude=prelude,
    )  # fmt: skip
    try:
        _ready(port, process)
        connection = socket.create_connection(("127.0.0.1", port), timeout=30)
        connection.sendall(
            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body[:sent]
        )
        time.sleep(0.3)  # the route has the request
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
        took = time.monotonic() - started
        connection.settimeout(1)
        try:
            received = connection.recv(4096)
        except OSError:
            received = b""
        connection.close()
    finally:
        process.kill()
    return process.returncode, took, stderr, received


def test_sigterm_with_a_stalled_body_exits_once_its_read_times_out(family_artifacts):
    """A client that sent half a body and stalled kept the draining server running (still
    running after 45 s): its body read now ends at `--timeout`, with 408."""
    body = b'{"model": "gpt", "prompt": "the cat", "max_tokens": 4}'
    code, took, stderr, received = _sigterm_with_a_request_open(family_artifacts, body, 10)
    assert code == 0, stderr[-2000:]
    assert took < 5 and "Traceback" not in stderr  # --timeout 0.5, and slack
    assert received.startswith(b"HTTP/1.1 408")


# A route that never ends: what the drain's bound (`serve`'s `timeout_graceful_shutdown`)
# is there for, whatever holds a request past its timeout.
STUCK_ROUTE = """
import asyncio
import transformer_zoo.serving.http.openai_routes as routes

async def stuck(request, model, settings):
    await asyncio.Event().wait()

routes.parse_body = stuck
"""
SHORT_MARGIN = """
import transformer_zoo.serving.http as http

http.SHUTDOWN_MARGIN = 1.0
"""


def test_sigterm_exits_within_the_timeout_and_a_margin_whatever_is_in_flight(family_artifacts):
    """The drain's bound is the timeout plus `SHUTDOWN_MARGIN`, which the README gives as
    5 s; the server here has a margin of 1 s (`SHORT_MARGIN`), so that the test does not
    wait those 5 s."""
    from transformer_zoo.serving.http import SHUTDOWN_MARGIN

    assert SHUTDOWN_MARGIN <= 5  # "whatever still runs 5 s past it is cancelled"
    body = b'{"model": "gpt", "prompt": "the cat", "max_tokens": 4}'
    code, took, stderr, _ = _sigterm_with_a_request_open(
        family_artifacts, body, len(body), prelude=STUCK_ROUTE + SHORT_MARGIN
    )
    assert code == 0, stderr[-2000:]
    assert took < 0.5 + 1 + 5  # --timeout 0.5, the margin of 1 s, and slack
    assert "timeout graceful shutdown exceeded" in stderr


def test_a_wrong_directory_is_one_usage_line(tmp_path):
    process = _serve(tmp_path / "missing", "--port", _free_port())
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 2
    assert stderr.startswith("transformer-zoo serve: error: ") and stderr.count("\n") == 1


def _one_usage_line(process) -> str:
    try:
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 2, stderr[-2000:]
    assert stderr.startswith("transformer-zoo serve: error: ") and stderr.count("\n") == 1, stderr
    return stderr


def test_a_port_in_use_is_one_usage_line(family_artifacts):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        stderr = _one_usage_line(
            _serve(family_artifacts("decoder-only").export_dir, "--port", port)
        )
    assert f"127.0.0.1:{port} is in use" in stderr


def test_sigterm_while_the_models_load_exits_cleanly(family_artifacts):
    """The loading thread is stopped and joined: exiting while it was inside onnxruntime
    aborted the process (`terminate called without an active exception`, status 134)."""
    port, copies = _free_port(), 300
    names = [arg for i in range(copies) for arg in ("--name", f"m{i}")]
    decoder = family_artifacts("decoder-only").export_dir
    process = _serve(*[decoder] * copies, *names, "--port", port, "--log-level", "warning")
    try:
        deadline = time.monotonic() + 60
        while _health(port) != 503:  # up, and loading
            assert process.poll() is None, process.communicate()[1][-2000:]
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.02)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 0, stderr[-2000:]
    assert "terminate called" not in stderr and "Traceback" not in stderr


def test_failures_are_logged_as_errors_with_their_traceback(capsys):
    """A server's unexpected failure says what failed and where; a warning of any command
    is still one line."""
    from transformer_zoo.cli import _WarningHandler

    handler, log = _WarningHandler("serve"), logging.getLogger("transformer_zoo.test")
    try:
        raise RuntimeError("the engine broke")
    except RuntimeError:
        failure = log.makeRecord(
            log.name, logging.ERROR, __file__, 1, "request failed", (), sys.exc_info()
        )
    handler.handle(failure)
    handler.handle(log.makeRecord(log.name, logging.WARNING, __file__, 1, "cut %d", (2,), None))
    lines = capsys.readouterr().err.splitlines()
    assert lines[:2] == [
        "transformer-zoo serve: error: request failed",
        "Traceback (most recent call last):",
    ]
    assert "RuntimeError: the engine broke" in lines
    assert lines[-1] == "transformer-zoo serve: warning: cut 2"


def test_a_model_that_fails_to_load_is_an_error_with_its_cause(family_artifacts, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(family_artifacts("decoder-only").export_dir, broken)
    (broken / "model.onnx").write_bytes(b"not an ONNX file")
    process = _serve(broken, "--port", _free_port(), "--log-level", "warning")
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 1, stderr[-2000:]
    assert f"transformer-zoo serve: error: could not load broken from {broken}" in stderr
    assert "Traceback" in stderr and "INVALID_PROTOBUF" in stderr


@pytest.mark.parametrize("where", ["--api-key", "TRANSFORMER_ZOO_API_KEY"])
def test_an_empty_api_key_is_refused_not_taken_for_none(family_artifacts, where):
    """`--api-key "$KEY"` with KEY unset served without a key."""
    decoder = family_artifacts("decoder-only").export_dir
    if where == "--api-key":
        process = _serve(decoder, "--port", _free_port(), "--api-key", "")
    else:
        process = _serve(decoder, "--port", _free_port(), env={where: ""})
    assert f"error: {where} is empty" in _one_usage_line(process)


# What a missing Ray does on import, whether or not this environment has it.
BLOCK_RAY = """
class BlockRay:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "ray":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, BlockRay())
"""


def test_ray_missing_is_one_usage_line(family_artifacts):
    decoder = family_artifacts("decoder-only").export_dir
    process = _serve(decoder, "--port", _free_port(), "--ray", prelude=BLOCK_RAY)
    assert "error: --ray needs Ray Serve" in _one_usage_line(process)
