"""The attention weights of an `EncoderDecoder` on one teacher-forced pass, for pictures."""

from __future__ import annotations

import numpy as np
from keras import ops

from transformer_zoo.models.encoder_decoder import EncoderDecoder


def attention_weights(
    model: EncoderDecoder, encoder_token_ids, decoder_token_ids, encoder_padding_mask=None
) -> dict[str, list[np.ndarray]]:
    """Self- and cross-attention probabilities of every decoder block.

    The decoder runs once over `decoder_token_ids` (e.g. `<bos>` + a generated
    translation), exactly as in `EncoderDecoder.call`, with each block asked for its
    attention scores.

    Args:
        model: the translation model.
        encoder_token_ids: (B, S) source ids.
        decoder_token_ids: (B, T) target-side ids.
        encoder_padding_mask: (B, S); defaults to ids != 0.

    Returns:
        `{"self": [(B, H, T, T)] * L, "cross": [(B, H, T, S)] * L}` as float32 numpy,
        one entry per decoder block, first block first.
    """
    if not isinstance(model, EncoderDecoder):
        raise ValueError(f"`model` must be an EncoderDecoder. Received: {type(model).__name__}")
    source = ops.convert_to_tensor(np.asarray(encoder_token_ids, "int32"))
    target = ops.convert_to_tensor(np.asarray(decoder_token_ids, "int32"))
    if encoder_padding_mask is None:
        encoder_padding_mask = ops.not_equal(source, 0)
    memory = model.encode(source, encoder_padding_mask)
    x = model.decoder_embeddings(target)  # (B, T, D)
    weights = {"self": [], "cross": []}
    for block in model.decoder_blocks:
        x, scores = block.call_with_attention_scores(
            x,
            context=memory,
            padding_mask=ops.not_equal(target, 0),
            context_padding_mask=encoder_padding_mask,
        )
        for kind, probabilities in (
            ("self", scores.self_attention),
            ("cross", scores.cross_attention),
        ):
            weights[kind].append(np.asarray(ops.convert_to_numpy(probabilities), np.float32))
    return weights
