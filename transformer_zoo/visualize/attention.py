"""Attention pictures of a trained translation run: what `transformer-zoo attention` draws.

- `attention.png`: cross-attention of the last decoder layer, one panel per head, source
  tokens (columns) against the generated target tokens (rows; row t is the step that
  produced token t).
- `causal_mask.png`: the first decoder layer's masked self-attention (head 1): scores
  where a position may look, −∞ above the diagonal.
"""

from __future__ import annotations

import os

import numpy as np

from transformer_zoo.visualize.plots import plot_attention_heads, plot_causal_mask


def _piece(tokenizer, token_id: int, special: dict) -> str:
    names = {v: f"<{k}>" for k, v in special.items() if v is not None}
    if token_id in names:
        return names[token_id]
    if token_id >= tokenizer.vocabulary_size:  # a padded output vocabulary's: no text
        return f"<{token_id}>"
    if hasattr(tokenizer, "id_to_piece"):  # ours (SentencePiece)
        piece = tokenizer.id_to_piece(int(token_id))
    else:  # an imported Marian run's: its vocabulary's pieces
        piece = tokenizer.pieces.get(int(token_id), "<unk>")
    return piece.replace("▁", "_")


def draw_attention(model, source_tokenizer, target_tokenizer, special_ids: dict, text: str,
                   out_dir: str, max_new_tokens: int | None = None) -> dict:  # fmt: skip
    """Translate `text` greedily with `model` (an `EncoderDecoder`) and draw both pictures.

    The source is masked as `ServedModel.translate` masks it, by its length: every id is a
    token (Marian's `</s>` is id 0), so the picture and its translation are `translate`'s.

    Args:
        max_new_tokens: the most target tokens (default: as many as the model allows).

    Returns:
        `{"translation", "attention", "causal_mask"}`: the text and the two PNG paths.
    """
    from transformer_zoo.generation import generate
    from transformer_zoo.models.attention_weights import attention_weights
    from transformer_zoo.serving.detokenize import continuation_text
    from transformer_zoo.serving.input_checks import check_sources
    from transformer_zoo.text import is_blank, source_ids

    if is_blank(text):  # as `translate` refuses it: a model would still write
        raise ValueError("`text` is empty: give a sentence to translate.")
    source = np.array([source_ids(source_tokenizer, text)], np.int32)
    check_sources(source.tolist(), model.max_length)  # as `translate` says it
    # An `ids != 0` mask, `generate`'s and `attention_weights`' default for an array,
    # would hide an imported Marian run's `</s>` (id 0), which `translate` attends to.
    source_mask = np.ones_like(source, bool)
    room = model.max_length - 1
    budget = room if max_new_tokens is None else min(max_new_tokens, room)
    result = generate(
        model,
        {"encoder_token_ids": source, "encoder_padding_mask": source_mask},
        budget,
        eos_id=special_ids["eos"],
        decoder_start_id=special_ids["bos"],
    )
    # After EOS the search writes padding only: the text is the tokens up to EOS.
    generated = [int(t) for t in result.tokens[0]]
    if special_ids["eos"] in generated:
        generated = generated[: generated.index(special_ids["eos"]) + 1]
    decoder_inputs = np.array([[special_ids["bos"]] + generated[:-1]], np.int32)
    weights = attention_weights(model, source, decoder_inputs, source_mask)
    source_labels = [_piece(source_tokenizer, t, special_ids) for t in source[0]]
    produced = [_piece(target_tokenizer, t, special_ids) for t in generated]
    inputs = [_piece(target_tokenizer, t, special_ids) for t in decoder_inputs[0]]
    os.makedirs(out_dir, exist_ok=True)
    attention = plot_attention_heads(
        weights["cross"][-1][0],
        source_labels,
        produced,
        os.path.join(out_dir, "attention.png"),
        title=f"Cross-attention, last decoder layer: “{text.strip()}”",
    )
    with np.errstate(divide="ignore"):
        log_weights = np.log(weights["self"][0][0, 0].astype(np.float64))
    # The causal mask's −∞ are exact zeros after the softmax; anything else is a real score.
    log_weights[np.triu(np.ones_like(log_weights, bool), k=1)] = -np.inf
    causal = plot_causal_mask(
        log_weights,
        inputs,
        os.path.join(out_dir, "causal_mask.png"),
        title="Masked self-attention: decoder layer 1, head 1",
    )
    translation = continuation_text(target_tokenizer, [], generated, special_ids["eos"])
    return {"translation": translation, "attention": attention, "causal_mask": causal}


def draw_run_attention(run_dir: str, text: str, out_dir: str | None = None, model=None) -> dict:
    """`draw_attention` for the `model.keras` of a translation run directory (or `model`,
    that file already loaded, e.g. by the Keras engine: no second load or trace)."""
    from transformer_zoo.errors import with_article
    from transformer_zoo.files import check_writable
    from transformer_zoo.models.saving import load_run_model
    from transformer_zoo.run_directory import RunError, load_run_config
    from transformer_zoo.text import load_tokenizers

    config = load_run_config(run_dir)
    if config.family != "encoder-decoder":
        raise RunError(
            f"{run_dir!r} holds {with_article(config.family)} model; attention pictures need an "
            "encoder-decoder (translation) run."
        )
    out_dir = out_dir or run_dir
    existing = out_dir  # the folder `makedirs` would start from; checked before the model loads
    while not os.path.exists(existing):
        existing = os.path.dirname(existing) or "."
    if not os.path.isdir(existing):
        under = "" if existing == out_dir else f" lies under {existing}, which"
        raise ValueError(f"--out {out_dir}{under} is a file: name a directory for the pictures.")
    try:
        check_writable(out_dir)  # a read-only run directory gave a raw errno after the load
    except OSError as error:
        raise ValueError(
            f"{error.strerror}: name a directory for the pictures with --out DIR."
        ) from None
    if model is None:
        model = load_run_model(run_dir)
    source_tokenizer, target_tokenizer = load_tokenizers(run_dir, config)
    budget = config.default_new_tokens(model.max_length)  # `translate`'s
    return draw_attention(
        model,
        source_tokenizer,
        target_tokenizer,
        config.special_ids,
        text,
        out_dir,
        budget,
    )
