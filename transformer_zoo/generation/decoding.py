"""`generate(model, ...)`: decoding with a Keras model, through the one engine.

The model's step graphs run in a `KerasRunner` under `CachedEngine`, exactly as an
exported model's run in onnxruntime; `use_cache=False` runs the uncached reference
instead (for comparisons only).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from transformer_zoo.errors import InputError, is_integer, with_article
from transformer_zoo.generation.engine import CachedEngine, check_room
from transformer_zoo.generation.inputs import token_array
from transformer_zoo.generation.keras_runner import KerasRunner
from transformer_zoo.generation.reference import UncachedEngine
from transformer_zoo.generation.search import SearchConfig
from transformer_zoo.generation.search import generate as run_search
from transformer_zoo.generation.search_common import SearchResult
from transformer_zoo.layers.validation import check_flag
from transformer_zoo.models.family import family_of
from transformer_zoo.models.model_inputs import check_input_keys

# Engines are kept per model, so that a second call does not trace the graphs again, with
# the model's state they were traced for (`_traced_state`): a traced graph keeps the
# variables and the Python path of its first call, so after `model.enable_lora` (new
# adapter variables) or `model.quantize` (integer kernels in new variables, another call
# path) the kept graphs decoded the model as it was before. New values in the same
# variables (`fit`, `load_weights`, `set_weights`) need no new trace: a graph reads its
# variables at every call. They are kept on the model (`_ENGINES_ATTRIBUTE`), not in a
# module-level table: the engines hold the model, so a table keyed by it never let it go;
# an attribute is a cycle, which the garbage collector frees with the model.
_ENGINES_ATTRIBUTE = "_transformer_zoo_engines"


@dataclass
class _KeptEngines:
    """A model's engines by `use_cache`, and the `_traced_state` they were built for. It
    holds the traced variables, so that their ids in `state` are not reused."""

    state: tuple
    variables: list
    engines: dict = field(default_factory=dict)


def keras_engine(model, use_cache: bool = True):
    """The (kept) `CachedEngine` over `KerasRunner(model)`, or the `UncachedEngine`,
    built again when the model's variables or layers' dtypes changed since."""
    variables = model.variables
    state = _traced_state(model, variables)
    kept = getattr(model, _ENGINES_ATTRIBUTE, None)
    if kept is None or kept.state != state:
        kept = _KeptEngines(state, variables)
        setattr(model, _ENGINES_ATTRIBUTE, kept)
    if use_cache not in kept.engines:
        if use_cache:
            runner = KerasRunner(model)
            kept.engines[use_cache] = CachedEngine(runner, runner.dims, family_of(model))
        else:
            kept.engines[use_cache] = UncachedEngine(model)
    return kept.engines[use_cache]


def _traced_state(model, variables) -> tuple:
    """What a graph traced now would fix: which variables it reads (by identity: the
    values may change) and the dtypes and quantization of each layer's call."""
    return tuple(id(variable) for variable in variables), model.layer_dtypes()


def generate(
    model,
    inputs,
    max_new_tokens: int,
    search: SearchConfig | None = None,
    eos_id: int | None = None,
    pad_id: int = 0,
    decoder_start_id: int | None = None,
    use_cache: bool = True,
) -> SearchResult:
    """Generate with a `DecoderOnly` or an `EncoderDecoder`.

    Args:
        model: a `DecoderOnly` or an `EncoderDecoder`.
        inputs: decoder-only: (B, S) prompt ids or `{"token_ids", "padding_mask"}`;
            prompts of different lengths are padded with 0 (left or right) or masked, or
            given as id lists of their own lengths (masked by them, so id 0 is a token).
            Encoder-decoder: `{"encoder_token_ids", "encoder_padding_mask"}` plus
            `"decoder_token_ids"` (the start tokens) or `decoder_start_id`.
        max_new_tokens: the most tokens generated per row.
        search: `Greedy()` (default), `Sampling(...)` or `BeamSearch(...)`.
        eos_id: stop a row after this token.
        pad_id: written after a row's EOS.
        decoder_start_id: encoder-decoder: the first target token (BOS) of every row.
        use_cache: decode with the KV cache (False recomputes the whole sequence per
            token; for comparisons only).

    Returns:
        A `SearchResult`: `tokens` (B, N) new tokens only, `scores` (B,).

    Raises:
        ValueError: `inputs` without the family's ids or with other keys, empty prompts,
            out-of-range ids (`eos_id`, `pad_id` and `decoder_start_id` too: integers in
            [0, V), V the output vocabulary), or prompt + `max_new_tokens` longer than the
            model's `max_length`.
    """
    family = family_of(model)
    if family not in ("decoder-only", "encoder-decoder"):
        raise ValueError(
            f"`model` must be a DecoderOnly or an EncoderDecoder. Received: {type(model).__name__}"
        )
    inputs = _input_dict(inputs, model, family)
    output_vocabulary = (
        model.output_vocabulary_size if family == "encoder-decoder" else model.vocabulary_size
    )
    eos_id = _token_id("eos_id", eos_id, output_vocabulary, optional=True)
    pad_id = _token_id("pad_id", pad_id, output_vocabulary)
    decoder_start_id = _token_id(
        "decoder_start_id", decoder_start_id, output_vocabulary, optional=True
    )
    use_cache = check_flag("use_cache", use_cache)
    if family == "encoder-decoder":
        ids_inputs = (
            ("encoder_token_ids", "encoder_padding_mask", model.vocabulary_size),
            ("decoder_token_ids", "decoder_padding_mask", model.output_vocabulary_size),
        )
    else:
        ids_inputs = (("token_ids", "padding_mask", model.vocabulary_size),)
    for ids_key, mask_key, vocabulary in ids_inputs:
        # As `ServedModel` reads them: id lists of any lengths, masked by their lengths
        # (so that id 0 can be a token), or a 2-D array masked by `mask_key`, else ids != 0.
        if ids_key in inputs:
            ids, mask = token_array(
                inputs[ids_key], ids_key, vocabulary, None, inputs.get(mask_key)
            )
            inputs[ids_key], inputs[mask_key] = ids, mask
    inputs = {key: np.asarray(value) for key, value in inputs.items()}
    if family == "encoder-decoder" and "decoder_token_ids" not in inputs:
        if decoder_start_id is None:
            raise ValueError(
                "An encoder-decoder needs its first target token: pass `decoder_start_id` "
                "(e.g. the BOS id) or `decoder_token_ids`."
            )
        batch = len(inputs["encoder_token_ids"])
        inputs["decoder_token_ids"] = np.full((batch, 1), decoder_start_id, np.int64)
    prefix = "decoder_" if family == "encoder-decoder" else ""
    ids = inputs.get(f"{prefix}token_ids")
    if ids is not None and np.ndim(ids) == 2:
        mask = inputs.get(f"{prefix}padding_mask")
        used = int((ids != 0 if mask is None else mask.astype(bool)).sum(1).max(initial=0))
        what = "target start" if family == "encoder-decoder" else "prompt"
        check_room(used, max_new_tokens, model.max_length, what)
    engine = keras_engine(model, use_cache=use_cache)
    return run_search(engine, inputs, max_new_tokens, search, eos_id, pad_id)


def _input_dict(inputs, model, family: str) -> dict:
    """`inputs` as a dict of the model's inputs (`input_specs()`, its ids first), holding
    its ids: a key it does not read is refused as the model refuses it (`check_input_keys`:
    Hugging Face's names pointed to ours), so that a mask under another name is not
    dropped; a decoder-only model also takes its ids alone."""
    keys = list(model.input_specs())
    if isinstance(inputs, Mapping):
        check_input_keys(inputs, keys)
        if keys[0] in inputs:
            return dict(inputs)
        received = f"keys {list(inputs)}"
    elif family == "decoder-only":
        return {"token_ids": inputs}
    else:
        received = f"inputs of type {type(inputs).__name__}"
    optional = ", ".join(f"`{key}`" for key in keys[1:])
    alone = " (or the ids alone)" if family == "decoder-only" else ""
    raise InputError(
        f"The inputs of {with_article(family)} model are a dict of `{keys[0]}` and "
        f"optionally {optional}{alone}. Received: {received}"
    )


def _token_id(name: str, value, vocabulary_size: int, optional: bool = False) -> int | None:
    """`value` as an int if it is a token id of the output vocabulary, else ValueError:
    an `eos_id` of V or more never ends a row, a `pad_id` outside it is written into
    the tokens, and a `decoder_start_id` of 2.7 was read as 2."""
    if value is None and optional:
        return None
    if not is_integer(value) or not 0 <= value < vocabulary_size:
        raise ValueError(
            f"`{name}` must be a token id, an integer in [0, {vocabulary_size}) (the model's "
            f"output vocabulary). Received: {name}={value!r}"
        )
    return int(value)
