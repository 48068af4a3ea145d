"""Batching for the HTTP server: one thread per model owns its engine.

- `GenerationScheduler`: iteration-level (continuous) batching, as TGI and vLLM do it.
  A request's prompt runs (with the other requests that arrived meanwhile), then its row
  joins the running batch (`CachedEngine.concatenate`); every step decodes one token for
  each row; a row leaves (`CachedEngine.keep`) when it ends, is cancelled or times out,
  without waiting for the others. Each row draws with its own strategy and random
  generator (`Greedy.draw`, `Sampling.draw`), so a seeded request gives the same text
  whoever shares its batch (with int8 weights the logits themselves move with the batch:
  one activation scale per call, `export.quantize`).
- `EncoderBatcher`: requests for embeddings or classes that arrive within a few
  milliseconds of each other run as one batch, up to a bounded number of texts (an idle
  model runs a request at once); a few threads take turns forming batches, so one batch
  runs while the next forms and runs.

Both refuse new work past a bounded queue (`QueueFull`: the server answers 429) and before
any of it is done; a request larger than the queue is taken when nothing else waits, up to
`MAX_REQUEST` sequences or texts (`TooLarge`: 400). Token-level only: text, stop strings and
the protocols are the app's.
"""

from __future__ import annotations

import collections
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from transformer_zoo.generation.search import Greedy, Sampling, ranked_log_probs

log = logging.getLogger(__name__)
MAX_REQUEST = 2048  # sequences or texts of one request: OpenAI's limit of embedding inputs


class QueueFull(Exception):
    """The model's queue holds as many requests as it may; nothing was started."""


class TooLarge(Exception):
    """The request holds more than `MAX_REQUEST` sequences or texts (400)."""


class Closed(Exception):
    """The server is shutting down and takes no new requests."""


class _Worker:
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


@dataclass
class Token:
    """One generated token: its id, its log-probability under the model, and the `top`
    most likely `(id, log-probability)` pairs when the request asked for them."""

    token_id: int
    logprob: float
    top: list[tuple[int, float]] = field(default_factory=list)


@dataclass
class Prompt:
    """The prompt's own tokens, each with its log-probability given the ones before it
    (and the `top` alternatives), for a row that asked (`prompt_logprobs`): emitted
    before the row's first `Token`. `tokens` holds ids[1:]; ids[0] has no context."""

    first_id: int
    tokens: list[Token]


@dataclass
class Finished:
    """The row ended: `reason` is `"stop"` (EOS), `"length"` (max_new_tokens),
    `"cancelled"` or `"timeout"`."""

    reason: str


@dataclass
class Failed:
    """The engine raised while running the row's batch."""

    error: BaseException


@dataclass(eq=False)
class GenerationRow:
    """One sequence to generate (a request with `n` > 1 has n rows).

    Attributes:
        ids: prompt ids (decoder-only) or source ids (encoder-decoder).
        max_new_tokens: the most tokens to generate; 0 runs the prompt for its `Prompt`.
        strategy: `Greedy()` or `Sampling(...)`; a sampled row draws from `rng`.
        emit: called on the scheduler's thread with the `Prompt` (if `prompt_logprobs`),
            each `Token`, then one `Finished` or `Failed`.
        top_logprobs: how many alternatives each `Token` lists.
        deadline: `time.monotonic()` past which the row ends with `"timeout"`.
        prompt_logprobs: emit the prompt's own log-probabilities first (`Prompt`).
    """

    ids: list[int]
    max_new_tokens: int
    strategy: Greedy | Sampling
    emit: Callable[[object], None]
    top_logprobs: int = 0
    deadline: float = float("inf")
    prompt_logprobs: bool = False
    rng: np.random.Generator | None = None
    generated: int = 0
    cancelled: bool = False  # set from any thread: the row leaves at the next step
    finished: bool = False  # set by the scheduler once it has emitted the row's end

    def __post_init__(self):
        if isinstance(self.strategy, Sampling):
            self.rng = np.random.default_rng(self.strategy.seed)

    def cancel(self) -> None:
        self.cancelled = True


class GenerationScheduler(_Worker):
    """Continuous batching of `GenerationRow`s over one `ServedModel`'s engine.

    Args:
        served: a decoder-only or encoder-decoder `ServedModel`.
        max_batch_size: the most rows decoded together.
        max_queue: the most rows waiting to join; past it `submit` raises `QueueFull`.
        observe: optional `observe(event, value)` for metrics (`"batch_size"`,
            `"queue_depth"`; the app's `Generation` observes `"tokens"` as its choices
            take them, since a row may decode past a stop string until its cancel
            arrives).
    """

    def __init__(self, served, max_batch_size: int = 16, max_queue: int = 256, observe=None):
        super().__init__("generation", max_queue, observe)
        self.served = served
        self.engine = served.engine
        self.max_batch_size = max_batch_size
        self.eos_id = served.config.special_ids.get("eos")
        self._rows: list[GenerationRow] = []  # the running batch, in state order
        self._last: np.ndarray | None = None  # each running row's last token
        self._state = None
        self._start()

    # --- any thread -------------------------------------------------------------------
    def submit(self, rows: list[GenerationRow]) -> None:
        """Queues the rows of one request, all or none."""
        with self._condition:
            self._admit(len(rows), len(self._waiting), "sequences")
            self._waiting.extend(rows)
            self.observe("queue_depth", len(self._waiting))
            self._condition.notify()

    @property
    def running(self) -> int:
        return len(self._rows)

    # --- the scheduler's thread -------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._condition:
                while not self._waiting and not self._rows and not self._closing:
                    self._condition.wait()
                if self._closing and not self._waiting and not self._rows:
                    return
                room = self.max_batch_size - len(self._rows)
                joining = [self._waiting.popleft() for _ in range(min(room, len(self._waiting)))]
                self.observe("queue_depth", len(self._waiting))
            try:
                self._leave(time.monotonic())
                if joining:
                    self._join([row for row in joining if not self._ended(row)])
                if self._rows:
                    self._step()
            except Exception as error:  # the engine failed: fail its rows, keep serving
                log.exception("generation failed")
                for row in self._rows + joining:
                    if not row.finished:
                        row.finished = True
                        row.emit(Failed(error))
                self._rows, self._last, self._state = [], None, None

    def _ended(self, row: GenerationRow) -> bool:
        """Ends a cancelled or timed-out row that has not joined yet."""
        reason = "cancelled" if row.cancelled else None
        if reason is None and time.monotonic() > row.deadline:
            reason = "timeout"
        if reason:
            self._finish(row, reason)
        return reason is not None

    def _join(self, rows: list[GenerationRow]) -> None:
        """Runs the prompts of `rows` and adds them to the running batch: together, except
        that a row asking for its prompt's log-probabilities runs alone (the logits of
        every position of its prompt, not of a whole batch of prompts, are held)."""
        plain = [row for row in rows if not row.prompt_logprobs]
        if plain:
            self._prefill(plain)
        for row in rows:
            if row.prompt_logprobs:
                self._prefill([row])

    def _prefill(self, rows: list[GenerationRow]) -> None:
        inputs = self.served.start_inputs([r.ids for r in rows])
        if rows[0].prompt_logprobs:
            (row,) = rows
            logits, state = self.engine.start_scoring(inputs)  # (1, T, V)
            ids = np.asarray(row.ids, np.int64)
            scored = logits[0, logits.shape[1] - len(ids) : -1]  # position t predicts t + 1
            chosen, top_ids, top_values = ranked_log_probs(scored, ids[1:], row.top_logprobs)
            row.emit(Prompt(int(ids[0]), [
                Token(int(token), float(lp), list(zip(t.tolist(), v.tolist(), strict=True)))
                for token, lp, t, v in zip(ids[1:], chosen, top_ids, top_values, strict=True)
            ]))  # fmt: skip
            logits = logits[:, -1]
        else:
            logits, state = self.engine.start(inputs)
        tokens = self._draw(rows, logits)
        staying = [i for i, row in enumerate(rows) if not row.finished]
        if not staying:
            return
        state = self.engine.keep(state, staying) if len(staying) < len(rows) else state
        rows, tokens = [rows[i] for i in staying], tokens[staying]
        if self._rows:
            self._state = self.engine.concatenate([self._state, state])
            self._last = np.concatenate([self._last, tokens])
        else:
            self._state, self._last = state, tokens
        self._rows += rows

    def _step(self) -> None:
        self.observe("batch_size", len(self._rows))
        logits, self._state = self.engine.step(self._last, self._state)
        self._last = self._draw(self._rows, logits)
        self._leave(None)

    def _draw(self, rows: list[GenerationRow], logits: np.ndarray) -> np.ndarray:
        """Each row's next token, emitted; a row that ends is marked finished."""
        tokens = np.zeros(len(rows), np.int64)
        for i, row in enumerate(rows):
            tokens[i] = row.strategy.draw(logits[i : i + 1], row.rng)[0]
        most = max(row.top_logprobs for row in rows)
        chosen, top_ids, top_values = ranked_log_probs(logits, tokens, most)  # (B,), (B, most)
        for i, row in enumerate(rows):
            token = int(tokens[i])
            if row.max_new_tokens == 0:  # `echo` of the prompt alone: scored, nothing drawn
                self._finish(row, "length")
                continue
            if token == self.eos_id:
                self._finish(row, "stop")
                continue
            k = row.top_logprobs
            top = list(zip(top_ids[i, :k].tolist(), top_values[i, :k].tolist(), strict=True))
            row.generated += 1
            row.emit(Token(token, float(chosen[i]), top))
            if row.generated >= row.max_new_tokens:
                self._finish(row, "length")
        return tokens

    def _leave(self, now: float | None) -> None:
        """Removes finished, cancelled and (when `now` is given) timed-out rows."""
        for row in self._rows:
            if row.finished:
                continue
            if row.cancelled:
                self._finish(row, "cancelled")
            elif now is not None and now > row.deadline:
                self._finish(row, "timeout")
        keep = [i for i, row in enumerate(self._rows) if not row.finished]
        if len(keep) == len(self._rows):
            return
        if keep:
            self._state = self.engine.keep(self._state, keep)
            self._last = self._last[keep]
            self._rows = [self._rows[i] for i in keep]
        else:
            self._rows, self._last, self._state = [], None, None

    def _finish(self, row: GenerationRow, reason: str) -> None:
        row.finished = True
        row.emit(Finished(reason))


@dataclass(eq=False)
class EncoderJob:
    """Texts of one request: `kind` is `"embed"` or `"classify"`."""

    kind: str
    texts: list[str]
    future: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)


class EncoderBatcher(_Worker):
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

    def submit(self, kind: str, texts: list[str]) -> concurrent.futures.Future:
        """Queues one request's texts; the future resolves to `(embeddings, token counts)`
        (an (N, D) array and a list: `ServedModel.embed_counted`) or their `classify`
        results."""
        job = EncoderJob(kind, texts)
        with self._condition:
            self._admit(len(texts), self._queued_texts, "texts")
            self._waiting.append(job)
            self._queued_texts += len(texts)
            self.observe("queue_depth", self._queued_texts)
            self._condition.notify_all()  # the thread forming a batch, or an idle one
        return job.future

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
                for kind in ("embed", "classify"):
                    self._run(model, kind, [job for job in jobs if job.kind == kind])
            finally:
                with self._condition:
                    self._running -= 1
                    self._condition.notify_all()  # an idle model runs the forming batch

    def _run(self, model, kind: str, jobs: list[EncoderJob]) -> None:
        jobs = [job for job in jobs if job.future.set_running_or_notify_cancel()]
        if not jobs:
            return
        texts = [text for job in jobs for text in job.texts]
        try:
            if kind == "embed":
                vectors, counts = model.embed_counted(texts, self.max_batch_size)
            else:
                results = model.classify(texts, batch_size=self.max_batch_size)
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
