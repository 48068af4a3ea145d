"""The two passes of an evaluation (`evaluate`) over its examples, in batches of similar
length, each with its progress bar: decoding (`predict`: the translations, completions or
class labels it scores) and teacher forcing (`token_scores`: token accuracy, loss and
perplexity of the references)."""

from __future__ import annotations

import itertools

import numpy as np

from transformer_zoo.data.examples import TextStream
from transformer_zoo.errors import count as counted
from transformer_zoo.generation.alignment import padded
from transformer_zoo.generation.search import SearchConfig
from transformer_zoo.generation.search_common import log_softmax
from transformer_zoo.progress import progress_bar
from transformer_zoo.serving.length_batches import sorted_batches
from transformer_zoo.text.formats import (
    language_model_example,
    prompt_ids,
    source_ids,
    stream_starts,
    stream_window,
    translation_example,
)

BATCH_SIZE = 256
COMPLETION_TOKENS = 64  # the most tokens a decoder-only completion may take


def predict(
    served, examples, search: SearchConfig | None = None, progress: bool | None = None
) -> list[str] | None:
    """What the evaluation scores, in input order: translations, completions of the
    prompts (None for plain text, which has none), both decoded with `search` (default
    greedy), or class labels. `progress`: as `evaluate`'s."""
    if served.family == "decoder-only" and not any(e.prompt for e in examples):
        return None
    if served.family == "encoder-only":  # one call: one truncation warning, its own bar
        pairs = [e.text2 or "" for e in examples] if any(e.text2 for e in examples) else None
        texts = [e.text for e in examples]
        results = served.classify(texts, pairs, batch_size=BATCH_SIZE, progress=progress)
        return [r["label"] for r in results]
    with progress_bar(len(examples), "decoding", progress) as bar:
        if served.family == "encoder-decoder":
            return _translate(served, [e.source for e in examples], search, bar)
        return _complete(served, [e.prompt for e in examples], search, bar)


def _translate(served, sources: list[str], search, bar) -> list[str]:
    rows = [source_ids(served.tokenizer, s, served.max_length) for s in sources]
    context = served.dims.max_length
    texts = [""] * len(rows)
    for batch in sorted_batches([len(row) for row in rows], BATCH_SIZE):
        caps = [min(context - 1, 2 * len(rows[i]) + 16) for i in batch]
        result = served.translate_ids([rows[i] for i in batch], max(caps), search)
        for i, tokens, cap in zip(batch, result.tokens, caps, strict=True):
            texts[i] = served.output_text(tokens[:cap])
        bar.update(len(batch))
    return texts


def _complete(served, prompts: list[str], search, bar) -> list[str]:
    rows = [prompt_ids(served.tokenizer, p, served.max_length) for p in prompts]
    context = served.dims.max_length
    room = [min(COMPLETION_TOKENS, context - len(row)) for row in rows]
    texts = [""] * len(rows)
    for batch in sorted_batches([len(row) for row in rows], BATCH_SIZE):
        # Each prompt may run as far as its own room, whatever it is batched with: the
        # batch (sorted by length) runs in groups of equal room, which is one group unless
        # prompts come within COMPLETION_TOKENS of the context.
        for space, group in itertools.groupby(batch, key=lambda i: room[i]):
            group = list(group)
            if space > 0:  # prompts that fill the context leave nothing to complete
                result = served.generate_ids([rows[i] for i in group], space, search=search)
                for i, tokens in zip(group, result.tokens, strict=True):
                    texts[i] = served.output_text(tokens)
        bar.update(len(batch))
    return texts


def token_scores(
    served, examples, progress: bool | None = None, windows_limit: int | None = None
) -> dict[str, float]:
    """Teacher-forced token accuracy, loss and perplexity (no label smoothing) over the
    label tokens the training loss covers; of a token stream, over its first
    `windows_limit` windows (None: all)."""
    length = served.max_length
    windows = None
    if isinstance(examples[0], TextStream):
        ids = np.concatenate([e.token_ids(served.tokenizer) for e in examples]).tolist()
        bos = served.tokenizer.bos_id
        starts = stream_starts(len(ids), length)[:windows_limit]
        rows = [stream_window(ids, s, length, bos_id=bos) for s in starts]
        windows = len(rows)
        if not rows:
            raise ValueError(
                f"The text holds {counted(len(ids), 'token')}: fewer than one window of {length}."
            )
    elif served.family == "encoder-decoder":
        rows = [
            translation_example(
                served.tokenizer, served.target_tokenizer, e.source, e.target, length, length
            )
            for e in examples
        ]
    else:
        rows = [
            language_model_example(served.tokenizer, e.prompt, e.completion, length)
            for e in examples
        ]
    hits, nll, count = 0, 0.0, 0
    with progress_bar(len(rows), "teacher forcing", progress) as bar:
        for batch in sorted_batches([len(row[-1]) for row in rows], BATCH_SIZE):
            # Id lists, masked by their lengths: an imported model's id 0 is a token
            # (Marian's </s>, GPT-2's `!`), not padding.
            *inputs, labels = ([rows[i][j] for i in batch] for j in range(len(rows[0])))
            if served.family == "encoder-decoder":
                feeds = {"encoder_token_ids": inputs[0], "decoder_token_ids": inputs[1]}
            else:
                feeds = {"token_ids": inputs[0]}
            logp = log_softmax(served.engine.forward(feeds))  # (B, T, V)
            labels, scored = padded(labels)
            if served.family == "decoder-only" and windows is None:
                scored &= labels != 0  # a prompt's tokens are not trained on (label 0)
            picked = np.take_along_axis(logp, labels[..., None], axis=-1)[..., 0]
            hits += int((logp.argmax(-1) == labels)[scored].sum())
            nll -= float(picked[scored].sum())
            count += int(scored.sum())
            bar.update(len(batch))
    if not count:
        raise ValueError("No example has a token to score.")
    scores = {
        "token_accuracy": hits / count,
        "loss": nll / count,
        "perplexity": float(np.exp(nll / count)),
    }
    return scores if windows is None else {**scores, "windows": windows, "tokens": count}
