"""`export_saved_model`: a model → a TensorFlow SavedModel in a self-describing directory.

Signatures (inputs int64, names as in the ONNX graphs):

- `serving_default`: decoder-only `input_ids`, `attention_mask` → `logits` (B, S, V);
  encoder-decoder adds `decoder_input_ids`, `decoder_attention_mask` → `logits` (B, T, V).
  Either side may be right or left padded: positions count the real tokens before each
  (`alignment.positions`), as `CachedEngine.forward` does, so a row's logits at its real
  tokens are those of the row alone (checked at export: `check_padding`);
  encoder-only: the ONNX `model` graph (`last_hidden_state`, `sentence_embedding`,
  `pooler_output`/`logits`).
- `generate` (generative families): `input_ids`, `attention_mask` (right or left padded)
  and `max_new_tokens` (int32 scalar) → `tokens` (B, N): in-graph greedy decoding with
  the KV cache (`in_graph_greedy`); an encoder-decoder's source is right-aligned (as
  `CachedEngine` does) and its target starts from BOS.
- `masked_lm` (an `EncoderOnlyMaskedLM`): `input_ids`, `attention_mask`[,
  `token_type_ids`] and `mask_positions` (B, M) → `logits` (B, M, V): the Keras model
  called with `mask_positions`, so only the M positions asked for go through the LM head
  (the ONNX `model` graph and `serving_default` return every position's logits).
- `decoder_step` (and `encoder` for an encoder-decoder): the cached graphs of
  `generation.graphs.step_graphs`, with the ONNX files' inputs and outputs, so that the same
  engine (`CachedEngine`) decodes with any strategy on the SavedModel too.

The reloaded SavedModel is compared with the model like an ONNX export, and the other
signatures with the Keras model (`signature_checks`): `serving_default` on right- and
left-padded rows with the model on each row alone, `generate`'s tokens with the model's
greedy decoding, `masked_lm`'s logits with the model's at the same positions.
"""

from __future__ import annotations

import logging
import os

import keras
import tensorflow as tf
import tensorflow.experimental.numpy as tnp

from transformer_zoo.errors import count
from transformer_zoo.export.directory import (
    check_export_arguments,
    float32_model,
    make_config,
    write_tokenizers,
)
from transformer_zoo.export.saved_model.in_graph_greedy import cached_greedy, check_budget
from transformer_zoo.export.saved_model.signature_checks import (
    check_generate,
    check_masked_lm,
    check_padding,
)
from transformer_zoo.export.staged_export import StagedExport, weights_digest
from transformer_zoo.export.validation import ATOL, compare_graph
from transformer_zoo.generation.alignment import left_align, positions, right_align
from transformer_zoo.generation.graphs import INT, step_graphs
from transformer_zoo.models import EncoderOnlyMaskedLM
from transformer_zoo.models.family import backbone_of, dimensions_of
from transformer_zoo.run_directory import RunConfig

SAVED_MODEL_DIR = "saved_model"
log = logging.getLogger(__name__)  # stages of an export; `transformer-zoo export` shows them
# Which signature holds each graph of `step_graphs`.
GRAPH_SIGNATURES = {
    "decoder-only": {"model": "decoder_step"},
    "encoder-decoder": {"encoder": "encoder", "decoder": "decoder_step"},
    "encoder-only": {"model": "serving_default"},
}


def _ids(name):
    return tf.TensorSpec((None, None), INT, name=name)


def _generative_signatures(model, family, special_ids) -> dict:
    eos, pad, bos = special_ids.get("eos"), special_ids.get("pad", 0), special_ids.get("bos")
    budget = tf.TensorSpec((), tf.int32, name="max_new_tokens")
    if family == "decoder-only":

        @tf.function(input_signature=[_ids("input_ids"), _ids("attention_mask")])
        def serve(input_ids, attention_mask):
            mask = tf.cast(attention_mask, tf.bool)
            ids, mask = _checked(_check_ids(input_ids, mask, model, "input"), input_ids, mask)
            cache = model.initial_cache(tf.shape(ids)[0])
            logits, _ = model.step(ids, cache, mask, positions(mask, tnp))
            return {"logits": logits}

        @tf.function(input_signature=[_ids("input_ids"), _ids("attention_mask"), budget])
        def generate(input_ids, attention_mask, max_new_tokens):
            ids, mask = left_align(input_ids, tf.cast(attention_mask, tf.bool), tnp)
            checks = _check_ids(ids, mask, model, "input")
            checks += check_budget(tf.shape(ids)[1], max_new_tokens, model.max_length, "prompt")
            ids, mask = _checked(checks, ids, mask)
            where = positions(mask, tnp)
            cache = model.initial_cache(tf.shape(ids)[0])
            logits, cache = model.step(ids, cache, mask, where)
            args = (logits, cache, mask, where, max_new_tokens, eos, pad)
            return {"tokens": cached_greedy(model, *args)}

        return {"serving_default": serve, "generate": generate}

    @tf.function(
        input_signature=[
            _ids("input_ids"),
            _ids("attention_mask"),
            _ids("decoder_input_ids"),
            _ids("decoder_attention_mask"),
        ]
    )
    def serve(input_ids, attention_mask, decoder_input_ids, decoder_attention_mask):
        source, source_mask = right_align(input_ids, tf.cast(attention_mask, tf.bool), tnp)
        mask = tf.cast(decoder_attention_mask, tf.bool)
        checks = _check_ids(source, source_mask, model, "source")
        checks += _check_ids(decoder_input_ids, mask, model, "target")
        source, source_mask, target, mask = _checked(
            checks, source, source_mask, decoder_input_ids, mask
        )
        cache = model.initial_cache(model.encode(source, source_mask), source_mask)
        logits, _ = model.step(target, cache, mask, positions(mask, tnp))
        return {"logits": logits}

    @tf.function(input_signature=[_ids("input_ids"), _ids("attention_mask"), budget])
    def generate(input_ids, attention_mask, max_new_tokens):
        source, source_mask = right_align(input_ids, tf.cast(attention_mask, tf.bool), tnp)
        checks = _check_ids(source, source_mask, model, "source")
        checks += check_budget(1, max_new_tokens, model.max_length, "target start")
        source, source_mask = _checked(checks, source, source_mask)
        memory = model.encode(source, source_mask)
        cache = model.initial_cache(memory, source_mask)
        batch = tf.shape(source)[0]
        start = tf.fill([batch, 1], tf.constant(bos, INT))
        mask = tf.ones([batch, 1], tf.bool)
        where = tf.zeros([batch, 1], INT)
        logits, cache = model.step(start, cache, mask, where)
        args = (logits, cache, mask, where, max_new_tokens, eos, pad)
        return {"tokens": cached_greedy(model, *args)}

    return {"serving_default": serve, "generate": generate}


def _masked_lm_signature(model) -> dict:
    """`masked_lm`: the masked LM called with `mask_positions`, as its Keras `call` takes
    them: (B, M) positions in [0, T) of the rows as given (right padded: an encoder's
    positions are its columns) → `logits` (B, M, V)."""
    core = backbone_of(model)
    inputs = [_ids("input_ids"), _ids("attention_mask"), _ids("mask_positions")]
    if core.type_vocabulary_size:
        inputs.append(_ids("token_type_ids"))

    @tf.function(input_signature=inputs)
    def masked_lm(input_ids, attention_mask, mask_positions, token_type_ids=None):
        width = tf.shape(input_ids, out_type=INT)[1]
        # Every column has a learned position, padding too: the width counts, not the mask.
        checks = _check_ids(input_ids, tf.ones_like(input_ids), core, "input")
        checks += [
            tf.debugging.assert_non_negative(
                mask_positions, message="mask_positions must be at least 0"
            ),
            tf.debugging.assert_less(
                mask_positions,
                width,
                message="mask_positions must be less than the sequence length T",
            ),
        ]
        ids, mask, where = _checked(checks, input_ids, attention_mask, mask_positions)
        features = {"token_ids": ids, "padding_mask": mask, "mask_positions": where}
        if token_type_ids is not None:
            features["segment_ids"] = token_type_ids
        return {"logits": model(features)}

    return {"masked_lm": masked_lm}


def _checked(checks: list, *tensors):
    """`tensors` (ids and masks), readable only once `checks` (assertions) have passed:
    what reads them (the embeddings' gathers) cannot fail first, in TensorFlow's words."""
    with tf.control_dependencies(checks):
        return tuple(tf.identity(tensor) for tensor in tensors)


def _check_ids(ids, mask, model, what: str) -> list:
    """Errors, not silently wrong logits, for `what`'s ids outside the vocabulary (a
    negative id would read the table's last row) and for more real tokens in a row than
    the model has positions (sinusoidal ones would go on past them): what the Keras layers
    check on eager inputs (`layers.validation`), at the signature's edge."""
    vocabulary = model.output_vocabulary_size if what == "target" else model.vocabulary_size
    longest = tf.reduce_max(tf.reduce_sum(tf.cast(mask, INT), axis=1))
    return [
        tf.debugging.assert_non_negative(ids, message=f"{what} ids must be at least 0"),
        tf.debugging.assert_less(
            ids,
            tf.constant(vocabulary, INT),
            message=f"{what} ids must be less than the vocabulary size {vocabulary}",
        ),
        tf.debugging.assert_less_equal(
            longest,
            tf.constant(model.max_length, INT),
            message=f"the {what} is longer than the model's max_length={model.max_length}",
        ),
    ]


def export_saved_model(
    model,
    out_dir: str | os.PathLike,
    tokenizer=None,
    target_tokenizer=None,
    config: RunConfig | None = None,
    validate: bool = True,
    atol: float = ATOL,
    tokenizer_dir: str | None = None,
    label_names=None,
) -> dict:
    """Writes `out_dir/saved_model/` (see the module docstring for its signatures), the
    tokenizer files and `config.json`.

    Args:
        model: a model of any family (as for `export_onnx`: one built under a mixed
            precision policy is exported as its float32 copy).
        out_dir: the export directory; an ONNX export of the same weights may share it
            (one of other weights is removed; one of another run is refused, as for
            `export_onnx`).
        tokenizer, target_tokenizer, config, tokenizer_dir, label_names: as for `export_onnx`.
        validate: reload the SavedModel and compare its signatures with the model (see the
            module docstring); a difference raises `ExportError` and writes nothing.
        atol: the largest absolute difference validation accepts.

    Returns:
        A report: the signatures written and the largest difference from the model.
    """
    check_export_arguments(model, out_dir, tokenizer, target_tokenizer, tokenizer_dir, atol)
    out_dir = os.fspath(out_dir)
    model = float32_model(model)
    config = make_config(model, config, tokenizer, target_tokenizer, label_names)
    staged = StagedExport(out_dir, config, tokenizer_dir)  # refuses another run's export
    dims = dimensions_of(model)
    graphs = step_graphs(model, config.normalizes_embeddings)
    names = GRAPH_SIGNATURES[config.family]
    signatures = {names[g.name]: g.function for g in graphs}
    if config.family != "encoder-only":
        signatures.update(_generative_signatures(model, config.family, config.special_ids))
    if isinstance(model, EncoderOnlyMaskedLM):
        signatures.update(_masked_lm_signature(model))
    # Keras' ExportArchive, not a bare tf.Module: its variables restore in TF1-style
    # sessions too, which `saved_model_cli run` uses.
    archive = keras.export.ExportArchive()
    archive.track(model)
    for name, function in signatures.items():
        archive.add_endpoint(name, function)
    with staged:
        path = staged.path(SAVED_MODEL_DIR)
        log.info("saved_model: writing %s", count(len(signatures), "signature"))
        archive.write_out(path, verbose=False)
        worst = 0.0
        if validate:
            log.info("saved_model: reloading it to compare with the model")
            loaded = tf.saved_model.load(path)
            for graph in graphs:
                function = loaded.signatures[names[graph.name]]

                def run(feeds, function=function):
                    outputs = function(**{k: tf.constant(v) for k, v in feeds.items()})
                    return {k: v.numpy() for k, v in outputs.items()}

                label = f"SavedModel signature {names[graph.name]!r}"
                worst = max(worst, compare_graph(graph, dims, run, label, atol))
            if config.family != "encoder-only":
                serve = loaded.signatures["serving_default"]
                worst = max(worst, check_padding(serve, model, config.family, dims, atol))
                log.info("saved_model: comparing 'generate' with the model's greedy tokens")
                generate = loaded.signatures["generate"]
                check_generate(generate, model, config.family, config.special_ids, dims, atol)
            if "masked_lm" in signatures:
                masked_lm = loaded.signatures["masked_lm"]
                worst = max(worst, check_masked_lm(masked_lm, model, dims, atol))
        has_tokenizer = write_tokenizers(
            staged.staging, config, tokenizer, target_tokenizer, tokenizer_dir
        )
        entry = {
            "directory": SAVED_MODEL_DIR,
            "signatures": sorted(signatures),
            "graphs": {graph: name for graph, name in names.items()},
        }
        staged.write_config("saved_model", entry, dims, has_tokenizer, weights_digest(model))
    log.info("saved_model: largest difference from the model %.1e", worst)
    return {"signatures": sorted(signatures), "max_abs_diff": worst}
