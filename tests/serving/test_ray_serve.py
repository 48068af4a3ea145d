"""`transformer-zoo serve --ray --replicas 2`: two replicas on a local Ray Serve, both
answering, the `openai` client unchanged, and a clean exit on SIGTERM."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time

import openai
import pytest

from tests.serving.test_serve_command import _free_port

pytestmark = pytest.mark.slow


def _health(port: int) -> dict | None:
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("GET", "/health")
        response = connection.getresponse()
        return json.loads(response.read()) if response.status == 200 else None
    except (OSError, ValueError):
        return None


def test_two_ray_replicas_both_answer(family_artifacts, tmp_path):
    port = _free_port()
    log = open(tmp_path / "serve.log", "w+")
    process = subprocess.Popen(
        [sys.executable, "-m", "transformer_zoo.cli", "serve",
         str(family_artifacts("decoder-only").export_dir), "--name", "gpt",
         "--port", str(port), "--ray", "--replicas", "2"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        processes, deadline = set(), time.monotonic() + 180
        while len(processes) < 2:
            assert process.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "two replicas did not answer"
            health = _health(port)
            if health is not None:
                processes.add(health["process"])
            else:
                time.sleep(0.5)
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="-", max_retries=0)
        texts = {
            client.completions.create(model="gpt", prompt="the cat", max_tokens=5, temperature=0)
            .choices[0]
            .text
            for _ in range(4)
        }
        assert len(texts) == 1  # every replica decodes alike
        process.send_signal(signal.SIGTERM)
        assert process.wait(120) == 0, (tmp_path / "serve.log").read_text()[-3000:]
    finally:
        process.kill()


@pytest.mark.parametrize("when", ["ready", "starting"])
def test_sigterm_to_the_process_group_exits_promptly(family_artifacts, tmp_path, when):
    """SIGTERM to the whole group (Ctrl-C, systemd, `docker stop`) stops Ray's processes
    too; shutting Serve down then waited about 40 s for them. One that came while Serve
    was still starting (`serve.run` waiting on the dead Ray) hung the command for good."""
    port = _free_port()
    log = open(tmp_path / "serve.log", "w+")
    process = subprocess.Popen(
        [sys.executable, "-m", "transformer_zoo.cli", "serve",
         str(family_artifacts("decoder-only").export_dir), "--port", str(port), "--ray"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while when == "starting" and "Started Serve" not in _text(tmp_path / "serve.log"):
            assert process.poll() is None, _text(tmp_path / "serve.log")[-3000:]
            assert time.monotonic() < deadline, "Serve did not start"
            time.sleep(0.05)
        while when == "ready" and _health(port) is None:
            assert process.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the replica did not answer"
            time.sleep(0.5)
        signalled = time.monotonic()
        os.killpg(process.pid, signal.SIGTERM)
        assert process.wait(60) == 0, (tmp_path / "serve.log").read_text()[-3000:]
        assert time.monotonic() - signalled < 25
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _text(path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""
