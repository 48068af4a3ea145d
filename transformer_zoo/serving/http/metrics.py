"""The server's Prometheus metrics (`GET /metrics`), one registry per app."""

from __future__ import annotations

import threading
import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

SIZES = (1, 2, 4, 8, 16, 32, 64, 128)
SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Metrics:
    """Requests by endpoint and status, queue depth, batch size, time to first token,
    generated tokens and the decode rate, labelled by model where they apply."""

    def __init__(self):
        self.registry = CollectorRegistry()
        prefix = "transformer_zoo_"
        self.requests = Counter(
            prefix + "requests", "Requests answered", ["endpoint", "status"],
            registry=self.registry,
        )  # fmt: skip
        self.queue_depth = Gauge(
            prefix + "queue_depth", "Sequences (texts) waiting to run", ["model"],
            registry=self.registry,
        )  # fmt: skip
        self.batch_size = Histogram(
            prefix + "batch_size", "Rows (texts) per engine run", ["model"],
            buckets=SIZES, registry=self.registry,
        )  # fmt: skip
        self.time_to_first_token = Histogram(
            prefix + "time_to_first_token_seconds", "From arrival to the first token",
            ["model"], buckets=SECONDS, registry=self.registry,
        )  # fmt: skip
        self.tokens = Counter(
            prefix + "generated_tokens", "Tokens generated", ["model"], registry=self.registry
        )
        self.tokens_per_second = Gauge(
            prefix + "tokens_per_second", "Tokens generated per second over the last second",
            ["model"], registry=self.registry,
        )  # fmt: skip
        self._window: dict[str, tuple[float, int]] = {}
        self._lock = threading.Lock()

    def observer(self, model: str):
        """The `observe(event, value)` callback of one model's scheduler or batcher."""
        queue_depth = self.queue_depth.labels(model)
        batch_size = self.batch_size.labels(model)
        tokens = self.tokens.labels(model)
        rate = self.tokens_per_second.labels(model)

        def observe(event: str, value: int) -> None:
            if event == "queue_depth":
                queue_depth.set(value)
            elif event == "batch_size":
                batch_size.observe(value)
            elif event == "tokens":
                tokens.inc(value)
                now = time.monotonic()
                with self._lock:
                    start, count = self._window.get(model, (now, 0))
                    count += value
                    if now - start >= 1.0:
                        rate.set(count / (now - start))
                        start, count = now, 0
                    self._window[model] = (start, count)

        return observe

    def render(self) -> bytes:
        return generate_latest(self.registry)
