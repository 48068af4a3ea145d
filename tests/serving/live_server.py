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


class Hold:
    """Holds the engine runs of `entry` (on the encoder batcher's second session too)
    until `release()`, after letting `passes` of them through: a request stays in
    flight, however slow or busy the machine, until the test lets it go (where sleeps
    in the engine left a busy machine's requests done before the test looked). `undo`
    releases the runs and puts the engine back. A run waits at most `WAIT` seconds, so
    that a failed test cannot hang the server.

    Attributes:
        waiting: how many runs are held now.
        runs: how many runs have gone through.
    """

    WAIT = 300.0

    def __init__(self, entry, passes: int = 0):
        models = [entry.served, getattr(entry.worker, "concurrent_served", entry.served)]
        self._runners = list({id(m.runner): m.runner for m in models}.values())
        self._runs = [runner.run for runner in self._runners]
        self._condition = threading.Condition()
        self.passes, self.released, self.waiting, self.runs = passes, False, 0, 0
        for runner, run in zip(self._runners, self._runs, strict=True):
            runner.run = self._held(run)

    def _held(self, run):
        def held(*args, **kwargs):
            with self._condition:
                self.waiting += 1
                self._condition.wait_for(lambda: self.released or self.passes > 0, self.WAIT)
                self.waiting -= 1
                self.passes = max(self.passes - 1, 0)
                self.runs += 1
            return run(*args, **kwargs)

        return held

    def release(self) -> None:
        with self._condition:
            self.released = True
            self._condition.notify_all()

    def undo(self) -> None:
        self.release()
        for runner, run in zip(self._runners, self._runs, strict=True):
            runner.run = run
