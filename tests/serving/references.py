"""Independent references for the server's text: what plain decoding of a whole sequence
gives, without the server's token-by-token detokenizer."""

from __future__ import annotations

import numpy as np


def generated(served, tokens) -> list[int]:
    """A row of `SearchResult.tokens` up to its end token."""
    eos = served.config.special_ids.get("eos")
    tokens = [int(t) for t in tokens]
    return tokens[: tokens.index(eos)] if eos in tokens else tokens


def decode(served, ids) -> str:
    return served.target_tokenizer.decode([int(i) for i in ids], stop_at_eos=False)


def continuation(served, context, ids) -> str:
    """The text `ids` add after `context` (a decoder-only prompt; [] for a translation):
    the whole sequence decoded, less the context's text, less a last character whose
    bytes never all came (U+FFFD at the end), as vLLM leaves it out."""
    context = list(context)
    return decode(served, context + list(ids))[len(decode(served, context)) :].rstrip("\ufffd")


def token_texts(served, context, ids) -> list[str]:
    """What each of `ids` adds to the text, by decoding every prefix of the sequence whole:
    the characters it completes (a prefix's trailing U+FFFD is a character whose bytes are
    still to come, so it counts for the token that completes it)."""
    context, ids = list(context), list(ids)
    texts = [decode(served, context + ids[:i]).rstrip("\ufffd") for i in range(len(ids) + 1)]
    return [after[len(before) :] for before, after in zip(texts, texts[1:], strict=False)]


def log_softmax(logits) -> np.ndarray:
    x = np.asarray(logits, np.float64)
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def decoder_log_probs(served, ids) -> np.ndarray:
    """(len(ids), V) log-probabilities of the next token after each prefix of `ids`, from
    one full pass of the decoder-only graph (not the cached steps the server decodes with)."""
    logits = served.engine.forward(
        {"token_ids": np.array([ids]), "padding_mask": np.ones((1, len(ids)), bool)}
    )[0]
    return log_softmax(logits)


def completions(served, prompts, max_new_tokens: int, search=None) -> list[str]:
    """The text the server owes each prompt: `ServedModel`'s tokens for it alone, as the
    continuation of the prompt (decoder-only) or a translation (encoder-decoder)."""
    texts = []
    for ids in served.prompt_ids(prompts):
        if served.family == "decoder-only":
            result, context = served.generate_ids([ids], max_new_tokens, search=search), ids
        else:
            result, context = served.translate_ids([ids], max_new_tokens, search=search), []
        texts.append(continuation(served, context, generated(served, result.tokens[0])))
    return texts
