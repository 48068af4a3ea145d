"""The server's Prometheus metrics (`GET /metrics`), one registry per app."""

from __future__ import annotations

import collections
import threading
import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

SIZES = (1, 2, 4, 8, 16, 32, 64, 128)
SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
RATE_WINDOW = 5.0  # seconds that `tokens_per_second` averages over
SLOT = 0.1  # seconds of tokens counted together for it


class Metrics:
    """Requests by endpoint and status, requests in flight by endpoint, queue depth,
    batch size, time to first token, generated tokens and the decode rate, labelled by
    model where they apply.

    Args:
        clock: the time in seconds, `time.monotonic` (a test gives its own).
    """

    def __init__(self, clock=time.monotonic):
        self.registry = CollectorRegistry()
        self.clock = clock
        prefix = "transformer_zoo_"
        self.requests = Counter(
            prefix + "requests", "Requests answered", ["endpoint", "status"],
            registry=self.registry,
        )  # fmt: skip
        # Counted where `requests` is (`app.Gate`): from arrival until the response has
        # ended (a stream's last event, its client gone, or a refusal's answer).
        self.in_flight = Gauge(
            prefix + "requests_in_flight", "Requests received whose response has not ended",
            ["endpoint"], registry=self.registry,
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
            prefix + "generated_tokens", "Tokens generated (the completions' tokens)", ["model"],
            registry=self.registry,
        )  # fmt: skip
        self.tokens_per_second = Gauge(
            prefix + "tokens_per_second",
            f"Tokens generated per second, over the last {RATE_WINDOW:g} seconds",
            ["model"], registry=self.registry,
        )  # fmt: skip
        self._lock = threading.Lock()

    def observer(self, model: str):
        """The `observe(event, value)` callback of one model's scheduler or batcher."""
        queue_depth = self.queue_depth.labels(model)
        batch_size = self.batch_size.labels(model)
        tokens = self.tokens.labels(model)
        # [slot, tokens] of the last RATE_WINDOW seconds, read when /metrics is scraped:
        # a rate set as tokens arrived stayed up while idle and missed short bursts.
        recent: collections.deque[list[int]] = collections.deque()
        slots = round(RATE_WINDOW / SLOT)

        def forget(slot: int) -> None:
            while recent and recent[0][0] <= slot - slots:
                recent.popleft()

        def rate() -> float:
            with self._lock:
                forget(int(self.clock() / SLOT))
                return sum(count for _, count in recent) / RATE_WINDOW

        self.tokens_per_second.labels(model).set_function(rate)

        def observe(event: str, value: int) -> None:
            if event == "queue_depth":
                queue_depth.set(value)
            elif event == "batch_size":
                batch_size.observe(value)
            elif event == "tokens":
                tokens.inc(value)
                slot = int(self.clock() / SLOT)
                with self._lock:
                    if recent and recent[-1][0] == slot:
                        recent[-1][1] += value
                    else:
                        recent.append([slot, value])
                    forget(slot)

        return observe

    def render(self) -> bytes:
        return generate_latest(self.registry)
