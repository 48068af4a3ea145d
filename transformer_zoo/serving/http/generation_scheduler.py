"""`GenerationScheduler`: iteration-level (continuous) batching of generation on one
thread per model (`scheduler` says how)."""

from __future__ import annotations

import logging
import time

import numpy as np

from transformer_zoo.generation.search_common import ranked_log_probs
from transformer_zoo.serving.http.generation_row import (
    Failed,
    Finished,
    GenerationRow,
    Prompt,
    Token,
)
from transformer_zoo.serving.http.scheduler import Worker

log = logging.getLogger(__name__)


class GenerationScheduler(Worker):
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
            self._drop_ended()
            self._admit(len(rows), len(self._waiting), "sequences")
            self._waiting.extend(rows)
            self.observe("queue_depth", len(self._waiting))
            self._condition.notify()

    def _drop_ended(self) -> None:
        """Ends the waiting rows whose client went away or whose time ran out (under the
        lock): they kept their places in the queue until the batch had room for them, and
        a new request got 429 meanwhile."""
        if any(row.cancelled or time.monotonic() > row.deadline for row in self._waiting):
            waiting = [row for row in self._waiting if not self._ended(row)]
            self._waiting.clear()
            self._waiting.extend(waiting)

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
        self.observe("batch_size", len(rows))  # an engine run too: the prompts' batch
        inputs = self.served.start_inputs([r.ids for r in rows])
        if rows[0].prompt_logprobs:
            (row,) = rows
            logits, state = self.engine.start_scoring(inputs)  # (1, T, V)
            ids = np.asarray(row.ids, np.int64)
            scored = logits[0, logits.shape[1] - len(ids) : -1]  # position t predicts t + 1
            chosen, top_ids, top_values = ranked_log_probs(scored, ids[1:], row.top_logprobs)
            row.emit(Prompt([
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
