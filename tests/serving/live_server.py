"""A real uvicorn server on a free loopback port, in a thread of the test process (so
that a test can reach the app's models), started and stopped by the test."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time

import uvicorn

from transformer_zoo.serving.http import ServerSettings, create_app


class LiveServer:
    def __init__(self, directories: dict[str, str], settings: ServerSettings | None = None):
        self.app = create_app(directories, settings or ServerSettings())
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(self.app, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True
        )

    def start(self, wait_ready: bool = True) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.server.started and (not wait_ready or self.request("GET", "/health")[0] == 200):
                return self
            time.sleep(0.02)
        raise RuntimeError("the server did not start")

    def request(self, method: str, path: str, body=None, headers=None):
        """`(status, headers, parsed JSON or bytes)` of one request on a new connection;
        a dict `body` is sent as JSON, bytes as they are."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        if isinstance(body, dict):
            body = json.dumps(body).encode()
            headers = {"Content-Type": "application/json", **(headers or {})}
        try:
            connection.request(method, path, body=body, headers=headers or {})
            response = connection.getresponse()
            data = response.read()
            kind = response.getheader("content-type", "")
            parsed = json.loads(data) if kind.startswith("application/json") else data
            return response.status, dict(response.getheaders()), parsed
        finally:
            connection.close()

    def entry(self, name: str):
        return self.app.state.registry.entries[name]

    def stop(self) -> None:
        """What SIGTERM does (uvicorn's handler sets `should_exit`): stop taking
        connections, finish the requests in flight, shut the workers down."""
        self.server.should_exit = True
        self.thread.join(60)
        self.socket.close()


def slow_down(entry, seconds: float):
    """Makes every engine run of `entry` take `seconds` longer (on the encoder batcher's
    second session too); returns the undo."""
    models = [entry.served, getattr(entry.worker, "concurrent_served", entry.served)]
    runners = list({id(m.runner): m.runner for m in models}.values())
    runs = [runner.run for runner in runners]

    def slower(run):
        def slow(*args, **kwargs):
            time.sleep(seconds)
            return run(*args, **kwargs)

        return slow

    for runner, run in zip(runners, runs, strict=True):
        runner.run = slower(run)

    def undo():
        for runner, run in zip(runners, runs, strict=True):
            runner.run = run

    return undo
