"""The export's checks of the signatures that are not step graphs (those `compare_graph`
checks): `serving_default` on padded rows, `generate`'s tokens and `masked_lm`'s logits,
each against the Keras model on a few short rows of random ids (two rows, 7 and 4 tokens
long where the model's `max_length` allows). Each raises `ExportError`, so that the
staged export leaves nothing behind.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from transformer_zoo.export.validation import ExportError, pair_segments
from transformer_zoo.generation.alignment import padded
from transformer_zoo.generation.decoding import generate, keras_engine
from transformer_zoo.run_directory import ModelDimensions

LONGEST = 7  # the longer of the two rows
GENERATED = 4  # new tokens per row: a few turns of the loop, its cache growing


def check_padding(function, model, family: str, dims: ModelDimensions, atol: float) -> float:
    """`serving_default` (`function`) of a generative family on two rows of different
    lengths, right and then left padded, against the Keras model on each row alone.
    Returns the largest difference at the rows' real tokens; raises `ExportError` past
    `atol`."""
    rng = np.random.default_rng(0)
    sources = _rows(min(LONGEST, dims.max_length), dims.vocabulary_size, rng)
    targets = _rows(min(LONGEST, dims.max_length), dims.output_vocabulary_size, rng)[::-1]
    worst = 0.0
    for i in range(len(sources)):
        if family == "decoder-only":
            length = len(sources[i])
            feeds = {"token_ids": sources[i][None], "padding_mask": np.ones((1, length), bool)}
        else:
            feeds = {
                "encoder_token_ids": sources[i][None],
                "encoder_padding_mask": np.ones((1, len(sources[i])), bool),
                "decoder_token_ids": targets[i][None],
                "decoder_padding_mask": np.ones((1, len(targets[i])), bool),
            }
        expected = np.asarray(model(feeds))[0]
        for left in (False, True):
            ids, mask = _padded(sources, left)
            inputs = {"input_ids": ids, "attention_mask": mask}
            if family == "encoder-decoder":
                ids, mask = _padded(targets, left)
                inputs |= {"decoder_input_ids": ids, "decoder_attention_mask": mask}
            logits = function(**{k: tf.constant(v) for k, v in inputs.items()})["logits"]
            got = logits.numpy()[i][mask[i].astype(bool)]
            diff = float(np.max(np.abs(got - expected), initial=0.0))
            if not diff <= atol:  # also catches NaN
                raise ExportError(
                    f"SavedModel signature 'serving_default': a {_side(left)}-padded row's "
                    f"logits differ from the Keras model's on the row alone by {diff:.3g} > "
                    f"{atol:g}."
                )
            worst = max(worst, diff)
    return worst


def check_generate(
    function, model, family: str, special_ids: dict, dims: ModelDimensions, atol: float
) -> None:
    """`generate` (`function`) on two prompts (an encoder-decoder's sources) of different
    lengths, right and then left padded, against the model's own greedy decoding: the
    uncached reference (`generation.reference`), which shares no cache or step code with
    the signature's loop. A row's tokens may differ only where the model's logits of the
    two tokens at the first difference are within `atol` (a tie that float rounding breaks
    either way); otherwise raises `ExportError`."""
    new = min(GENERATED, dims.max_length - 1)
    if new < 1:
        return  # one position: no room for a new token after the prompt or target start
    eos, pad, bos = special_ids.get("eos"), special_ids.get("pad", 0), special_ids.get("bos")
    room = dims.max_length - new if family == "decoder-only" else dims.max_length
    rows = _rows(min(LONGEST, room), dims.vocabulary_size, np.random.default_rng(0))
    key = "token_ids" if family == "decoder-only" else "encoder_token_ids"
    options = dict(eos_id=eos, pad_id=pad, decoder_start_id=bos, use_cache=False)
    expected = generate(model, {key: rows}, new, **options).tokens
    for left in (False, True):
        ids, mask = _padded(rows, left)
        tokens = function(
            input_ids=tf.constant(ids),
            attention_mask=tf.constant(mask),
            max_new_tokens=tf.constant(new, tf.int32),
        )["tokens"].numpy()
        width = max(tokens.shape[1], expected.shape[1])  # each stops once its rows ended
        for row in range(len(rows)):
            got, want = _widened(tokens[row], width, pad), _widened(expected[row], width, pad)
            differs = np.flatnonzero(got != want)
            if differs.size and not _near_tie(model, family, rows[row], bos, want, got, atol):
                raise ExportError(
                    f"SavedModel signature 'generate': the {_side(left)}-padded prompt of row "
                    f"{row} gives the tokens {got.tolist()}, the Keras model's greedy decoding "
                    f"{want.tolist()} (first difference at token {differs[0]})."
                )


def _near_tie(model, family: str, row, bos, want, got, atol: float) -> bool:
    """Whether the model's logits of `want`'s and `got`'s tokens at their first
    difference, after `row` (the prompt or source) and the tokens before it, are within
    `atol`: the reference engine stepped through them, as `check_generate` decoded."""
    column = int(np.flatnonzero(got != want)[0])
    engine = keras_engine(model, use_cache=False)
    if family == "decoder-only":
        inputs = {"token_ids": [row]}
    else:
        inputs = {"encoder_token_ids": [row], "decoder_token_ids": [[bos]]}
    logits, state = engine.start(inputs)
    for token in want[:column]:
        logits, state = engine.step(np.array([token]), state)
    chosen, other = int(want[column]), int(got[column])
    if not 0 <= other < logits.shape[-1]:
        return False
    # Both the signature's logits and these may be off by `atol`: a tie flips within 2 atol.
    return bool(abs(logits[0, chosen] - logits[0, other]) <= 2 * atol)


def check_masked_lm(function, model, dims: ModelDimensions, atol: float) -> float:
    """`masked_lm` (`function`) on two right-padded rows, with segments where the model
    has them, against the Keras model called with the same `mask_positions`: per row its
    last real token, then its first (out of order, and different from row to row).
    Returns the largest difference; raises `ExportError` past `atol` or on another
    shape."""
    rows = _rows(min(LONGEST, dims.max_length), dims.vocabulary_size, np.random.default_rng(0))
    ids, mask = _padded(rows, left=False)
    last = mask.sum(1) - 1
    where = np.stack([last, np.zeros_like(last)], axis=1)  # (B, M = 2)
    feeds = {"input_ids": ids, "attention_mask": mask, "mask_positions": where}
    features = {"token_ids": ids, "padding_mask": mask, "mask_positions": where}
    if dims.type_vocabulary_size:
        segments = pair_segments(len(rows), ids.shape[1], dims.type_vocabulary_size)
        feeds["token_type_ids"] = features["segment_ids"] = segments
    expected = np.asarray(model(features))
    got = function(**{k: tf.constant(v) for k, v in feeds.items()})["logits"].numpy()
    if got.shape != expected.shape:
        raise ExportError(
            f"SavedModel signature 'masked_lm': 'logits' has shape {got.shape}, expected "
            f"{expected.shape}."
        )
    diff = float(np.max(np.abs(got - expected), initial=0.0))
    if not diff <= atol:  # also catches NaN
        raise ExportError(
            f"SavedModel signature 'masked_lm': 'logits' differ from the Keras model's by "
            f"{diff:.3g} > {atol:g}."
        )
    return diff


def _rows(longest: int, vocabulary: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Two rows of random ids, `longest` and 3 fewer (at least 1) tokens long."""
    return [rng.integers(1, vocabulary, n) for n in (longest, max(1, longest - 3))]


def _padded(rows, left: bool) -> tuple[np.ndarray, np.ndarray]:
    """(B, S) int64 ids and mask, as the signatures take them (`alignment.padded`)."""
    ids, mask = padded(rows, left)
    return ids, mask.astype(np.int64)


def _widened(tokens: np.ndarray, width: int, pad: int) -> np.ndarray:
    return np.pad(tokens, (0, width - len(tokens)), constant_values=pad)


def _side(left: bool) -> str:
    return "left" if left else "right"
