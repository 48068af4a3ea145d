"""`CachedEngine`: the one engine. It steps a decoding model for the search code
(`transformer_zoo.generation.search`) through a runner of its step graphs.

The runner decides where the graphs run, and only it knows the tensor type:

- `OnnxRunner` (`onnx_runner`): the exported ONNX files on onnxruntime, no TensorFlow;
- `KerasRunner` (`keras_runner`): the Keras model's own step graphs, as `tf.function`s;
- `SavedModelRunner` (`saved_model_runner`): the signatures of an exported SavedModel.

All three run the graphs of `generation.graphs` with Optimum's input and output names,
so the engine feeds them alike. Rows of different lengths are left-aligned
(`alignment`), the self-attention cache grows by one column per step (P = 0 at the
prompt), and for an encoder-decoder the encoder runs once per source and returns the
cross-attention keys and values that every step reuses. Sources are right-aligned first,
as tokenizers pad them: the encoder numbers its positions from the first column, so a
left-padded source would read as another sentence.

numpy only: the TensorFlow-free serving runtime uses this engine too.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from transformer_zoo.errors import InputError, count
from transformer_zoo.generation.alignment import left_align, positions, right_align
from transformer_zoo.generation.inputs import token_array
from transformer_zoo.generation.search_common import SearchResult, check_max_new_tokens
from transformer_zoo.run_directory import ModelDimensions

GENERATIVE_FAMILIES = ("decoder-only", "encoder-decoder")
# An optional scalar input of the fused ONNX step graphs: logits for the last N positions
# only (0, the default: all). Fed 1 where only each row's next token is read.
LOGITS_TO_KEEP = "logits_to_keep"
# A metadata entry of the fused encoder graphs ("true"): they compute the real tokens only
# (`export.onnx.packing.Packing`), so a batch pays for its tokens, not for its padding.
PADDING_FREE = "padding_free"


class Runner(Protocol):
    """What the engines and `ServedModel` call on a runner (`OnnxRunner`, `KerasRunner`,
    `SavedModelRunner`). A runner may also decode greedily in one call: an
    `in_graph_greedy` attribute, True, and `greedy(graph, feeds)` (`OnnxRunner`)."""

    def run(self, graph: str, feeds: dict, numpy_outputs: tuple[str, ...] = ()) -> dict:
        """The outputs of `graph` ("model", "encoder", "decoder") on `feeds`, by name;
        those in `numpy_outputs` as numpy arrays, the others as the runner keeps them."""
        ...

    def take(self, value: Any, indices: np.ndarray) -> Any:
        """Rows `indices` of a cache tensor (beam search reorders them)."""
        ...

    def accepts(self, graph: str, name: str) -> bool:
        """Whether `graph` takes the input `name` (`LOGITS_TO_KEEP`)."""
        ...

    def padding_free(self, graph: str) -> bool:
        """Whether `graph` computes only a padded batch's real tokens (`PADDING_FREE`)."""
        ...


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


def check_room(used: int, max_new_tokens, context: int, what: str = "prompt") -> None:
    """Raises `InputError` unless `used` tokens plus `max_new_tokens` (≥ 1) fit `context`."""
    check_max_new_tokens(max_new_tokens)
    _check_some_room(used, context, what)
    check_fits(used, max_new_tokens, context, what)


def check_fits(
    used: int, new: int, context: int, what: str = "prompt", name: str = "max_new_tokens"
) -> None:
    """Raises `InputError` unless `used` tokens plus `new` ones (`name` in the message: the
    HTTP server's `max_tokens`, which may be 0) fit `context`: the one room check."""
    if used + new > context:
        raise InputError(
            f"The {what} ({count(used, 'token')}) leaves room for "
            f"{count(max(context - used, 0), 'new token')} in the model's context of "
            f"{context} tokens (its max_length); {name}={new}."
        )


def new_tokens(
    used: int, max_new_tokens: int | None, context: int, default: int, what: str = "prompt"
) -> int:
    """How many tokens to generate after `used` tokens of `context`: `max_new_tokens`,
    refused past the room (`check_room`), or when it is None `default` cut to the room
    left, so that a default never refuses what a smaller explicit value would run; only a
    `used` that leaves no room at all is refused then."""
    if max_new_tokens is not None:
        check_room(used, max_new_tokens, context, what)
        return max_new_tokens
    _check_some_room(used, context, what)
    return min(default, context - used)


def _check_some_room(used: int, context: int, what: str) -> None:
    if used >= context:
        problem = "leaves no room for a new token in" if used == context else "does not fit"
        raise InputError(
            f"The {what} ({count(used, 'token')}) {problem} the model's context of {context} "
            "tokens (its max_length)."
        )


class CachedEngine:
    """Steps a decoder-only or encoder-decoder model for `search.generate`.

    Args:
        runner: runs the graphs by name (`"model"`, or `"encoder"` and `"decoder"`).
        dims: the model's `ModelDimensions`.
        family: `"decoder-only"` or `"encoder-decoder"`.

    Inputs of `start`: decoder-only `{"token_ids", "padding_mask"}`; encoder-decoder
    `{"encoder_token_ids", "encoder_padding_mask", "decoder_token_ids",
    "decoder_padding_mask"}`, where the decoder ids are the start tokens (e.g. BOS).
    Missing masks are `ids != 0`. Padding may be on either side, for sources too.
    """

    def __init__(self, runner: Runner, dims: ModelDimensions, family: str):
        if family not in GENERATIVE_FAMILIES:
            raise ValueError(
                f"`family` must be one of {GENERATIVE_FAMILIES}. Received: family={family!r}"
            )
        self.runner = runner
        self.dims = dims
        self.is_encoder_decoder = family == "encoder-decoder"
        self.graph = "decoder" if self.is_encoder_decoder else "model"
        part = "decoder." if self.is_encoder_decoder else ""
        layers = range(dims.num_layers)
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
        self.dtype = np.dtype(dims.dtype)
        self.keeps_logits = runner.accepts(self.graph, LOGITS_TO_KEEP)
        # `greedy` in one call of the runner (`OnnxRunner`'s in-graph `Loop`)
        self.decodes_greedily = getattr(runner, "in_graph_greedy", False)

    def empty_cache(self, batch: int) -> dict:
        """The P = 0 self-attention caches of `batch` rows, by input name."""
        empty = np.zeros((batch, self.dims.num_heads, 0, self.dims.head_dim), self.dtype)
        return dict.fromkeys(self.cache_names, empty)

    # --- the search_common.Engine protocol --------------------------------------------
    def start(self, inputs: dict) -> tuple[np.ndarray, CachedState]:
        tokens, where, state = self._begin(inputs, align=True)
        return self._run(tokens, where, state)

    def start_scoring(self, inputs: dict) -> tuple[np.ndarray, CachedState]:
        """`start`, with the logits of every prompt position: (B, T, V), the rows
        left-aligned (row i's prompt in its last L_i columns), so `logits[:, -1]` are the
        next token's. What a prompt's own log-probabilities are read from (`echo` with
        `logprobs` in the server)."""
        tokens, where, state = self._begin(inputs, align=True)
        return self._run(tokens, where, state, every_position=True)

    def greedy(self, inputs: dict, max_new_tokens: int, eos_id=None, pad_id=0) -> SearchResult:
        """`greedy.greedy_search` in one call of the runner (where `decodes_greedily`):
        the prompt pass and every step inside onnxruntime (`onnx_greedy`)."""
        tokens, where, state = self._begin(inputs, align=True)
        feeds = {
            "input_ids": tokens.astype(np.int64),
            "attention_mask": state.padding_mask.astype(np.int64),
            "position_ids": where.astype(np.int64),
            "max_new_tokens": np.array(max_new_tokens, np.int64),
            "eos_token_id": np.array(-1 if eos_id is None else eos_id, np.int64),
            "pad_token_id": np.array(pad_id, np.int64),
        }
        if self.is_encoder_decoder:
            feeds["encoder_attention_mask"] = state.source_mask
            feeds.update(state.cross)
        outputs = self.runner.greedy(self.graph, feeds)
        return SearchResult(outputs["tokens"], outputs["scores"].astype(np.float64))

    def forward(self, inputs: dict) -> np.ndarray:
        """Teacher forcing: (B, T, V) float32 logits at every position of whole sequences
        (`inputs` as for `start`, any padding), one pass with an empty cache."""
        tokens, where, state = self._begin(inputs, align=False)
        return self._logits(tokens, where, state)[0]

    def _begin(self, inputs: dict, align: bool):
        """`(tokens, positions, state)` of the first pass; the encoder runs here."""
        if not isinstance(inputs, dict):
            raise InputError(f"`inputs` must be a dict. Received: {type(inputs).__name__}")
        prefix = "decoder_" if self.is_encoder_decoder else ""
        tokens, mask = self._ids(inputs, f"{prefix}token_ids", f"{prefix}padding_mask", True)
        if align:
            tokens, mask = left_align(tokens, mask)
        where = positions(mask)
        state = CachedState(mask, where[:, -1] + 1, self.empty_cache(len(tokens)))
        if self.is_encoder_decoder:
            source, source_mask = self._ids(
                inputs, "encoder_token_ids", "encoder_padding_mask", False
            )
            if len(source) != len(tokens):
                raise InputError(
                    "The encoder and decoder inputs need the same batch size. Received: "
                    f"{len(source)} and {len(tokens)} rows."
                )
            source, source_mask = right_align(source, source_mask.astype(bool))
            source_mask = source_mask.astype(np.int64)
            feeds = {"input_ids": source, "attention_mask": source_mask}
            encoded = self.runner.run("encoder", feeds, numpy_outputs=("last_hidden_state",))
            state.source_mask = source_mask
            state.cross = {past: encoded[present] for past, present in self.cross_names.items()}
        return tokens, where, state

    def step(self, next_tokens: np.ndarray, state: CachedState) -> tuple[np.ndarray, CachedState]:
        next_tokens = np.asarray(next_tokens, np.int64).reshape(-1, 1)  # (B, 1)
        mask = np.concatenate([state.padding_mask, np.ones_like(next_tokens, bool)], axis=1)
        where = state.positions[:, None]  # (B, 1)
        state = replace(state, padding_mask=mask, positions=state.positions + 1)
        return self._run(next_tokens, where, state)

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

    # --- batches whose rows come and go (continuous batching) ------------------------
    def concatenate(self, states: list[CachedState]) -> CachedState:
        """One state of the rows of `states`, in order: each padded on the left to the
        longest past (zero keys and values, mask False), an encoder-decoder's sources on
        the right to the longest source. Positions stay per row, so every row decodes as
        it would alone (as TGI's `CausalLMBatch.concatenate`)."""
        width = max(s.padding_mask.shape[1] for s in states)
        masks, caches = [], {name: [] for name in self.cache_names}
        for state in states:
            pad = width - state.padding_mask.shape[1]
            masks.append(np.pad(state.padding_mask, ((0, 0), (pad, 0))))
            for name in caches:
                caches[name].append(_pad_axis2(_numpy(state.cache[name]), pad, 0))
        merged = CachedState(
            np.concatenate(masks),
            np.concatenate([s.positions for s in states]),
            {name: np.concatenate(parts) for name, parts in caches.items()},
        )
        if self.is_encoder_decoder:
            source = max(s.source_mask.shape[1] for s in states)
            merged.source_mask = np.concatenate(
                [
                    np.pad(s.source_mask, ((0, 0), (0, source - s.source_mask.shape[1])))
                    for s in states
                ]
            )
            merged.cross = {
                name: np.concatenate(
                    [
                        _pad_axis2(_numpy(s.cross[name]), 0, source - s.source_mask.shape[1])
                        for s in states
                    ]
                )
                for name in self.cross_names
            }
        return merged

    def keep(self, state: CachedState, rows) -> CachedState:
        """The rows `rows` of `state`, with the leading columns that only padding holds
        trimmed (and an encoder-decoder's trailing source columns), as TGI's `filter`."""
        rows = np.asarray(rows, np.int64)
        mask = state.padding_mask[rows]
        first = int(np.argmax(mask.any(axis=0)))  # rows hold a token, so some column is real
        kept = CachedState(
            mask[:, first:],
            state.positions[rows],
            {name: _numpy(value)[rows][:, :, first:] for name, value in state.cache.items()},
        )
        if self.is_encoder_decoder:
            source_mask = state.source_mask[rows]
            end = int(np.nonzero(source_mask.any(axis=0))[0].max()) + 1
            kept.source_mask = source_mask[:, :end]
            kept.cross = {
                name: _numpy(value)[rows][:, :, :end] for name, value in state.cross.items()
            }
        return kept

    # --- helpers ------------------------------------------------------------------------
    def _ids(self, inputs, ids_key, mask_key, target) -> tuple[np.ndarray, np.ndarray]:
        if ids_key not in inputs:
            raise InputError(f"The inputs need `{ids_key}`. Received keys: {sorted(inputs)}")
        vocabulary = self.dims.output_vocabulary_size if target else self.dims.vocabulary_size
        return token_array(
            inputs[ids_key], ids_key, vocabulary, self.dims.max_length, inputs.get(mask_key)
        )

    def _logits(self, tokens, where, state: CachedState, last_only: bool = False):
        """`(logits (B, T, V) float32, outputs)` of one pass of the step graph; with
        `last_only`, (B, 1, V) where the graph can skip the other positions."""
        feeds = {
            "input_ids": tokens.astype(np.int64),
            "attention_mask": state.padding_mask.astype(np.int64),
            "position_ids": where.astype(np.int64),
            **state.cache,
        }
        if self.is_encoder_decoder:
            feeds["encoder_attention_mask"] = state.source_mask
            feeds.update(state.cross)
        if last_only and self.keeps_logits:
            feeds[LOGITS_TO_KEEP] = np.array(1, np.int64)
        outputs = self.runner.run(self.graph, feeds, numpy_outputs=("logits",))
        return np.asarray(outputs["logits"], np.float32), outputs

    def _run(
        self, tokens, where, state: CachedState, every_position: bool = False
    ) -> tuple[np.ndarray, CachedState]:
        logits, outputs = self._logits(tokens, where, state, last_only=not every_position)
        cache = {past: outputs[present] for past, present in self.cache_names.items()}
        if not every_position:
            logits = logits[:, -1]  # (B, V): each row's next token
        return logits, replace(state, cache=cache)


def _numpy(value) -> np.ndarray:
    """A cache tensor as numpy (onnxruntime's OrtValue and TensorFlow's tensors have
    `.numpy()`)."""
    return np.asarray(value.numpy() if hasattr(value, "numpy") else value)


def _pad_axis2(value: np.ndarray, before: int, after: int) -> np.ndarray:
    """Zeros before and after the length axis of a (B, H, L, Dh) cache tensor."""
    if not before and not after:
        return value
    return np.pad(value, ((0, 0), (0, 0), (before, after), (0, 0)))
