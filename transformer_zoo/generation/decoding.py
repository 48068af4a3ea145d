"""`generate()`: decoding for both generative families, through the shared search code."""

from __future__ import annotations

import weakref

import numpy as np

from transformer_zoo import search
from transformer_zoo.generation.keras_engine import KerasEngine

# Compiled engines are kept per model so that a second call does not trace again.
_ENGINES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def keras_engine(model, use_cache: bool = True) -> KerasEngine:
    """The (cached) `KerasEngine` of `model`."""
    engines = _ENGINES.setdefault(model, {})
    if use_cache not in engines:
        engines[use_cache] = KerasEngine(model, use_cache=use_cache)
    return engines[use_cache]


def generate(
    model,
    inputs,
    max_new_tokens: int,
    strategy: str = "greedy",
    eos_id: int | None = None,
    pad_id: int = 0,
    decoder_start_id: int | None = None,
    use_cache: bool = True,
    **search_kwargs,
) -> search.SearchResult:
    """Generate with a `DecoderOnly` or an `EncoderDecoder`.

    Args:
        model: a `DecoderOnly` or an `EncoderDecoder`.
        inputs: decoder-only: (B, S) prompt ids or `{"token_ids", "padding_mask"}`;
            prompts of different lengths are padded with 0 (left or right) or masked.
            Encoder-decoder: `{"encoder_token_ids", "encoder_padding_mask"}` plus
            `"decoder_token_ids"` (the start tokens) or `decoder_start_id`.
        max_new_tokens: the most tokens generated per row.
        strategy: `"greedy"`, `"sample"` (`temperature`, `top_k`, `top_p`, `seed`) or
            `"beam"` (`num_beams`, `length_penalty`); see `transformer_zoo.search`.
        eos_id: stop a row after this token.
        pad_id: written after a row's EOS.
        decoder_start_id: encoder-decoder: the first target token (BOS) of every row.
        use_cache: decode with the KV cache (False recomputes the whole sequence per
            token; for comparisons only).
        **search_kwargs: the strategy's arguments.

    Returns:
        A `search.SearchResult`: `tokens` (B, N) new tokens only, `scores` (B,).

    Raises:
        ValueError: empty prompts, out-of-range ids, or prompt + `max_new_tokens` longer
            than the model's `max_length`.
    """
    if not isinstance(inputs, dict):
        inputs = {"token_ids": inputs}
    inputs = {key: np.asarray(value) for key, value in inputs.items()}
    if "encoder_token_ids" in inputs and "decoder_token_ids" not in inputs:
        if decoder_start_id is None:
            raise ValueError(
                "An encoder-decoder needs its first target token: pass `decoder_start_id` "
                "(e.g. the BOS id) or `decoder_token_ids`."
            )
        batch = len(inputs["encoder_token_ids"])
        inputs["decoder_token_ids"] = np.full((batch, 1), decoder_start_id, np.int32)
    prefix = "decoder_" if "encoder_token_ids" in inputs else ""
    ids = inputs.get(f"{prefix}token_ids")
    if ids is not None and np.ndim(ids) == 2:
        mask = inputs.get(f"{prefix}padding_mask")
        prompt = int((ids != 0 if mask is None else mask.astype(bool)).sum(1).max(initial=0))
        if prompt + int(max_new_tokens) > model.max_length:
            raise ValueError(
                f"The prompt ({prompt} tokens) plus max_new_tokens={max_new_tokens} exceeds "
                f"the model's max_length={model.max_length}."
            )
    engine = keras_engine(model, use_cache=use_cache)
    return search.generate(
        engine,
        inputs,
        max_new_tokens,
        strategy=strategy,
        eos_id=eos_id,
        pad_id=pad_id,
        **search_kwargs,
    )
