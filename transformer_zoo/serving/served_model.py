"""`ServedModel`: text in, text / vectors / labels out, over any of the three engines.

Tokenization and the input formats come from `transformer_zoo.text` (the same functions
training uses), and generation from `transformer_zoo.generation`: the one engine
(`CachedEngine`) and the search code. Only the runner differs: onnxruntime
(`OnnxRunner`), or TensorFlow (`KerasRunner`, `SavedModelRunner`).

Generative inputs longer than the model allows are rejected; encoder-only inputs are
truncated to `max_length`, as in training and as sentence-transformers does.

The checks of its inputs live in `input_checks`, the numpy side of an encoder-only model
(feeds, pooling, class scores) in `encoding`, and the batching of generated text with its
stop strings in `text_batches`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from transformer_zoo.errors import InputError, is_flag, with_article
from transformer_zoo.generation import DEFAULT_NEW_TOKENS, GENERATION_BATCH_SIZE
from transformer_zoo.generation.engine import CachedEngine, new_tokens
from transformer_zoo.generation.inputs import token_array
from transformer_zoo.generation.search import SearchConfig
from transformer_zoo.generation.search import generate as run_search
from transformer_zoo.generation.search_common import SearchResult, Stopping
from transformer_zoo.progress import progress_bar
from transformer_zoo.run_directory import ModelDimensions, RunConfig
from transformer_zoo.serving.detokenize import continuation_text
from transformer_zoo.serving.encoding import (
    POOLING_OUTPUTS,
    class_scores,
    encoder_feeds,
    mean_pool,
    tokenize,
    tokenizer_lengths,
)
from transformer_zoo.serving.input_checks import (
    check_batch_size,
    check_lengths,
    check_sources,
    text_list,
)
from transformer_zoo.serving.length_batches import length_batches
from transformer_zoo.serving.stops import stop_strings
from transformer_zoo.serving.text_batches import Completion, completions_in_batches
from transformer_zoo.text import is_blank, prompt_ids, source_ids
from transformer_zoo.text.formats import encoder_rows


class ServedModel:
    """An exported (or trained) model behind a text interface.

    Args:
        config: the directory's `RunConfig`.
        dims: the model's `ModelDimensions`.
        runner: runs the graphs by name (`OnnxRunner`, `KerasRunner`, `SavedModelRunner`).
        tokenizer: the (source) tokenizer, or None for an id-only model.
        target_tokenizer: an encoder-decoder's target tokenizer (default: `tokenizer`).

    Attributes:
        engine: the `CachedEngine` over `runner` (None for an encoder-only model).
    """

    def __init__(
        self,
        config: RunConfig,
        dims: ModelDimensions,
        runner,
        tokenizer=None,
        target_tokenizer=None,
    ):
        self.config = config
        self.dims = dims
        self.runner = runner
        self.family = config.family
        self.engine = None
        if self.family != "encoder-only":
            self.engine = CachedEngine(runner, dims, self.family)
        self.tokenizer = tokenizer
        self.target_tokenizer = target_tokenizer or tokenizer
        self.max_length = min(config.max_length or dims.max_length, dims.max_length)
        self.reads_pairs = self._reads_pairs()

    # --- generation -----------------------------------------------------------------
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

    # --- encoder-only -----------------------------------------------------------------
    def encode(self, texts: str | Sequence[str], text_pairs: Sequence[str] | None = None) -> dict:
        """The graph's outputs for a batch of texts (`last_hidden_state`, …) plus the
        `attention_mask` used."""
        self._need("encoder-only", "encode")
        encoded = tokenize(
            self._tokenizer(),
            text_list(texts),
            text_pairs,
            self.max_length,
            self.dims.type_vocabulary_size,
        )
        feeds = encoder_feeds(encoded, self.tokenizer.pad_id, self.dims.type_vocabulary_size)
        outputs = self.runner.run("model", feeds)
        return {
            **{k: np.asarray(v) for k, v in outputs.items()},
            "attention_mask": feeds["attention_mask"],
        }

    def embed(
        self,
        texts: str | Sequence[str],
        batch_size: int = 32,
        normalize: bool | None = None,
        progress: bool | None = False,
    ) -> np.ndarray:
        """(N, D) float32 sentence embeddings in input order: the masked mean of
        `last_hidden_state`, L2-normalised where the model's pooling is
        (`RunConfig.normalizes_embeddings`: sentence-transformers' Normalize module, every
        model trained here) or where `normalize` says so. `progress`: as `generate`'s."""
        return self.embed_counted(texts, batch_size, normalize, progress)[0]

    def embed_counted(
        self,
        texts: str | Sequence[str],
        batch_size: int = 32,
        normalize: bool | None = None,
        progress: bool | None = False,
    ) -> tuple[np.ndarray, list[int]]:
        """`embed`'s embeddings, and the tokens the model read of each text (after
        truncation, as `token_counts`), from one tokenization: the server's usage counts."""
        texts, _ = self.check_encoder_texts("embed", texts)
        check_batch_size(batch_size)
        if normalize is not None and not is_flag(normalize):
            raise InputError(f"`normalize` must be True, False or None. Received: {normalize!r}")
        pooled_in_graph = self.config.normalizes_embeddings  # what `sentence_embedding` is
        normalize = pooled_in_graph if normalize is None else normalize
        encoded = tokenize(
            self._tokenizer(), texts, None, self.max_length, self.dims.type_vocabulary_size
        )
        embeddings = np.empty((len(texts), self.dims.hidden_dim), np.float32)
        batches = self._encoder_batches(encoded, batch_size, POOLING_OUTPUTS, "embedding", progress)
        for rows, feeds, outputs in batches:
            if normalize == pooled_in_graph and "sentence_embedding" in outputs:
                # Pooled in the graph: numpy's handful of small operations after a run
                # that has streamed the weights through the caches cost 0.1-0.3 ms.
                embeddings[rows] = outputs["sentence_embedding"]
            else:  # the other normalisation, or an export older than the graph's pooling
                embeddings[rows] = mean_pool(
                    outputs["last_hidden_state"], feeds["attention_mask"], normalize
                )
        return embeddings, [len(ids) for ids, _ in encoded]

    def _reads_pairs(self) -> bool | None:
        """`reads_pairs`: whether `classify` reads text pairs, worked out once, at load.
        True or False as a classifier trained here read them (`run_task.trained_on_pairs`:
        as the run records it or, for a run from before that was recorded, as its
        `--columns` or data say); None where nothing says (an imported checkpoint: a
        cross-encoder reads pairs, a sentence classifier single texts, and either is taken;
        an older run whose data is gone); False for any other model."""
        if self.family != "encoder-only" or self.config.task != "classification":
            return False
        from transformer_zoo.data.run_task import trained_on_pairs

        return trained_on_pairs(self.config)

    def check_encoder_texts(
        self, what: str, texts: str | Sequence[str], text_pairs: Sequence[str] | None = None
    ) -> tuple[list[str], list[str] | None]:
        """What `embed` and `classify` (`what`) check before any batch runs: an
        encoder-only model (a classifier, for "classify"), and for "classify" text pairs
        exactly where the model was trained on them, as a run trained here records it
        (`extra.text_pairs`: a pair model scored a lone text, or a single-text model a
        pair, without a word; a model whose config does not say takes both), as the HTTP
        server does. A blank text is read as `[CLS] [SEP]`, as transformers' pipeline and
        sentence-transformers read "" (the server refuses it, as OpenAI does). Returns
        the texts and pairs as lists (a string is one text, or one pair)."""
        self._need("encoder-only", what)
        if what == "classify" and self.config.task != "classification":
            raise InputError(f"This model's task is {self.config.task!r}, not classification.")
        texts = text_list(texts)
        if text_pairs is not None:
            text_pairs = text_list(text_pairs, "text_pairs")
            if len(text_pairs) != len(texts):
                raise InputError(
                    f"`text_pairs` needs one entry per text: {len(text_pairs)} for {len(texts)}."
                )
        if what == "classify":
            reads_pairs = self.reads_pairs
            if reads_pairs is True and text_pairs is None:
                raise InputError(
                    "This model was trained on text pairs: give each text its second text "
                    "(`text_pairs`; the command line's --pairs)."
                )
            if reads_pairs is False and text_pairs is not None:
                raise InputError(
                    "This model was trained on single texts: it takes no `text_pairs` (the "
                    "command line's --pairs)."
                )
        return texts, text_pairs

    def _encoder_batches(
        self, encoded, batch_size: int, outputs: tuple[str, ...], what: str, progress
    ):
        """`(rows, feeds, outputs)` of the encoder graph over tokenized texts, in batches
        of similar token counts (`length_batches`), each padded only to its longest text,
        so little of the work is spent on padding; `rows` index `encoded`, so that the
        caller puts every result back in input order. Each text is tokenized once (by
        the caller): its length plans the batches, its ids feed them. A bar named `what`
        counts the texts done where `progress` says (as `generate`'s)."""
        lengths = [len(ids) for ids, _ in encoded]
        padding_free = self.runner.padding_free("model")
        pad, type_vocabulary_size = self.tokenizer.pad_id, self.dims.type_vocabulary_size
        with progress_bar(len(encoded), what, progress, "texts") as bar:
            for rows in length_batches(lengths, batch_size, padding_free=padding_free):
                feeds = encoder_feeds([encoded[i] for i in rows], pad, type_vocabulary_size)
                yield rows, feeds, self.runner.run("model", feeds, numpy_outputs=outputs)
                bar.update(len(rows))

    def classify(
        self,
        texts: str | Sequence[str],
        text_pairs: Sequence[str] | None = None,
        batch_size: int = 32,
        progress: bool | None = False,
    ) -> list[dict]:
        """Per text (or text pair): `{"label", "label_id", "score", "probabilities": {label:
        score}}`, in input order, the label the one of the highest score; run in batches of
        at most `batch_size` texts of similar length, as `embed`. The scores are those of
        transformers' text-classification pipeline for the run's `problem_type`
        (`class_scores`): a softmax, a sigmoid per label, or a regression's raw value.
        `progress`: as `generate`'s."""
        texts, text_pairs = self.check_encoder_texts("classify", texts, text_pairs)
        check_batch_size(batch_size)
        labels = self.config.label_names
        encoded = tokenize(
            self._tokenizer(), texts, text_pairs, self.max_length, self.dims.type_vocabulary_size
        )
        logits = np.empty((len(texts), len(labels)), np.float32)
        batches = self._encoder_batches(encoded, batch_size, ("logits",), "classifying", progress)
        for rows, _, outputs in batches:
            logits[rows] = outputs["logits"]
        results = []
        for row in class_scores(logits, self.config.extra.get("problem_type")):
            best = int(row.argmax())
            results.append({
                "label": labels[best],
                "label_id": best,
                "score": float(row[best]),
                "probabilities": {name: float(p) for name, p in zip(labels, row, strict=True)},
            })  # fmt: skip
        return results

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """How many tokens of each text an encoder-only model reads (after truncation)."""
        self._need("encoder-only", "token_counts")
        lengths = tokenizer_lengths(self._tokenizer(), text_list(texts))
        return [min(n, self.max_length) for n in lengths]

    def encoder_lengths(
        self, texts: Sequence[str], text_pairs: Sequence[str] | None = None
    ) -> list[int]:
        """How many tokens each text (or pair) has before an encoder-only model cuts it
        to `max_length`: what `embed` and `classify` warn of (`warn_truncated`)."""
        self._need("encoder-only", "encoder_lengths")
        pairs = None if text_pairs is None else text_list(text_pairs, "text_pairs")
        return [len(ids) for ids, _ in encoder_rows(self._tokenizer(), text_list(texts), pairs)]

    # --- helpers ------------------------------------------------------------------------
    def _need(self, family: str, what: str) -> None:
        if self.family != family:
            raise InputError(
                f"`{what}` needs {with_article(family)} model; this one is {self.family}."
            )

    def _tokenizer(self):
        if self.tokenizer is None:
            raise InputError("This model was exported without a tokenizer: pass token ids.")
        return self.tokenizer
