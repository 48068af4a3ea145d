"""Steps a `DecoderOnly` or `EncoderDecoder` for the numpy search code (`search.Engine`).

TensorFlow is imported here, which is why this lives outside `transformer_zoo.models`
(keras.ops only): the step must be compiled (a `tf.function` with None dimensions in its signature, so the
growing cache does not retrace), and Keras 3 has no backend-neutral way to compile a
function with a dynamic-shape signature. XLA (`jit_compile=True`) recompiles for every
new cache length, which measured slower; see benchmarks/generation.py.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import tensorflow as tf

from transformer_zoo.layers.validation import check_token_ids
from transformer_zoo.models.decoder_only import DecoderOnly
from transformer_zoo.models.encoder_decoder import EncoderDecoder


@dataclass
class EngineState:
    """What a decode carries between steps (rows = batch, or batch × beams).

    Cached: `cache` (flat per-layer tensors on the device), `padding_mask` (B, L) over
    the left-aligned sequence, `positions` (B,) of the next token. Uncached: `tokens`
    (B, L) right-aligned so far and `lengths` (B,). Encoder-decoder: `source` ids and
    `source_mask` (B, S).
    """

    padding_mask: np.ndarray
    positions: np.ndarray | None = None
    cache: list | None = None
    tokens: np.ndarray | None = None
    source: np.ndarray | None = None
    source_mask: np.ndarray | None = None


class KerasEngine:
    """The `search.Engine` protocol for our Keras generative models.

    Prompts of different lengths are left-aligned, with positions `cumsum(mask) - 1`
    and the padding mask, so that every row's next token sits in the last column and
    the cache grows by one column per step. With `use_cache=False` every step runs the
    plain `model(...)` forward pass over the whole (right-aligned) sequence instead:
    the independent reference that tests and the benchmark compare against.

    Args:
        model: a `DecoderOnly` or an `EncoderDecoder`.
        use_cache: reuse keys and values (True) or recompute everything each step.
        jit_compile: compile the steps with XLA instead of a plain `tf.function`.

    Inputs of `start`: decoder-only `{"token_ids": (B, S), "padding_mask": (B, S)}`;
    encoder-decoder `{"encoder_token_ids", "encoder_padding_mask", "decoder_token_ids",
    "decoder_padding_mask"}` where the decoder ids are the start tokens (e.g. BOS).
    Missing masks are `ids != 0`.
    """

    def __init__(self, model, use_cache: bool = True, jit_compile: bool = False):
        if not isinstance(model, (DecoderOnly, EncoderDecoder)):
            raise ValueError(
                f"`model` must be a DecoderOnly or an EncoderDecoder. Received: model={model!r}"
            )
        self.model = model
        self.use_cache = use_cache
        self.jit_compile = jit_compile
        self.is_encoder_decoder = isinstance(model, EncoderDecoder)
        ids = tf.TensorSpec([None, None], tf.int32)
        dtype = tf.as_dtype(model.compute_dtype)
        per_layer = 4 if self.is_encoder_decoder else 2
        cache = [tf.TensorSpec([None, model.num_heads, None, model.head_dim], dtype)] * (
            per_layer * model.num_layers
        )

        def compile_(fn, signature):
            return tf.function(fn, input_signature=signature, jit_compile=jit_compile)

        last = tf.TensorSpec([None], tf.int32)
        if self.is_encoder_decoder:
            self._encode = compile_(self._encode_fn, [ids, ids])
            self._step = compile_(self._decode_step_fn, [ids, ids, ids, ids, cache])
            self._full = compile_(self._translate_fn, [ids, ids, ids, ids, last])
        else:
            self._step = compile_(self._cached_step_fn, [ids, ids, ids, cache])
            self._full = compile_(self._forward_fn, [ids, ids, last])

    # --- compiled functions (each traced once) ----------------------------------------
    def _encode_fn(self, source, source_mask):
        memory = self.model.encode(source, source_mask)
        return _flatten(self.model.start_cache(memory))

    def _cached_step_fn(self, token_ids, padding_mask, positions, cache):
        logits, present = self.model.call_with_cache(
            token_ids, _group(cache, 2), padding_mask, positions
        )
        return logits[:, -1], _flatten(present)  # (B, V), the grown cache

    def _decode_step_fn(self, token_ids, padding_mask, positions, source_mask, cache):
        logits, present = self.model.decode_step(
            token_ids, _group(cache, 4), source_mask, padding_mask, positions
        )
        return logits[:, -1], _flatten(present)

    def _forward_fn(self, token_ids, padding_mask, last):
        logits = self.model({"token_ids": token_ids, "padding_mask": padding_mask})
        return tf.gather(logits, last, batch_dims=1)  # (B, V): each row's last real token

    def _translate_fn(self, source, source_mask, target, target_mask, last):
        inputs = {
            "encoder_token_ids": source,
            "encoder_padding_mask": source_mask,
            "decoder_token_ids": target,
            "decoder_padding_mask": target_mask,
        }
        return tf.gather(self.model(inputs), last, batch_dims=1)

    # --- the search.Engine protocol ---------------------------------------------------
    def start(self, inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, EngineState]:
        prefix = "decoder_" if self.is_encoder_decoder else ""
        ids, mask = _ids_and_mask(inputs, f"{prefix}token_ids", f"{prefix}padding_mask", self.model)
        state = EngineState(padding_mask=mask)
        if self.is_encoder_decoder:
            state.source, state.source_mask = _ids_and_mask(
                inputs, "encoder_token_ids", "encoder_padding_mask", self.model
            )
            if len(state.source) != len(ids):
                raise ValueError(
                    "The encoder and decoder inputs need the same batch size. Received: "
                    f"{len(state.source)} and {len(ids)} rows."
                )
        if not self.use_cache:
            tokens, state.padding_mask = _align(ids, mask, left=False)
            return self._run_full(replace(state, tokens=tokens))
        tokens, state.padding_mask = _align(ids, mask, left=True)
        positions = np.maximum(np.cumsum(state.padding_mask, axis=1) - 1, 0)
        if self.is_encoder_decoder:
            state.cache = self._encode(state.source, state.source_mask)
        else:
            state.cache = _flatten(self.model.empty_cache(len(ids)))
        state.positions = positions[:, -1] + 1
        return self._run_step(tokens, positions, state)

    def step(self, next_tokens: np.ndarray, state: EngineState) -> tuple[np.ndarray, EngineState]:
        next_tokens = np.asarray(next_tokens, np.int32).reshape(-1, 1)  # (B, 1)
        if not self.use_cache:
            # Right-aligned rows: the new token goes after each row's last real one.
            rows, lengths = np.arange(len(next_tokens)), state.padding_mask.sum(1)
            tokens = np.pad(state.tokens, ((0, 0), (0, 1)))
            mask = np.pad(state.padding_mask, ((0, 0), (0, 1)))
            tokens[rows, lengths], mask[rows, lengths] = next_tokens[:, 0], True
            return self._run_full(replace(state, tokens=tokens, padding_mask=mask))
        mask = np.concatenate([state.padding_mask, np.ones_like(next_tokens, bool)], axis=1)
        positions = state.positions[:, None]  # (B, 1)
        state = replace(state, padding_mask=mask, positions=state.positions + 1)
        return self._run_step(next_tokens, positions, state)

    def reorder(self, state: EngineState, indices: np.ndarray) -> EngineState:
        indices = np.asarray(indices)
        changes = {
            name: value[indices]
            for name, value in vars(state).items()
            if isinstance(value, np.ndarray)
        }
        if state.cache is not None:
            index = tf.constant(indices, tf.int32)
            changes["cache"] = [tf.gather(t, index) for t in state.cache]
        return replace(state, **changes)

    # --- helpers ------------------------------------------------------------------------
    def _run_step(self, token_ids, positions, state):
        args = [token_ids, state.padding_mask, positions]
        if self.is_encoder_decoder:
            args.append(state.source_mask)
        args = [tf.constant(np.asarray(a, np.int32)) for a in args]
        logits, cache = self._step(*args, state.cache)
        return _numpy_logits(logits), replace(state, cache=cache)

    def _run_full(self, state):
        args = [state.tokens, state.padding_mask, state.padding_mask.sum(1) - 1]
        if self.is_encoder_decoder:
            args = [state.source, state.source_mask] + args
        logits = self._full(*[tf.constant(np.asarray(a, np.int32)) for a in args])
        return _numpy_logits(logits), state


def _ids_and_mask(inputs, ids_key, mask_key, model) -> tuple[np.ndarray, np.ndarray]:
    """Validated (B, T) ids and boolean mask: the compiled steps cannot check values."""
    if ids_key not in inputs:
        raise ValueError(f"The inputs need `{ids_key}`. Received keys: {sorted(inputs)}")
    ids = np.asarray(inputs[ids_key]).astype(np.int32)
    if ids.ndim != 2:
        raise ValueError(f"`{ids_key}` must be (B, T). Received shape: {ids.shape}")
    mask = inputs.get(mask_key)
    mask = ids != 0 if mask is None else np.asarray(mask).astype(bool)
    if ids.shape[0] == 0 or not mask.any(axis=1).all():
        raise ValueError(f"Every row of `{ids_key}` needs at least one token (empty input).")
    vocabulary = model.vocabulary_size
    if ids_key.startswith("decoder_"):
        vocabulary = model.output_vocabulary_size
    check_token_ids(ids, vocabulary, name=ids_key)
    if mask.sum(1).max() > model.max_length:
        raise ValueError(
            f"`{ids_key}` holds {mask.sum(1).max()} tokens, more than the model's "
            f"max_length={model.max_length}."
        )
    return ids, mask


def _align(ids, mask, left: bool) -> tuple[np.ndarray, np.ndarray]:
    """Move each row's real tokens to the right end (left=True) or the left end."""
    lengths = mask.sum(1)
    width = int(lengths.max())
    tokens = np.zeros((len(ids), width), np.int32)
    aligned = np.zeros((len(ids), width), bool)
    for row, (length, real) in enumerate(zip(lengths, ids, strict=True)):
        columns = slice(width - length, width) if left else slice(0, length)
        tokens[row, columns] = real[mask[row]]
        aligned[row, columns] = True
    return tokens, aligned


def _flatten(cache) -> list:
    return [tensor for layer in cache for tensor in layer]


def _group(flat, size: int) -> list:
    return [tuple(flat[i : i + size]) for i in range(0, len(flat), size)]


def _numpy_logits(logits: Any) -> np.ndarray:
    return np.asarray(logits, dtype=np.float32)
