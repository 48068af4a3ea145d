"""`transformer-zoo serve` as a process: it starts where TensorFlow cannot be imported,
answers the `openai` client, and exits cleanly on SIGTERM; a wrong directory is one
usage line."""

from __future__ import annotations

import http.client
import signal
import socket
import subprocess
import sys
import textwrap
import time

import openai

from tests.serving.test_served_model import BLOCK_TENSORFLOW


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(*args):
    script = BLOCK_TENSORFLOW + textwrap.dedent(
        """
        from transformer_zoo.cli import main
        code = main(sys.argv[1:])
        banned = ("tensorflow", "keras", "transformer_zoo.models", "transformer_zoo.layers")
        loaded = [m for m in sys.modules if m.startswith(banned)]
        assert not loaded, loaded
        sys.exit(code)
        """
    )
    return subprocess.Popen(
        [sys.executable, "-c", script, "serve", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
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
    assert f"http://127.0.0.1:{port} serving gpt" in stderr


def test_a_wrong_directory_is_one_usage_line(tmp_path):
    process = _serve(tmp_path / "missing", "--port", _free_port())
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 2
    assert stderr.startswith("transformer-zoo serve: error: ") and stderr.count("\n") == 1
