"""`EncoderBatcher`: micro-batching of embedding and classification requests, batches
formed one at a time by a few threads and run concurrently (`scheduler` says how)."""

from __future__ import annotations

import concurrent.futures
import time
from dataclasses import dataclass, field

from transformer_zoo.serving.http.scheduler import Worker


@dataclass(eq=False)
class EncoderJob:
    """Texts of one request: `kind` is `"embed"` or `"classify"`; `pairs` holds the
    second text of each pair a pair classifier reads (None: single texts)."""

    kind: str
    texts: list[str]
    pairs: list[str] | None = None
    future: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)


class EncoderBatcher(Worker):
    """Runs the encoder-only requests that arrive within `max_wait_ms` of the first one
    as one batch of at most `max_batch_size` texts (a larger request runs alone).

    The wait applies only while another batch is running: when the model is idle, what
    has arrived runs at once (waiting could only add latency; the requests arriving
    meanwhile form the next batch), and the forming batch runs as soon as the model falls
    idle.

    `workers` threads share the queue: one at a time forms a batch, and batches run
    concurrently (one that starts beside a running batch on `concurrent_served`), so the
    next batch forms and runs while one is running. Under load that keeps both cores busy
    where a single batch's small operators leave them waiting on each other: on 2 cores,
    random groups of 8 MiniLM sentences ran 1.1-1.35x faster with two threads than with one
    (a lone request runs as before).

    Args:
        served: an encoder-only `ServedModel`.
        max_batch_size: the most texts per batch.
        max_wait_ms: how long the first request of a batch waits for others.
        max_queue: the most texts waiting; past it `submit` raises `QueueFull`.
        observe: as for `GenerationScheduler` (`"batch_size"`, `"queue_depth"`).
        workers: threads forming and running batches.
        concurrent_served: the same model on sessions with fewer intra-op threads, for
            the batches that start while another is running (default: `served`).
    """

    def __init__(
        self,
        served,
        max_batch_size=32,
        max_wait_ms=2.0,
        max_queue=1024,
        observe=None,
        workers=2,
        concurrent_served=None,
    ):
        if not isinstance(workers, int) or workers < 1:
            raise ValueError(f"`workers` must be a positive integer. Received: {workers!r}")
        super().__init__("encoder", max_queue, observe, workers)
        self.served = served
        self.concurrent_served = concurrent_served or served
        self.max_batch_size = max_batch_size
        self.max_wait = max_wait_ms / 1000
        self._queued_texts = 0
        self._forming = False  # one thread at a time waits for a batch to fill
        self._running = 0  # batches inside the model
        self._start()

    def submit(
        self, kind: str, texts: list[str], pairs: list[str] | None = None
    ) -> concurrent.futures.Future:
        """Queues one request's texts (with `pairs`, text pairs to classify); the future
        resolves to `(embeddings, token counts)` (an (N, D) array and a list:
        `ServedModel.embed_counted`) or their `classify` results."""
        job = EncoderJob(kind, texts, pairs)
        with self._condition:
            self._drop_cancelled()
            self._admit(len(texts), self._queued_texts, "texts")
            self._waiting.append(job)
            self._queued_texts += len(texts)
            self.observe("queue_depth", self._queued_texts)
            self._condition.notify_all()  # the thread forming a batch, or an idle one
        return job.future

    def _drop_cancelled(self) -> None:
        """Takes the waiting jobs whose client went away (their futures cancelled) out of
        the queue (under the lock): they kept their texts' places until a batch reached
        them, and a new request got 429 meanwhile."""
        cancelled = [job for job in self._waiting if job.future.cancelled()]
        for job in cancelled:
            self._waiting.remove(job)
            self._queued_texts -= len(job.texts)

    def _loop(self) -> None:
        while True:
            with self._condition:
                while (self._forming or not self._waiting) and not self._closing:
                    self._condition.wait()
                if not self._waiting:
                    return
                # While a batch runs, the first request waits a little for others to
                # share its batch; an idle model runs it at once.
                self._forming = True
                deadline = time.monotonic() + self.max_wait
                while (
                    self._running and self._queued_texts < self.max_batch_size and not self._closing
                ):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._condition.wait(left)
                jobs, texts = [], 0
                while self._waiting and (
                    not jobs or texts + len(self._waiting[0].texts) <= self.max_batch_size
                ):
                    job = self._waiting.popleft()
                    jobs.append(job)
                    texts += len(job.texts)
                self._queued_texts -= texts
                self._forming = False
                model = self.concurrent_served if self._running else self.served
                self._running += 1
                self._condition.notify_all()  # another thread may form the next batch
                self.observe("queue_depth", self._queued_texts)
            self.observe("batch_size", texts)
            try:
                for kind, paired in (("embed", False), ("classify", False), ("classify", True)):
                    chosen = [j for j in jobs if j.kind == kind and (j.pairs is not None) == paired]
                    self._run(model, kind, chosen)
            finally:
                with self._condition:
                    self._running -= 1
                    self._condition.notify_all()  # an idle model runs the forming batch

    def _run(self, model, kind: str, jobs: list[EncoderJob]) -> None:
        jobs = [job for job in jobs if job.future.set_running_or_notify_cancel()]
        if not jobs:
            return
        texts = [text for job in jobs for text in job.texts]
        pairs = None if jobs[0].pairs is None else [p for job in jobs for p in job.pairs]
        try:
            if kind == "embed":
                vectors, counts = model.embed_counted(texts, self.max_batch_size)
            else:
                results = model.classify(texts, pairs, batch_size=self.max_batch_size)
        except Exception as error:
            for job in jobs:
                job.future.set_exception(error)
            return
        start = 0
        for job in jobs:
            end = start + len(job.texts)
            if kind == "embed":
                job.future.set_result((vectors[start:end], counts[start:end]))
            else:
                job.future.set_result(results[start:end])
            start = end
