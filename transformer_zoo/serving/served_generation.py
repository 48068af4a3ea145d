"""`ServedGeneration`: the generative half of `ServedModel`, for decoder-only and
encoder-decoder models: prompts or sources in, text (or ids) out.

`generate` and `translate` run `transformer_zoo.generation`'s search over the model's
`CachedEngine`, in batches of similar length ended by stop strings (`text_batches`); the
pieces they start from (`prompt_ids`, `start_ids`, `start_inputs`, `room`, ...) are the
ones the HTTP server's scheduler shares.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from transformer_zoo.errors import InputError
from transformer_zoo.generation import DEFAULT_NEW_TOKENS, GENERATION_BATCH_SIZE
from transformer_zoo.generation.engine import new_tokens
from transformer_zoo.generation.inputs import token_array
from transformer_zoo.generation.search import SearchConfig
from transformer_zoo.generation.search import generate as run_search
from transformer_zoo.generation.search_common import SearchResult, Stopping
from transformer_zoo.serving.detokenize import continuation_text
from transformer_zoo.serving.input_checks import check_lengths, check_sources, text_list
from transformer_zoo.serving.served_base import ServedBase
from transformer_zoo.serving.stops import stop_strings
from transformer_zoo.serving.text_batches import Completion, completions_in_batches
from transformer_zoo.text import is_blank, prompt_ids, source_ids


class ServedGeneration(ServedBase):
    """`ServedModel`'s methods for a generative model (decoder-only or encoder-decoder):
    `generate` and `translate` (as texts, `Completion`s or ids), and the pieces they start
    from."""

    def generate_ids(
        self,
        token_ids,
        max_new_tokens: int | None = None,
        padding_mask=None,
        search: SearchConfig | None = None,
        stopping: Stopping | None = None,
    ) -> SearchResult:
        """Continue prompts given as ids: a (B, S) integer array (0 = padding) or id lists,
        with `search` (`Greedy()` by default, `Sampling(...)`, `BeamSearch(...)`);
        `stopping` (greedy and sampling) ends rows before EOS (`search_common.Stopping`: what
        `generate`'s `stop` strings use). `max_new_tokens` None: `DEFAULT_NEW_TOKENS` (32),
        cut to the room the longest prompt leaves."""
        self._need("decoder-only", "generate")
        ids, mask = token_array(
            token_ids, "token_ids", self.dims.vocabulary_size, None, padding_mask
        )
        longest = int(mask.sum(1).max())
        max_new_tokens = new_tokens(
            longest, max_new_tokens, self.dims.max_length, DEFAULT_NEW_TOKENS, "prompt"
        )
        inputs = {"token_ids": ids, "padding_mask": mask}
        return self._search(inputs, max_new_tokens, search, stopping)

    def generate(
        self,
        prompts: str | Sequence[str],
        max_new_tokens: int | None = None,
        search: SearchConfig | None = None,
        batch_size: int = GENERATION_BATCH_SIZE,
        stop: str | Sequence[str] | None = None,
        progress: bool | None = False,
    ) -> list[str]:
        """Continue text prompts; returns the text each completion adds to its prompt
        (`" March"`, with the space between: `prompt + completion` reads as the whole
        sequence, as OpenAI's and vLLM's completions do). Up to `batch_size` prompts run
        as one batch; more run in batches of that many prompts of similar length
        (`_completions`). `generate_completions` says, too, whether each ended by itself
        or was cut by the length limit.

        `max_new_tokens`: the most tokens each completion adds; a prompt that leaves less
        room in the context is refused. None: `DEFAULT_NEW_TOKENS` (32), cut to the room
        each prompt leaves (only a prompt that fills the context is refused).

        `stop`: a string or up to `stops.MAX_STOPS` of them (as the HTTP server's
        `stop`). A completion ends before the first stop string in its text (which is
        not returned, as OpenAI's and vLLM's), and with greedy search or sampling its
        generation ends at the token that completes it. Beam search decodes to EOS (or
        `max_new_tokens`) and its text is cut afterwards (its beams are reordered at
        every step: a beam's stop string is no row's end).

        `progress`: a bar of the prompts done on standard error (`progress.progress_bar`;
        None: where standard error is a terminal), for long lists."""
        completions = self.generate_completions(
            prompts, max_new_tokens, search, batch_size, stop, progress
        )
        return [completion.text for completion in completions]

    def generate_completions(
        self,
        prompts: str | Sequence[str],
        max_new_tokens: int | None = None,
        search: SearchConfig | None = None,
        batch_size: int = GENERATION_BATCH_SIZE,
        stop: str | Sequence[str] | None = None,
        progress: bool | None = False,
    ) -> list[Completion]:
        """`generate`'s texts with the reason each ended: a `Completion(text,
        finish_reason)` per prompt, `finish_reason` "stop" (EOS or a stop string) or
        "length" (cut at `max_new_tokens` or the context), as the HTTP server's."""
        return self._completions(
            "generate", prompts, max_new_tokens, search, batch_size, stop, progress
        )

    def translate_ids(
        self,
        source_token_ids,
        max_new_tokens: int | None = None,
        search: SearchConfig | None = None,
        stopping: Stopping | None = None,
    ) -> SearchResult:
        """Translate sources given as ids; the target starts from BOS. `stopping` as in
        `generate_ids`."""
        self._need("encoder-decoder", "translate")
        max_new_tokens = self._target_tokens(max_new_tokens)
        inputs = self.start_inputs(source_token_ids)
        return self._search(inputs, max_new_tokens, search, stopping)

    def translate(
        self,
        sources: str | Sequence[str],
        max_new_tokens: int | None = None,
        search: SearchConfig | None = None,
        batch_size: int = GENERATION_BATCH_SIZE,
        stop: str | Sequence[str] | None = None,
        progress: bool | None = False,
    ) -> list[str]:
        """Translate texts; returns one translation per source, batched and ended by
        `stop` strings as `generate`, with `generate`'s `progress`. `max_new_tokens`
        None: `default_new_tokens`. A blank source (`text.is_blank`: nothing but
        whitespace, zero-width or control characters) is refused. `translate_completions`
        says, too, whether each ended by itself or was cut by the length limit."""
        completions = self.translate_completions(
            sources, max_new_tokens, search, batch_size, stop, progress
        )
        return [completion.text for completion in completions]

    def translate_completions(
        self,
        sources: str | Sequence[str],
        max_new_tokens: int | None = None,
        search: SearchConfig | None = None,
        batch_size: int = GENERATION_BATCH_SIZE,
        stop: str | Sequence[str] | None = None,
        progress: bool | None = False,
    ) -> list[Completion]:
        """`translate`'s texts with the reason each ended, as `generate_completions`."""
        return self._completions(
            "translate", sources, max_new_tokens, search, batch_size, stop, progress
        )

    def _completions(
        self, what: str, texts, max_new_tokens, search, batch_size: int, stop, progress
    ) -> list[Completion]:
        """`generate_completions` or `translate_completions` (`what`):
        `text_batches.completions_in_batches` in this model's output tokenizer, the
        budgets of `start_ids`; a decoder-only completion continues its prompt's text, a
        translation starts afresh."""
        stops = stop_strings(stop)
        ids, budgets = self.start_ids(what, texts, max_new_tokens)
        if what == "generate":
            shown = ("generating", progress, "prompts")

            def run(rows, budget, stopping):
                return self.generate_ids(rows, budget, None, search, stopping)
        else:
            shown = ("translating", progress, "texts")

            def run(rows, budget, stopping):
                return self.translate_ids(rows, budget, search, stopping)

        eos = self.config.special_ids.get("eos")
        continues_prompt = self.family == "decoder-only"
        tokenizer = self.target_tokenizer
        return completions_in_batches(
            ids, budgets, batch_size, run, tokenizer, continues_prompt, eos, search, stops, shown
        )

    # --- the pieces of generation, which the HTTP server's scheduler shares ----------
    def prompt_ids(self, texts: str | Sequence[str]) -> list[list[int]]:
        """The ids a generative model starts from, per text: a decoder-only prompt
        (`[bos]` + pieces; "" too), an encoder-decoder source (pieces + `[eos]`). Raises
        `InputError` naming the first text that does not fit the model (a prompt longer
        than the context: one that fills it is scored, as the server's `echo` with
        `max_tokens` 0 does; `start_ids` checks the room for new tokens), or an empty
        source (`is_blank`: it encodes to no token, and a model would still write)."""
        texts = text_list(texts)
        if self.family == "decoder-only":
            ids = [prompt_ids(self._tokenizer(), text) for text in texts]
        else:
            self._need("encoder-decoder", "translate")
            for index, text in enumerate(texts):
                if is_blank(text):
                    raise InputError("the source is empty: it holds no text to translate", index)
            ids = [source_ids(self._tokenizer(), text) for text in texts]
        self.check_prompt_lengths(ids)
        return ids

    def check_prompt_lengths(self, ids: list[list[int]]) -> None:
        """Raises `InputError` naming the first id list longer than the model reads: a
        decoder-only prompt past the context (one that fills it may be scored), a source
        past the encoder's `max_length`. `prompt_ids` checks a text's ids with it, the
        server the ids a client sent."""
        if self.family == "decoder-only":
            context = self.dims.max_length
            problem = f"does not fit the model's context of {context} tokens (its max_length)"
            check_lengths(ids, context, "prompt", problem)
        else:
            check_sources(ids, self.max_length)

    def start_ids(
        self, what: str, texts: str | Sequence[str], max_new_tokens: int | None
    ) -> tuple[list[list[int]], list[int]]:
        """What `what` ("generate" or "translate") starts from: `prompt_ids` of `texts`,
        each checked before any batch runs to leave room for `max_new_tokens`, and the
        new tokens each may decode (`engine.new_tokens`): `max_new_tokens`, or when it is
        None the default (`DEFAULT_NEW_TOKENS`; a translation's `default_new_tokens`)
        cut to the room each leaves. Raises `InputError` for a model of the other family
        and naming the first text that does not fit (the command line's "line N: ...")."""
        self._need("decoder-only" if what == "generate" else "encoder-decoder", what)
        ids = self.prompt_ids(texts)
        if self.family == "encoder-decoder":
            return ids, [self._target_tokens(max_new_tokens)] * len(ids)
        budgets = []
        for index, row in enumerate(ids):
            try:
                budgets.append(
                    new_tokens(len(row), max_new_tokens, self.dims.max_length, DEFAULT_NEW_TOKENS)
                )
            except InputError as error:
                raise InputError(str(error), index) from None
        return ids, budgets

    def _target_tokens(self, max_new_tokens: int | None) -> int:
        """A translation's new tokens after its one start token: `max_new_tokens`, checked,
        or `default_new_tokens`."""
        return new_tokens(
            1, max_new_tokens, self.dims.max_length, self.default_new_tokens(), "target start"
        )

    def start_inputs(self, rows) -> dict:
        """What `CachedEngine.start` takes for prompts (or sources) given as ids: a (B, S)
        integer array (0 = padding) or id lists."""
        if self.family == "decoder-only":
            ids, mask = token_array(rows, "token_ids", self.dims.vocabulary_size, None)
            return {"token_ids": ids, "padding_mask": mask}
        source, mask = token_array(
            rows, "source_token_ids", self.dims.vocabulary_size, self.max_length
        )
        start = np.full((len(source), 1), self.config.special_ids["bos"], np.int64)
        return {
            "encoder_token_ids": source,
            "encoder_padding_mask": mask,
            "decoder_token_ids": start,
        }

    def room(self, prompt_length: int) -> int:
        """The most tokens a row can generate after `prompt_length` prompt ids (an
        encoder-decoder's target starts from one BOS whatever the source)."""
        used = prompt_length if self.family == "decoder-only" else 1
        return self.dims.max_length - used

    def default_new_tokens(self) -> int:
        """An encoder-decoder's default target budget: the training target length, at
        most the room its decoder's context leaves after the start token."""
        return min(self.config.default_new_tokens(self.dims.max_length), self.room(1))

    def output_text(self, ids) -> str:
        """The text of generated ids (up to the first EOS), in the output tokenizer; an id
        past its vocabulary has none (`detokenize`)."""
        eos = self.config.special_ids.get("eos")
        return continuation_text(self.target_tokenizer, [], ids, eos)

    def _search(self, inputs, max_new_tokens, search, stopping=None) -> SearchResult:
        special = self.config.special_ids
        eos, pad = special.get("eos"), special.get("pad", 0)
        return run_search(self.engine, inputs, max_new_tokens, search, eos, pad, stopping)
