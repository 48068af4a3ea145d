"""Independent references for the server's text: what plain decoding of a whole sequence
gives, without the server's token-by-token detokenizer."""

from __future__ import annotations

import itertools

import numpy as np


def generated(served, tokens) -> list[int]:
    """A row of `SearchResult.tokens` up to its end token."""
    eos = served.config.special_ids.get("eos")
    tokens = [int(t) for t in tokens]
    return tokens[: tokens.index(eos)] if eos in tokens else tokens


def decode(served, ids) -> str:
    """The text of `ids`, every one counted; an id past the tokenizer's vocabulary (a
    model's padded output vocabulary) has none, as transformers decodes it."""
    tokenizer = served.target_tokenizer
    ids = [int(i) for i in ids if int(i) < tokenizer.vocabulary_size]
    return tokenizer.decode(ids, stop_at_eos=False)


def held(served, ids) -> str:
    """The text of `ids` less a last character whose bytes may still come (U+FFFD for
    the first bytes of a UTF-8 character that more bytes could complete)."""
    text = decode(served, ids)
    return text[:-1] if incomplete(served, ids) else text


def incomplete(served, ids) -> bool:
    """Whether the bytes of `ids` end with the first bytes of a UTF-8 character: 1-3
    bytes that are no character yet, and that some 1-3 continuation bytes make one,
    by Python's strict decoder. Only byte-level tokens (`token_bytes`) hold such bytes."""
    token_bytes = getattr(served.target_tokenizer, "token_bytes", None)
    if token_bytes is None:
        return False
    data = b"".join(token_bytes(i) for i in ids if int(i) < served.target_tokenizer.vocabulary_size)
    return any(completable(data[-size:]) for size in (1, 2, 3) if size <= len(data))


# The ends of the ranges of the byte a lead byte may take next (Unicode's table 3-7).
CONTINUATIONS = (0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF)


def completable(part: bytes) -> bool:
    """Whether `part` is no character yet, but some 1-3 continuation bytes make it one."""
    try:
        part.decode("utf-8")
        return False  # characters already
    except UnicodeDecodeError:
        pass
    for size in (1, 2, 3):
        for more in itertools.product(CONTINUATIONS, repeat=size):
            try:
                if len((part + bytes(more)).decode("utf-8")) == 1:
                    return True
            except UnicodeDecodeError:
                continue
    return False


def continuation(served, context, ids) -> str:
    """The text `ids` add after `context` (a decoder-only prompt; [] for a translation):
    the whole sequence decoded, less the context's text (without a character whose bytes
    may still come, which `ids` complete)."""
    context = list(context)
    return decode(served, context + list(ids))[len(held(served, context)) :]


def token_texts(served, context, ids) -> list[str]:
    """What each of `ids` adds to the text, by decoding every prefix of the sequence whole:
    the characters it completes (a prefix's last character whose bytes may still come
    counts for the token that completes it, or for the last token where none does)."""
    context, ids = list(context), list(ids)
    texts = [held(served, context + ids[:i]) for i in range(len(ids))]
    texts.append(decode(served, context + ids) if ids else texts[0])
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
