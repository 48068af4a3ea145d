"""`UncachedEngine`: decoding without a cache, the independent reference of the engine.

Every step runs the model's plain forward pass (`model(inputs)`, teacher-forced) over the
whole sequence so far and reads the logits of each row's last real token. It shares no
code with the cached path but the alignment (no `step`, no cache, rows padded on the
right instead of the left), so tests and benchmarks/generation.py hold `CachedEngine` to it: same logits at
every step, same tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import tensorflow as tf

from transformer_zoo.generation.alignment import right_align
from transformer_zoo.generation.inputs import token_array
from transformer_zoo.models.family import dimensions_of, family_of


@dataclass
class UncachedState:
    """Rows padded on the right: `tokens` (B, L) with each row's real tokens first and
    `padding_mask` (B, L); an encoder-decoder's `source` and `source_mask` (B, S)."""

    tokens: np.ndarray
    padding_mask: np.ndarray
    source: np.ndarray | None = None
    source_mask: np.ndarray | None = None


class UncachedEngine:
    """The `search_common.Engine` protocol by full recomputation (see the module docstring).

    Args:
        model: a `DecoderOnly` or an `EncoderDecoder`.
    """

    def __init__(self, model):
        self.model = model
        self.dims = dimensions_of(model)
        self.is_encoder_decoder = family_of(model) == "encoder-decoder"
        ids = tf.TensorSpec([None, None], tf.int32)
        last = tf.TensorSpec([None], tf.int32)
        if self.is_encoder_decoder:
            self._forward = tf.function(self._translate, input_signature=[ids] * 4 + [last])
        else:
            self._forward = tf.function(self._continue, input_signature=[ids, ids, last])

    def _continue(self, token_ids, padding_mask, last):
        logits = self.model({"token_ids": token_ids, "padding_mask": padding_mask})
        return tf.gather(logits, last, batch_dims=1)  # (B, V): each row's last real token

    def _translate(self, source, source_mask, target, target_mask, last):
        inputs = {
            "encoder_token_ids": source,
            "encoder_padding_mask": source_mask,
            "decoder_token_ids": target,
            "decoder_padding_mask": target_mask,
        }
        return tf.gather(self.model(inputs), last, batch_dims=1)

    def start(self, inputs: dict) -> tuple[np.ndarray, UncachedState]:
        prefix = "decoder_" if self.is_encoder_decoder else ""
        vocabulary = self.dims.output_vocabulary_size
        ids, mask = token_array(
            inputs[f"{prefix}token_ids"],
            f"{prefix}token_ids",
            vocabulary,
            self.dims.max_length,
            inputs.get(f"{prefix}padding_mask"),
        )
        tokens, packed = right_align(ids, mask)
        state = UncachedState(tokens, packed)
        if self.is_encoder_decoder:
            state.source, state.source_mask = token_array(
                inputs["encoder_token_ids"],
                "encoder_token_ids",
                self.dims.vocabulary_size,
                self.dims.max_length,
                inputs.get("encoder_padding_mask"),
            )
        return self._run(state), state

    def step(self, next_tokens: np.ndarray, state: UncachedState):
        # Each row's new token goes right after its last real one.
        rows, lengths = np.arange(len(next_tokens)), state.padding_mask.sum(1)
        tokens = np.pad(state.tokens, ((0, 0), (0, 1)))
        mask = np.pad(state.padding_mask, ((0, 0), (0, 1)))
        tokens[rows, lengths], mask[rows, lengths] = np.asarray(next_tokens).reshape(-1), True
        state = replace(state, tokens=tokens, padding_mask=mask)
        return self._run(state), state

    def reorder(self, state: UncachedState, indices: np.ndarray) -> UncachedState:
        indices = np.asarray(indices)
        return replace(
            state,
            **{k: v[indices] for k, v in vars(state).items() if isinstance(v, np.ndarray)},
        )

    def _run(self, state: UncachedState) -> np.ndarray:
        args = [state.tokens, state.padding_mask, state.padding_mask.sum(1) - 1]
        if self.is_encoder_decoder:
            args = [state.source, state.source_mask] + args
        logits = self._forward(*[tf.constant(np.asarray(a, np.int32)) for a in args])
        return np.asarray(logits, np.float32)
