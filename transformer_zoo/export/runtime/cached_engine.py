"""`CachedEngine`: the `search.Engine` protocol over the exported graphs.

It follows `KerasEngine`'s conventions exactly, so that both give the same tokens: rows
of different lengths are left-aligned (the next token of every row sits in the last
column), positions are `cumsum(mask) - 1`, and the self-attention cache grows by one
column per step (P = 0 at the prompt). For an encoder-decoder the encoder runs once
per source and returns the cross-attention keys and values that every step reuses.

The graphs run through a runner: `OnnxRunner` here, or the SavedModel runner of
`transformer_zoo.export.tf_runners`; only the runner knows the tensor type.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from transformer_zoo.export.runtime.errors import InputError
from transformer_zoo.export.runtime.inputs import token_array


class Runner(Protocol):
    def run(self, graph: str, feeds: dict, numpy_outputs: tuple[str, ...] = ()) -> dict: ...

    def take(self, value: Any, indices: np.ndarray) -> Any: ...


@dataclass
class CachedState:
    """What a decode carries between steps (rows = batch, or batch × beams).

    Attributes:
        padding_mask: (B, L) bool over the left-aligned sequence so far.
        positions: (B,) position of each row's next token.
        cache: self-attention caches by input name (`past_key_values.{i}[.decoder].key`…).
        source_mask: encoder-decoder: the (B, S) int64 source mask.
        cross: encoder-decoder: the cross caches by input name.
    """

    padding_mask: np.ndarray
    positions: np.ndarray
    cache: dict
    source_mask: np.ndarray | None = None
    cross: dict | None = None


class CachedEngine:
    """Steps an exported decoder-only or encoder-decoder model for `transformer_zoo.search`.

    Args:
        runner: runs the graphs by name (`"model"`, or `"encoder"` and `"decoder"`).
        dims: the `export.model` entry of `config.json` (vocabulary sizes, layers, heads,
            head width, maximum length).
        family: `"decoder-only"` or `"encoder-decoder"`.

    Inputs of `start` are `KerasEngine`'s: decoder-only `{"token_ids", "padding_mask"}`;
    encoder-decoder `{"encoder_token_ids", "encoder_padding_mask", "decoder_token_ids",
    "decoder_padding_mask"}`. Missing masks are `ids != 0`.
    """

    def __init__(self, runner: Runner, dims: dict, family: str):
        if family not in ("decoder-only", "encoder-decoder"):
            raise ValueError(
                f"`family` must be 'decoder-only' or 'encoder-decoder'. Received: family={family!r}"
            )
        self.runner = runner
        self.dims = dims
        self.is_encoder_decoder = family == "encoder-decoder"
        self.graph = "decoder" if self.is_encoder_decoder else "model"
        part = "decoder." if self.is_encoder_decoder else ""
        layers = range(dims["num_layers"])
        # past input name -> the present output that feeds it at the next step
        self.cache_names = {
            f"past_key_values.{i}.{part}{kv}": f"present.{i}.{part}{kv}"
            for i in layers
            for kv in ("key", "value")
        }
        self.cross_names = {
            f"past_key_values.{i}.encoder.{kv}": f"present.{i}.encoder.{kv}"
            for i in layers
            for kv in ("key", "value")
        }
        self.target_vocabulary = dims.get("target_vocabulary_size", dims["vocabulary_size"])
        self.dtype = np.dtype(dims.get("dtype", "float32"))

    # --- the search.Engine protocol ---------------------------------------------------
    def start(self, inputs: dict) -> tuple[np.ndarray, CachedState]:
        if not isinstance(inputs, dict):
            raise InputError(f"`inputs` must be a dict. Received: {type(inputs).__name__}")
        prefix = "decoder_" if self.is_encoder_decoder else ""
        ids, mask = self._ids(inputs, f"{prefix}token_ids", f"{prefix}padding_mask", True)
        tokens, aligned = _left_align(ids, mask)
        positions = np.maximum(np.cumsum(aligned, axis=1) - 1, 0)
        empty = np.zeros((len(ids), self.dims["num_heads"], 0, self.dims["head_dim"]), self.dtype)
        state = CachedState(aligned, positions[:, -1] + 1, dict.fromkeys(self.cache_names, empty))
        if self.is_encoder_decoder:
            source, source_mask = self._ids(
                inputs, "encoder_token_ids", "encoder_padding_mask", False
            )
            if len(source) != len(ids):
                raise InputError(
                    "The encoder and decoder inputs need the same batch size. Received: "
                    f"{len(source)} and {len(ids)} rows."
                )
            source_mask = source_mask.astype(np.int64)
            feeds = {"input_ids": source, "attention_mask": source_mask}
            encoded = self.runner.run("encoder", feeds, numpy_outputs=("last_hidden_state",))
            state.source_mask = source_mask
            state.cross = {past: encoded[present] for past, present in self.cross_names.items()}
        return self._run(tokens, positions, state)

    def step(self, next_tokens: np.ndarray, state: CachedState) -> tuple[np.ndarray, CachedState]:
        next_tokens = np.asarray(next_tokens, np.int64).reshape(-1, 1)  # (B, 1)
        mask = np.concatenate([state.padding_mask, np.ones_like(next_tokens, bool)], axis=1)
        positions = state.positions[:, None]  # (B, 1)
        state = replace(state, padding_mask=mask, positions=state.positions + 1)
        return self._run(next_tokens, positions, state)

    def reorder(self, state: CachedState, indices: np.ndarray) -> CachedState:
        indices = np.asarray(indices)
        take = self.runner.take
        return replace(
            state,
            padding_mask=state.padding_mask[indices],
            positions=state.positions[indices],
            cache={name: take(value, indices) for name, value in state.cache.items()},
            source_mask=None if state.source_mask is None else state.source_mask[indices],
            cross=None
            if state.cross is None
            else {name: take(value, indices) for name, value in state.cross.items()},
        )

    # --- helpers ------------------------------------------------------------------------
    def _ids(self, inputs, ids_key, mask_key, target) -> tuple[np.ndarray, np.ndarray]:
        if ids_key not in inputs:
            raise InputError(f"The inputs need `{ids_key}`. Received keys: {sorted(inputs)}")
        vocabulary = self.target_vocabulary if target else self.dims["vocabulary_size"]
        return token_array(
            inputs[ids_key], ids_key, vocabulary, self.dims["max_length"], inputs.get(mask_key)
        )

    def _run(self, tokens, positions, state: CachedState) -> tuple[np.ndarray, CachedState]:
        feeds = {
            "input_ids": tokens.astype(np.int64),
            "attention_mask": state.padding_mask.astype(np.int64),
            "position_ids": positions.astype(np.int64),
            **state.cache,
        }
        if self.is_encoder_decoder:
            feeds["encoder_attention_mask"] = state.source_mask
            feeds.update(state.cross)
        outputs = self.runner.run(self.graph, feeds, numpy_outputs=("logits",))
        cache = {past: outputs[present] for past, present in self.cache_names.items()}
        logits = np.asarray(outputs["logits"][:, -1], np.float32)  # (B, V)
        return logits, replace(state, cache=cache)


def _left_align(ids: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's real tokens moved to the right end, padding (0) on the left."""
    lengths = mask.sum(1)
    width = int(lengths.max())
    tokens = np.zeros((len(ids), width), np.int64)
    aligned = np.zeros((len(ids), width), bool)
    for row, length in enumerate(lengths):
        tokens[row, width - length :] = ids[row][mask[row]]
        aligned[row, width - length :] = True
    return tokens, aligned
