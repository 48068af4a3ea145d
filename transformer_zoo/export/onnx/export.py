"""`export_onnx`: a model (ours, trained or built in user code) → a self-describing ONNX
directory that `transformer_zoo.serving` and onnxruntime-genai can serve.

Two kinds of graph, with the same inputs and outputs (`generation.graphs`):

- `graphs="fused"` (the default): written from the weights with onnxruntime's fused
  `com.microsoft` operators (`fused`: MultiHeadAttention, SkipLayerNormalization,
  BiasGelu / FastGelu), about a fifth of the nodes.
- `graphs="plain"`: standard ONNX operators only, for runtimes without onnxruntime's contrib
  operators: each graph of `generation.graphs.step_graphs` converted by
  `tf2onnx.convert.from_function`, rewritten by `layer_norm` (one `LayerNormalization` node
  per LayerNorm, which tf2onnx expands into 13 nodes) and `rewrites`.

Either is checked by `onnx.checker`, loaded in onnxruntime and compared with the
TensorFlow function (`validation`); any failure raises `ExportError` and leaves the
directory as it was (`staged_export.StagedExport`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time

import onnx

from transformer_zoo.errors import ModelDirectoryError
from transformer_zoo.export.directory import (
    check_export_arguments,
    float32_model,
    make_config,
    write_tokenizers,
)
from transformer_zoo.export.onnx import fused, layer_norm, rewrites
from transformer_zoo.export.onnx.genai_config import write_genai_config
from transformer_zoo.export.staged_export import StagedExport, weights_digest
from transformer_zoo.export.validation import ATOL, ExportError, compare_graph
from transformer_zoo.generation.graphs import Graph, step_graphs
from transformer_zoo.generation.onnx_runner import DEFAULT_THREADS, make_session
from transformer_zoo.models.family import dimensions_of
from transformer_zoo.run_directory import ModelDimensions, RunConfig
from transformer_zoo.text import Tokenizer
from transformer_zoo.text.wordpiece import WordPieceTokenizer

OPSET = 17  # LayerNormalization needs 17; tf2onnx 1.17 supports up to 18
GRAPH_KINDS = ("fused", "plain")
COLLECT_ABOVE_BYTES = 32 * 2**20  # see `_collect_between_optimizers`
log = logging.getLogger(__name__)  # stages of an export; `transformer-zoo export` shows them


def convert_graph(
    graph: Graph, opset: int = OPSET, fuse_layer_norm: bool = True, simplify: bool = True
):
    """tf2onnx's conversion of one graph, LayerNorms fused and the graph simplified
    (`export.onnx.rewrites`). Returns `(ModelProto, info)`."""
    import tf2onnx

    if opset < 17:
        raise ValueError(f"`opset` must be 17 or 18. Received: opset={opset}")
    started = time.perf_counter()
    with _collect_between_optimizers(_weight_bytes(graph) > COLLECT_ABOVE_BYTES):
        proto, _ = tf2onnx.convert.from_function(
            graph.function, input_signature=graph.inputs, opset=opset
        )
    fused = 0
    if fuse_layer_norm:
        proto, fused = layer_norm.fuse_layer_norm(proto)
    applied = {}
    if simplify:
        proto, applied = rewrites.simplify(proto)
    names = [i.name for i in proto.graph.input], [o.name for o in proto.graph.output]
    expected = [s.name for s in graph.inputs], graph.outputs
    if sorted(names[0]) != sorted(expected[0]) or sorted(names[1]) != sorted(expected[1]):
        raise ExportError(f"tf2onnx named the I/O of {graph.file} {names}, expected {expected}.")
    info = {
        "seconds": round(time.perf_counter() - started, 2),
        "fused_layer_norms": fused,
        "nodes": len(proto.graph.node),
        "rewrites": applied,
    }
    return proto, info


def dimension_names(proto: onnx.ModelProto) -> dict[str, list[str]]:
    """Each input's and output's dimension names (`""` for a fixed size) in `proto`."""
    return {
        value.name: [dim.dim_param for dim in value.type.tensor_type.shape.dim]
        for value in (*proto.graph.input, *proto.graph.output)
    }


def name_dimensions(proto: onnx.ModelProto, names: dict[str, list[str]]) -> None:
    """Names the symbolic dimensions of `proto`'s inputs and outputs as `names` (the fused
    graph's `dimension_names`) does: `batch`, `sequence`, `past_sequence` … tf2onnx names
    each one `unk__N` apart, so that nothing said that two inputs share their batch, and
    onnxruntime's dimension overrides by name found none."""
    for value in (*proto.graph.input, *proto.graph.output):
        named = names.get(value.name)
        dims = value.type.tensor_type.shape.dim
        if named is None or len(named) != len(dims):
            continue
        for dim, name in zip(dims, named, strict=True):
            if name and not dim.HasField("dim_value"):
                dim.dim_param = name


def _weight_bytes(graph: Graph) -> int:
    """The bytes of the variables a graph's function captures (its weights)."""
    function = graph.function.get_concrete_function(*graph.inputs)
    return sum(v.shape.num_elements() * v.dtype.size for v in function.variables)


@contextlib.contextmanager
def _collect_between_optimizers(enabled: bool = True):
    """Runs Python's cycle collector after each of tf2onnx's ONNX optimizers (for graphs
    whose weights pass `COLLECT_ABOVE_BYTES`: a collection costs tenths of a second in a
    process full of Keras objects, a small model's conversion three times its time).

    tf2onnx deep-copies the whole graph, weights included (protobuf memory the collector's
    object counts do not see), before every optimizer of every pass; the old copies are
    cycles, which the collector's generation thresholds free late. A 6-layer, width-768
    GPT-2 then peaked at over 22 GB and was killed; with a collection after each
    optimizer, a 2-layer width-768 model peaks at 2.3 GB instead of 6.0 (same graph).
    tf2onnx 1.17 keeps its optimizers in `tf2onnx.optimizer._optimizers`, the one
    private name used here; they are restored on exit.
    """
    import gc

    from tf2onnx import optimizer as tf2onnx_optimizer

    registry = tf2onnx_optimizer._optimizers
    original = dict(registry)
    if not enabled:
        yield
        return

    def collecting(factory):
        class Collecting(factory):
            def optimize(self, graph, iteration):
                result = super().optimize(graph, iteration)
                gc.collect()
                return result

        return Collecting

    registry.update({name: collecting(factory) for name, factory in original.items()})
    try:
        yield
    finally:
        registry.clear()
        registry.update(original)


def validate_onnx_file(path: str, graph: Graph, dims: ModelDimensions, atol: float = ATOL) -> float:
    """onnx.checker, an onnxruntime session, and the comparison with TensorFlow."""
    try:
        onnx.checker.check_model(path, full_check=True)
    except Exception as error:
        raise ExportError(f"onnx.checker rejects {os.path.basename(path)}: {error}") from error
    try:
        session = make_session(path, DEFAULT_THREADS)
    except ModelDirectoryError as error:
        raise ExportError(f"onnxruntime cannot load the export: {error}") from error
    outputs = [o.name for o in session.get_outputs()]

    def run(feeds):
        return dict(zip(outputs, session.run(outputs, feeds), strict=True))

    return compare_graph(graph, dims, run, os.path.basename(path), atol)


def export_onnx(
    model,
    out_dir: str | os.PathLike,
    tokenizer: Tokenizer | WordPieceTokenizer | None = None,
    target_tokenizer: Tokenizer | None = None,
    config: RunConfig | None = None,
    opset: int = OPSET,
    fuse_layer_norm: bool = True,
    simplify: bool = True,
    validate: bool = True,
    atol: float = ATOL,
    intra_op_num_threads: int = DEFAULT_THREADS,
    tokenizer_dir: str | None = None,
    label_names=None,
    graphs: str = "fused",
) -> dict:
    """Exports `model` to ONNX files with Optimum's names in `out_dir`.

    Args:
        model: a `DecoderOnly`, `EncoderDecoder`, `EncoderOnly`, `EncoderOnlyClassifier`
            or `EncoderOnlyMaskedLM`; one built under a mixed precision policy is
            exported (and validated) as its float32 copy, as training saves it.
        out_dir: the directory to write (created if needed): the `.onnx` files,
            `config.json`, the tokenizer files, and `genai_config.json` for decoder-only;
            new, empty, or an export of the same run (`check_export_target`), whose files
            this export's replace (and a SavedModel of other weights is removed).
        tokenizer: the (source) `Tokenizer` or `WordPieceTokenizer`, written next to the
            model, with no more tokens than the model's vocabulary; None exports a model
            that serves token ids only.
        target_tokenizer: an encoder-decoder's separate target `Tokenizer`.
        config: the run's `RunConfig`; None makes one (preset "custom", default task).
        opset: ONNX opset, 17 or 18.
        fuse_layer_norm: (plain graphs) rewrite tf2onnx's LayerNorm expansions as single
            nodes (False only to measure the difference).
        simplify: (plain graphs) apply `rewrites` (one MatMul per Dense, fused QKV,
            `Where`, common subexpressions); False only to measure the difference.
        validate: compare every graph with the model (always on, except to measure).
        atol: the largest absolute difference validation accepts.
        intra_op_num_threads: written into `genai_config.json`'s session options.
        tokenizer_dir: copy the tokenizer files from this run directory instead.
        label_names: a classifier's label names when `config` is None (default "0", "1", ...).
        graphs: `"fused"` (onnxruntime's fused operators) or `"plain"` (standard ONNX
            operators through tf2onnx, for other runtimes).

    Returns:
        A report: per graph file, writing seconds, nodes, file size and the largest
        difference from the model (plain graphs: also the fused LayerNorms and rewrites).

    Raises:
        ExportError: a graph failed to convert, load or match the model.
        ValueError: `out_dir` holds an export of another run or other files; an argument
            of the wrong kind (a path for `model`: load it with `load_run_model`), a
            tokenizer with more tokens than the model's vocabulary, `label_names` for a
            model that is no classifier, a `tokenizer_dir` without the tokenizer files
            (`check_export_arguments`, `make_config`), all before anything is written.
    """
    check_export_arguments(model, out_dir, tokenizer, target_tokenizer, tokenizer_dir, atol)
    if graphs not in GRAPH_KINDS:
        raise ValueError(f"`graphs` must be one of {GRAPH_KINDS}. Received: graphs={graphs!r}")
    if opset not in (17, 18):
        raise ValueError(f"`opset` must be 17 or 18. Received: opset={opset!r}")
    out_dir = os.fspath(out_dir)
    model = float32_model(model)
    config = make_config(model, config, tokenizer, target_tokenizer, label_names)
    staged = StagedExport(out_dir, config, tokenizer_dir)  # refuses another run's export
    dims = dimensions_of(model)
    report, entries = {}, {}
    with staged:
        started = time.perf_counter()
        if graphs == "fused":
            log.info("writing the fused graphs (opset %d + com.microsoft)", opset)
        written = fused.fused_graphs(model, opset, config.normalizes_embeddings)
        seconds = round(time.perf_counter() - started, 2)
        if graphs == "plain":  # their dimension names, not the fused graphs' weights
            names = {name: dimension_names(proto) for name, proto in written.items()}
            written = None
        for graph in step_graphs(model, config.normalizes_embeddings):
            if graphs == "fused":
                proto = written[graph.name]
                info = {"seconds": seconds, "nodes": len(proto.graph.node)}
            else:
                log.info("%s: converting with tf2onnx (opset %d)", graph.file, opset)
                proto, info = convert_graph(graph, opset, fuse_layer_norm, simplify)
                name_dimensions(proto, names[graph.name])
            path = staged.path(graph.file)
            onnx.save(proto, path)
            if validate:
                try:
                    info["max_abs_diff"] = validate_onnx_file(path, graph, dims, atol)
                except ExportError as error:
                    if graphs == "plain":
                        raise
                    raise ExportError(
                        f"{error} The plain graphs (graphs='plain', `export --plain`) are "
                        "converted from the model's own TensorFlow graph instead."
                    ) from error
            info["bytes"] = os.path.getsize(path)
            report[graph.file] = info
            log.info(
                "%s: %d nodes, %.1f MB, largest difference from the model %s",
                graph.file,
                info["nodes"],
                info["bytes"] / 1e6,
                f"{info['max_abs_diff']:.1e}" if "max_abs_diff" in info else "not checked",
            )
            entries[graph.name] = {
                "file": graph.file,
                "inputs": [i.name for i in proto.graph.input],  # the fused: + logits_to_keep
                "outputs": graph.outputs,
            }
        has_tokenizer = write_tokenizers(
            staged.staging, config, tokenizer, target_tokenizer, tokenizer_dir
        )
        if config.family == "decoder-only":
            write_genai_config(staged.staging, dims, config.special_ids, intra_op_num_threads)
        entry = {"opset": opset, "graph_kind": graphs, "graphs": entries}
        if graphs == "plain":
            entry.update(fused_layer_norm=fuse_layer_norm, simplified=simplify)
        staged.write_config("onnx", entry, dims, has_tokenizer, weights_digest(model))
    return report
