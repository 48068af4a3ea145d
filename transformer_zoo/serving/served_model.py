"""`ServedModel`: text in, text / vectors / labels out, over any of the three engines.

Tokenization and the input formats come from `transformer_zoo.text` (the same functions
training uses), and generation from `transformer_zoo.generation`: the one engine
(`CachedEngine`) and the search code. Only the runner differs: onnxruntime
(`OnnxRunner`), or TensorFlow (`KerasRunner`, `SavedModelRunner`).

Generative inputs longer than the model allows are rejected; encoder-only inputs are
truncated to `max_length`, as in training and as sentence-transformers does.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from transformer_zoo.errors import InputError, is_flag, with_article
from transformer_zoo.generation import GENERATION_BATCH_SIZE
from transformer_zoo.generation.engine import CachedEngine, check_room
from transformer_zoo.generation.inputs import token_array
from transformer_zoo.generation.search import (
    BeamSearch,
    SearchConfig,
    SearchResult,
    Stopping,
)
from transformer_zoo.generation.search import generate as run_search
from transformer_zoo.progress import progress_bar
from transformer_zoo.run_directory import ModelDimensions, RunConfig
from transformer_zoo.serving.detokenize import continuation_text
from transformer_zoo.serving.length_batches import length_batches, sorted_batches
from transformer_zoo.serving.stops import StopText, first_stop, stop_strings
from transformer_zoo.text import pair_ids, prompt_ids, source_ids
from transformer_zoo.text.formats import encoder_rows
from transformer_zoo.text.wordpiece import WordPieceTokenizer

log = logging.getLogger(__name__)  # truncation warnings; the command line shows them


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

    # --- generation -----------------------------------------------------------------
    def generate_ids(
        self,
        token_ids,
        max_new_tokens: int = 32,
        padding_mask=None,
        search: SearchConfig | None = None,
        stopping: Stopping | None = None,
    ) -> SearchResult:
        """Continue prompts given as ids: a (B, S) integer array (0 = padding) or id lists,
        with `search` (`Greedy()` by default, `Sampling(...)`, `BeamSearch(...)`);
        `stopping` (greedy and sampling) ends rows before EOS (`search.Stopping`: what
        `generate`'s `stop` strings use)."""
        self._need("decoder-only", "generate")
        ids, mask = token_array(
            token_ids, "token_ids", self.dims.vocabulary_size, None, padding_mask
        )
        check_room(int(mask.sum(1).max()), max_new_tokens, self.dims.max_length, "prompt")
        inputs = {"token_ids": ids, "padding_mask": mask}
        return self._search(inputs, max_new_tokens, search, stopping)

    def generate(
        self,
        prompts: str | Sequence[str],
        max_new_tokens: int = 32,
        search: SearchConfig | None = None,
        batch_size: int = GENERATION_BATCH_SIZE,
        stop: str | Sequence[str] | None = None,
        progress: bool | None = False,
    ) -> list[str]:
        """Continue text prompts; returns the text each completion adds to its prompt
        (`" March"`, with the space between: `prompt + completion` reads as the whole
        sequence, as OpenAI's and vLLM's completions do). Up to `batch_size` prompts run
        as one batch; more run in batches of that many prompts of similar length
        (`_in_batches`).

        `stop`: a string or up to `stops.MAX_STOPS` of them (as the HTTP server's
        `stop`). A completion ends before the first stop string in its text (which is
        not returned, as OpenAI's and vLLM's), and with greedy search or sampling its
        generation ends at the token that completes it. Beam search decodes to EOS (or
        `max_new_tokens`) and its text is cut afterwards (its beams are reordered at
        every step: a beam's stop string is no row's end).

        `progress`: a bar of the prompts done on standard error (`progress.progress_bar`;
        None: where standard error is a terminal), for long lists."""
        stops = stop_strings(stop)
        ids, max_new_tokens = self.start_ids("generate", prompts, max_new_tokens)
        return self._in_batches(
            ids,
            batch_size,
            lambda rows, stopping: self.generate_ids(rows, max_new_tokens, None, search, stopping),
            search,
            stops,
            ("generating", progress, "prompts"),
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
        if max_new_tokens is None:
            max_new_tokens = self.default_new_tokens()
        check_room(1, max_new_tokens, self.dims.max_length, "target start")
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
        `stop` strings as `generate`, with `generate`'s `progress`."""
        stops = stop_strings(stop)
        ids, max_new_tokens = self.start_ids("translate", sources, max_new_tokens)
        return self._in_batches(
            ids,
            batch_size,
            lambda rows, stopping: self.translate_ids(rows, max_new_tokens, search, stopping),
            search,
            stops,
            ("translating", progress, "texts"),
        )

    def _in_batches(
        self,
        ids: list[list[int]],
        batch_size: int,
        run,
        search=None,
        stops=(),
        shown=("", False, "texts"),
    ) -> list[str]:
        """The output text of each id list, in input order, from `run(id lists,
        stopping)` (a `SearchResult`) called on batches of at most `batch_size`: all of
        them at once when they fit, else batches of similar lengths, sorted so that each
        pads little. A row's output does not depend on its batch (a seeded sampling gives
        each row a generator of its own), except with int8 weights, whose activation
        scale spans the batch (`export.quantize`).

        With `stops`, each row's text is followed as its tokens come (`StopText`) and the
        row ends when a stop string is complete (`stopping`); beam search's finished
        text is cut instead. `shown`: `(what, progress, unit)` of the bar
        that counts the rows done (`progress.progress_bar`)."""
        _check_batch_size(batch_size)
        if len(ids) <= batch_size:
            batches = [list(range(len(ids)))]
        else:
            batches = sorted_batches([len(row) for row in ids], batch_size)
        texts = [""] * len(ids)
        with progress_bar(len(ids), *shown) as bar:
            for rows in batches:
                followed: list[StopText] = []  # each row's text as the search goes
                stopping = None
                if stops and not isinstance(search, BeamSearch):
                    followed = [self._stop_text(ids[i], stops) for i in rows]
                    stopping = _stopping(followed)
                result = run([ids[i] for i in rows], stopping)
                for j, (i, tokens) in enumerate(zip(rows, result.tokens, strict=True)):
                    texts[i] = self._completion_text(ids[i], tokens)
                    at = first_stop(texts[i], stops) if stops else None
                    if at is not None:  # where the row stopped (beam search: cut afterwards)
                        texts[i] = texts[i][:at]
                    elif followed and followed[j].stopped:  # the tokens' texts held it,
                        texts[i] = followed[j].text  # the whole decoded text not (unseen yet)
                bar.update(len(rows))
        return texts

    def _stop_text(self, start_ids: list[int], stops: list[str]) -> StopText:
        """A row's text as its tokens come, after the prompt it continues (a
        decoder-only model's) or from nothing (a translation's)."""
        context = start_ids if self.family == "decoder-only" else []
        return StopText(self.target_tokenizer, context, stops)

    def _completion_text(self, start_ids, tokens) -> str:
        """A decoder-only completion as it continues its prompt's text; a translation's
        text (its target starts afresh)."""
        if self.family == "decoder-only":
            eos = self.config.special_ids.get("eos")
            return continuation_text(self.target_tokenizer, start_ids, tokens, eos)
        return self.output_text(tokens)

    # --- the pieces of generation, which the HTTP server's scheduler shares ----------
    def prompt_ids(self, texts: str | Sequence[str]) -> list[list[int]]:
        """The ids a generative model starts from, per text: a decoder-only prompt
        (`[bos]` + pieces; "" too), an encoder-decoder source (pieces + `[eos]`). Raises
        `InputError` naming the first text that does not fit the model, or an empty
        (blank) source."""
        texts = _texts(texts)
        if self.family == "decoder-only":
            ids = [prompt_ids(self._tokenizer(), text) for text in texts]
            context = self.dims.max_length
            problem = f"leaves no room in the context of {context} tokens"
            _check_lengths(ids, context - 1, "prompt", problem)
        else:
            self._need("encoder-decoder", "translate")
            for index, text in enumerate(texts):
                if not text.strip():  # nothing to translate; a model would still write
                    raise InputError("the source is empty", index)
            ids = [source_ids(self._tokenizer(), text) for text in texts]
            check_sources(ids, self.max_length)
        return ids

    def start_ids(
        self, what: str, texts: str | Sequence[str], max_new_tokens: int | None
    ) -> tuple[list[list[int]], int]:
        """What `what` ("generate" or "translate") starts from: `prompt_ids` of `texts`,
        each checked before any batch runs to leave room for `max_new_tokens` (for
        translate None means `default_new_tokens`), and that number. Raises `InputError`
        for a model of the other family and naming the first text that does not fit (the
        command line's "line N: ...")."""
        self._need("decoder-only" if what == "generate" else "encoder-decoder", what)
        ids = self.prompt_ids(texts)
        if self.family == "encoder-decoder":
            if max_new_tokens is None:
                max_new_tokens = self.default_new_tokens()
            check_room(1, max_new_tokens, self.dims.max_length, "target start")
            return ids, max_new_tokens
        for index, row in enumerate(ids):
            try:
                check_room(len(row), max_new_tokens, self.dims.max_length, "prompt")
            except InputError as error:
                raise InputError(str(error), index) from None
        return ids, max_new_tokens

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
        """An encoder-decoder's default target budget: the training target length."""
        return self.config.default_new_tokens(self.dims.max_length)

    def output_text(self, ids) -> str:
        """The text of generated ids (up to the first EOS), in the output tokenizer."""
        return self.target_tokenizer.decode(ids)

    def _search(self, inputs, max_new_tokens, search, stopping=None) -> SearchResult:
        special = self.config.special_ids
        eos, pad = special.get("eos"), special.get("pad", 0)
        return run_search(self.engine, inputs, max_new_tokens, search, eos, pad, stopping)

    # --- encoder-only -----------------------------------------------------------------
    def encode(self, texts: str | Sequence[str], text_pairs: Sequence[str] | None = None) -> dict:
        """The graph's outputs for a batch of texts (`last_hidden_state`, …) plus the
        `attention_mask` used."""
        self._need("encoder-only", "encode")
        feeds = self._encoder_feeds(self._tokenize(_texts(texts), text_pairs))
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
        self._need("encoder-only", "embed")
        texts = _texts(texts)
        _check_batch_size(batch_size)
        if normalize is not None and not is_flag(normalize):
            raise InputError(f"`normalize` must be True, False or None. Received: {normalize!r}")
        pooled_in_graph = self.config.normalizes_embeddings  # what `sentence_embedding` is
        normalize = pooled_in_graph if normalize is None else normalize
        encoded = self._tokenize(texts, None)
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
        with progress_bar(len(encoded), what, progress, "texts") as bar:
            for rows in length_batches(lengths, batch_size, padding_free=padding_free):
                feeds = self._encoder_feeds([encoded[i] for i in rows])
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
        self._need("encoder-only", "classify")
        if self.config.task != "classification":
            raise InputError(f"This model's task is {self.config.task!r}, not classification.")
        texts = _texts(texts)
        _check_batch_size(batch_size)
        if text_pairs is not None:  # a string is one pair, as one text is one text
            text_pairs = _texts(text_pairs, "text_pairs")
            if len(text_pairs) != len(texts):
                raise InputError(
                    f"`text_pairs` needs one entry per text: {len(text_pairs)} for {len(texts)}."
                )
        labels = self.config.label_names
        encoded = self._tokenize(texts, text_pairs)
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
        lengths = self._tokenizer_lengths(_texts(texts))
        return [min(n, self.max_length) for n in lengths]

    def encoder_lengths(
        self, texts: Sequence[str], text_pairs: Sequence[str] | None = None
    ) -> list[int]:
        """How many tokens each text (or pair) has before an encoder-only model cuts it
        to `max_length`: what `embed` and `classify` warn of (`warn_truncated`)."""
        self._need("encoder-only", "encoder_lengths")
        pairs = None if text_pairs is None else _texts(text_pairs, "text_pairs")
        return [len(ids) for ids, _ in encoder_rows(self._tokenizer(), _texts(texts), pairs)]

    def _tokenizer_lengths(self, texts: list[str]) -> list[int]:
        tokenizer = self._tokenizer()
        if isinstance(tokenizer, WordPieceTokenizer):
            return tokenizer.lengths(texts)
        return [len(pair_ids(tokenizer, text, None)[0]) for text in texts]

    def _tokenize(self, texts: list[str], text_pairs) -> list[tuple[list[int], list[int]]]:
        """`(ids, segment ids)` per text (or pair), truncated to `max_length`."""
        rows = encoder_rows(self._tokenizer(), texts, text_pairs)
        warn_truncated([len(ids) for ids, _ in rows], self.max_length)
        if all(len(ids) <= self.max_length for ids, _ in rows):
            return rows
        return encoder_rows(self._tokenizer(), texts, text_pairs, self.max_length)

    def _encoder_feeds(self, encoded: list[tuple[list[int], list[int]]]) -> dict:
        """The graph's feeds for tokenized texts, padded to the longest."""
        pad = self.tokenizer.pad_id
        width = max(len(ids) for ids, _ in encoded)
        feeds = {"input_ids": np.full((len(encoded), width), pad, np.int64)}
        feeds["attention_mask"] = np.zeros_like(feeds["input_ids"])
        segments = np.zeros_like(feeds["input_ids"])
        for row, (ids, segment) in enumerate(encoded):
            feeds["input_ids"][row, : len(ids)] = ids
            feeds["attention_mask"][row, : len(ids)] = 1
            segments[row, : len(ids)] = segment
        if self.dims.type_vocabulary_size:
            feeds["token_type_ids"] = segments
        return feeds

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


POOLING_OUTPUTS = ("sentence_embedding", "last_hidden_state")


def _stopping(rows: list[StopText]) -> Stopping:
    """The `search.Stopping` of a batch's rows: a row ends when its token completes a
    stop string (its `StopText` reads each token a live row generates)."""

    def stopping(tokens: np.ndarray, live: np.ndarray) -> np.ndarray:
        return np.array(
            [bool(live[j]) and row.add(int(tokens[j])) for j, row in enumerate(rows)], bool
        )

    return stopping


def class_scores(logits: np.ndarray, problem_type: str | None) -> np.ndarray:
    """(N, C) scores of (N, C) logits as transformers' `TextClassificationPipeline` gives
    them for a model's `problem_type`: `"regression"`, the logits themselves;
    `"multi_label_classification"`, or a single label (cross-encoder/ms-marco-*), a sigmoid
    per label; otherwise a softmax over the labels."""
    logits = np.asarray(logits, np.float64)
    if problem_type == "regression":
        scores = logits
    elif problem_type == "multi_label_classification" or logits.shape[-1] == 1:
        scores = np.exp(-np.logaddexp(0.0, -logits))  # sigmoid, without overflow
    else:
        shifted = np.exp(logits - logits.max(-1, keepdims=True))
        scores = shifted / shifted.sum(-1, keepdims=True)
    return scores.astype(np.float32)


def mean_pool(sequence: np.ndarray, mask: np.ndarray, normalize: bool = True) -> np.ndarray:
    """Masked mean over tokens of (B, S, D), then L2 normalisation: (B, D). The clamps
    (1e-9 tokens, 1e-12 norm) are sentence-transformers' and `EncoderOnly.embed`'s."""
    weights = mask.astype(np.float32)  # (B, S)
    # The masked sum as one (B, 1, S) @ (B, S, D) product: about half the time of
    # multiplying and summing (B, S, D), which counts at batch 1.
    pooled = np.matmul(weights[:, None, :], sequence)[:, 0]
    pooled /= np.maximum(weights.sum(1, keepdims=True), 1e-9)
    if normalize:
        norms = np.sqrt(np.einsum("ij,ij->i", pooled, pooled))[:, None]
        pooled /= np.maximum(norms, 1e-12)
    return pooled


def _texts(texts, name: str = "texts") -> list[str]:
    """`texts` (a string is one text) as a list of strings, each valid Unicode.

    Raises:
        InputError: no text, a text that is not a string (named by its index), or one
            that holds a lone surrogate: what Python makes of a command-line argument's
            bytes that are not UTF-8, which no tokenizer can read.
    """
    if isinstance(texts, str):
        texts = [texts]
    texts = list(texts)
    if not texts:
        raise InputError("No input text was given.")
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise InputError(
                f"`{name}` must hold strings. Received: {type(text).__name__} {text!r:.40}",
                index,
            )
        if not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as error:
                character = text[error.start]
                raise InputError(
                    f"the text is not valid UTF-8: it holds {character!r} at character "
                    f"{error.start + 1}, a lone surrogate (an undecodable byte)",
                    index,
                ) from None
    return texts


def check_sources(rows: list[list[int]], max_length: int) -> None:
    """Raises `InputError` naming the first source (encoder ids) longer than the model's
    `max_length`: `translate`'s check, which the attention pictures make too."""
    _check_lengths(rows, max_length, "source", f"is longer than the model's {max_length}")


def _check_lengths(rows: list[list[int]], limit: int, what: str, problem: str) -> None:
    """Raises `InputError` naming the first input whose ids are longer than `limit`."""
    for index, row in enumerate(rows):
        if len(row) > limit:
            raise InputError(f"the {what} is {len(row)} tokens long and {problem}", index)


def warn_truncated(lengths: list[int], limit: int) -> None:
    """Logs one warning (on `log`) for the inputs longer than `limit` tokens, which were
    cut, numbered from 1 in `lengths`."""
    cut = [i for i, n in enumerate(lengths) if n > limit]
    if cut:
        shown = ", ".join(str(i + 1) for i in cut[:5]) + (", ..." if len(cut) > 5 else "")
        log.warning(
            "%d of %d inputs were longer than the model's %d tokens and were cut to it (inputs %s)",
            len(cut),
            len(lengths),
            limit,
            shown,
        )


def _check_batch_size(batch_size) -> None:
    if (
        not isinstance(batch_size, (int, np.integer))
        or isinstance(batch_size, bool)
        or batch_size < 1
    ):
        raise InputError(f"`batch_size` must be a positive integer. Received: {batch_size!r}")
