"""`ServedEncoder`: the encoder-only half of `ServedModel`: texts in, vectors (`embed`)
or labels (`classify`) out.

Texts are tokenized once, truncated to `max_length` (as in training and as
sentence-transformers does), and run in batches of similar length (`length_batches`);
the numpy side (feeds, pooling, class scores) is `encoding`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from transformer_zoo.errors import InputError, is_flag
from transformer_zoo.progress import progress_bar
from transformer_zoo.serving.encoding import (
    POOLING_OUTPUTS,
    class_scores,
    encoder_feeds,
    mean_pool,
    tokenize,
    tokenizer_lengths,
)
from transformer_zoo.serving.input_checks import check_batch_size, text_list
from transformer_zoo.serving.length_batches import length_batches
from transformer_zoo.serving.served_base import ServedBase
from transformer_zoo.text.formats import encoder_rows


class ServedEncoder(ServedBase):
    """`ServedModel`'s methods for an encoder-only model: `encode`, `embed` and
    `classify`, and the token counts the server reports."""

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
