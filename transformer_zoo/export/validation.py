"""Every export checks itself: the exported graph must reproduce the TensorFlow function.

tf2onnx writes graphs with ops onnxruntime cannot run without failing (DESIGN.md
pitfalls), so an export is only done once onnxruntime (or the reloaded SavedModel) has
run it on random inputs: two batch sizes × two lengths, and for cached graphs an empty
(P = 0) and a filled (P > 0) cache, with left-padded masks and matching positions; a
model whose `max_length` is shorter gets the lengths clamped to it (`length_cases`).
Sequence outputs (`SEQUENCE_OUTPUTS`) at the positions an `attention_mask` marks as
padding are not compared: no real token reads them, and the fused encoder does not
compute them (`packing.Packing`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np

from transformer_zoo.generation.alignment import positions
from transformer_zoo.generation.graphs import Graph
from transformer_zoo.run_directory import ModelDimensions

BATCH_SIZES = (1, 3)
LENGTHS = (2, 7)
PAST_LENGTHS = (0, 5)
SOURCE_LENGTH = 6  # encoder length under the decoder graph's cross caches
ATOL = 1e-4
# The outputs laid out (B, S, ...) over the positions of `attention_mask`, when 3-D (a
# classifier's `logits` are (B, num_classes)).
SEQUENCE_OUTPUTS = ("last_hidden_state", "logits")


class ExportError(RuntimeError):
    """An exported graph does not reproduce the model (or cannot be loaded)."""


def random_feeds(
    graph: Graph,
    dims: ModelDimensions,
    batch: int,
    length: int,
    past: int,
    rng: np.random.Generator,
) -> dict[str, np.ndarray]:
    """Valid random inputs of `graph`: ids in range, masks with padding, positions."""
    vocabulary = dims.output_vocabulary_size if graph.name == "decoder" else dims.vocabulary_size
    total = past + length
    if graph.cached:
        # Left padding, as the engines feed it: row 0 starts 2 columns late.
        mask = np.ones((batch, total), np.int64)
        mask[0, : min(2, total - 1)] = 0
    else:
        # Right padding, as tokenizers produce it: row 0 is 1 token short.
        mask = np.ones((batch, length), np.int64)
        mask[0, max(1, length - 1) :] = 0
    where = positions(mask)[:, past:]
    source_mask = np.ones((batch, SOURCE_LENGTH), np.int64)
    source_mask[-1, SOURCE_LENGTH - 2 :] = 0
    feeds = {}
    for spec in graph.inputs:
        name = spec.name
        if name == "input_ids":
            feeds[name] = rng.integers(1, vocabulary, (batch, length)).astype(np.int64)
        elif name == "attention_mask":
            feeds[name] = mask
        elif name == "position_ids":
            feeds[name] = where.astype(np.int64)
        elif name == "token_type_ids":
            feeds[name] = pair_segments(batch, length, dims.type_vocabulary_size)
        elif name == "encoder_attention_mask":
            feeds[name] = source_mask
        elif name.startswith("past_key_values."):
            steps = SOURCE_LENGTH if ".encoder." in name else past
            shape = (batch, dims.num_heads, steps, dims.head_dim)
            feeds[name] = rng.normal(size=shape).astype(spec.dtype.as_numpy_dtype)
        else:
            raise ValueError(f"No random feed for the input {name!r}.")
    return feeds


def pair_segments(batch: int, length: int, type_vocabulary_size: int) -> np.ndarray:
    """(B, T) int64 segment ids as a text pair's: 0 for the first half, then 1 where the
    model has a second segment (`text.formats.pair_row`: a one-segment model, RoBERTa's
    `type_vocab_size` 1, reads both texts in segment 0)."""
    second = min(1, type_vocabulary_size - 1)
    row = np.where(np.arange(length) >= length // 2, second, 0).astype(np.int64)
    return np.tile(row, (batch, 1))


def length_cases(cached: bool, max_length: int) -> list[tuple[int, int]]:
    """The (length, past) pairs checked: `LENGTHS` × `PAST_LENGTHS` (cached graphs) with
    past + length clamped to `max_length`, a filled cache keeping one token of room, so a
    short model is checked up to its full length (and with P > 0 from a max_length of 2).

    Example:
    >>> length_cases(True, 4), length_cases(False, 4)
    ([(2, 0), (1, 3), (4, 0)], [(2, 0), (4, 0)])
    """
    cases = []
    for length, past in itertools.product(LENGTHS, PAST_LENGTHS if cached else (0,)):
        past = min(past, max_length - 1)
        case = (min(length, max_length - past), past)
        if case not in cases:
            cases.append(case)
    return cases


def feed_cases(graph: Graph, dims: ModelDimensions, seed: int = 0):
    """The (description, feeds) pairs an export is checked on."""
    rng = np.random.default_rng(seed)
    lengths = length_cases(graph.cached, dims.max_length)
    for batch, (length, past) in itertools.product(BATCH_SIZES, lengths):
        description = f"batch={batch}, length={length}" + (f", past={past}" if graph.cached else "")
        yield description, random_feeds(graph, dims, batch, length, past, rng)


def reference_outputs(graph: Graph, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The TensorFlow function's outputs on `feeds` (fed by name)."""
    import tensorflow as tf

    args = [tf.constant(feeds[spec.name], dtype=spec.dtype) for spec in graph.inputs]
    return {name: np.asarray(value) for name, value in graph.function(*args).items()}


def compare_graph(
    graph: Graph,
    dims: ModelDimensions,
    run: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]],
    label: str,
    atol: float = ATOL,
) -> float:
    """Runs `run` (the exported graph) against the TF function on every case.

    Returns:
        The largest absolute difference seen.

    Raises:
        ExportError: an output is missing, has another shape, or differs by more than `atol`.
    """
    worst = 0.0
    for description, feeds in feed_cases(graph, dims):
        expected = reference_outputs(graph, feeds)
        try:
            got = run(feeds)
        except Exception as error:
            raise ExportError(f"{label} failed to run ({description}): {error}") from error
        for name, reference in expected.items():
            if name not in got:
                raise ExportError(f"{label} has no output {name!r}.")
            value = np.asarray(got[name])
            if value.shape != reference.shape:
                raise ExportError(
                    f"{label}: output {name!r} has shape {value.shape}, expected "
                    f"{reference.shape} ({description})."
                )
            real = real_positions(feeds, name, value.shape)
            if real is not None:
                value, reference = value[real], reference[real]
            diff = float(np.max(np.abs(value - reference), initial=0.0))
            if not diff <= atol:  # also catches NaN
                raise ExportError(
                    f"{label}: output {name!r} differs from the Keras model by {diff:.3g} "
                    f"> {atol:g} ({description})."
                )
            worst = max(worst, diff)
    return worst


def real_positions(feeds: dict[str, np.ndarray], name: str, shape: tuple) -> np.ndarray | None:
    """The (B, S) bool mask of the real tokens when the output `name` of `shape` is a
    sequence output (`SEQUENCE_OUTPUTS`) laid out over the `attention_mask` fed; None
    otherwise (every value is compared, whatever its shape happens to be)."""
    mask = feeds.get("attention_mask")
    if name not in SEQUENCE_OUTPUTS or len(shape) != 3 or mask is None:
        return None
    if tuple(shape[:2]) != mask.shape:  # a cached step's logits: (B, T), mask (B, P + T)
        return None
    return mask.astype(bool)
