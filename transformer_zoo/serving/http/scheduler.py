"""Batching for the HTTP server: one thread per model owns its engine.

- `GenerationScheduler` (`generation_scheduler`): iteration-level (continuous) batching,
  as TGI and vLLM do it. A request's prompt runs (with the other requests that arrived
  meanwhile), then its row (`generation_row.GenerationRow`) joins the running batch
  (`CachedEngine.concatenate`); every step decodes one token for each row; a row leaves
  (`CachedEngine.keep`) when it ends, is cancelled or times out, without waiting for the
  others. Each row draws with its own strategy and random generator (`Greedy.draw`,
  `Sampling.draw`), so a seeded request gives the same text whoever shares its batch (with
  int8 weights the logits themselves move with the batch: one activation scale per call,
  `export.quantize`).
- `EncoderBatcher` (`encoder_batcher`): requests for embeddings or classes that arrive
  within a few milliseconds of each other run as one batch, up to a bounded number of
  texts (an idle model runs a request at once); a few threads take turns forming batches,
  so one batch runs while the next forms and runs.

This module holds what both share: one model's threads and bounded queue (`Worker`) and
its refusals. Both refuse new work past a bounded queue (`QueueFull`: the server answers
429) and before any of it is done; a request larger than the queue is taken when nothing
else waits, up to `MAX_REQUEST` sequences or texts (`TooLarge`: 400). Token-level only:
text, stop strings and the protocols are the app's.
"""

from __future__ import annotations

import collections
import threading
import time

MAX_REQUEST = 2048  # sequences or texts of one request: OpenAI's limit of embedding inputs


class QueueFull(Exception):
    """The model's queue holds as many requests as it may; nothing was started."""


class TooLarge(Exception):
    """The request holds more than `MAX_REQUEST` sequences or texts (400)."""


class Closed(Exception):
    """The server is shutting down and takes no new requests."""


class Worker:
    """One model's threads and bounded queue, shared by both workers: `submit` admits
    work (all of a request or none), `close` drains."""

    def __init__(self, name: str, max_queue: int, observe, threads: int = 1):
        self.max_queue = max_queue
        self.observe = observe or (lambda event, value: None)
        self._waiting: collections.deque = collections.deque()
        self._condition = threading.Condition()
        self._closing = False
        self._threads = [
            threading.Thread(target=self._loop, name=f"{name}-{i}", daemon=True)
            for i in range(threads)
        ]

    def _start(self) -> None:
        for thread in self._threads:
            thread.start()

    def _admit(self, count: int, queued: int, unit: str) -> None:
        """Raises unless `count` more `unit`s fit beside the `queued` ones (under the lock).
        A request larger than the queue fits an empty one: that it may wait for the queue
        to empty, rather than never fit, lets a client send OpenAI's 2,048 inputs."""
        if self._closing:
            raise Closed("The server is shutting down.")
        if count > MAX_REQUEST:
            raise TooLarge(f"The request has {count} {unit}; the most is {MAX_REQUEST}.")
        if queued and queued + count > self.max_queue:
            raise QueueFull(f"The queue of {self.max_queue} waiting {unit} is full; retry shortly.")

    def close(self, timeout: float | None = None) -> None:
        """Takes no new work; returns once the queued and running work is done."""
        with self._condition:
            self._closing = True
            self._condition.notify_all()
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self._threads:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))

    def _loop(self) -> None:
        raise NotImplementedError
