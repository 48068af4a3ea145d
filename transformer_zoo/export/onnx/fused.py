"""The fused export: each family's step graphs written directly from the model's weights
with onnxruntime's `com.microsoft` operators, the way onnxruntime-genai's model builder
writes its graphs (tf2onnx and onnxruntime's transformer optimizer do not produce them from
Keras graphs).

Per block: one MatMul for the query, key and value projections (`Split` into three), one
`MultiHeadAttention` (scaled dot product, masks, causal, and the cache's concatenation:
`past_key`/`past_value` in, `present_key`/`present_value` out), one MatMul for the output
projection, whose bias and residual add go into `SkipLayerNormalization` together with the
next LayerNorm; the FFN is MatMul, `BiasGelu` / `FastGelu` / `QuickGelu` / Relu with its
bias, MatMul. A Pre-LN stack (GPT-2) normalises the sum of a sublayer's output and the
residual stream for the next sublayer in that one node (its fourth output is the stream
itself); a Post-LN stack (the paper, BERT) normalises it in place. The attention mask is
cast once per step, not once per layer; an encoder-decoder's encoder projects the cross
keys and values of every decoder layer in one MatMul.

The graphs keep the I/O of `generation.graphs` (names, dtypes, shapes), so every runner
and onnxruntime-genai run them unchanged; `export_onnx` validates them against the Keras
model like the tf2onnx graphs.

This module assembles each family's graphs; `graph_writer` holds the graph-writing
primitives (`GraphWriter`), `layer_writer` the nodes of each layer and of a stack of blocks
(`LayerWriter`), `packing` the padding-free layout of the encoder-only graph (`Packing`).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from transformer_zoo.export.onnx.graph_writer import FLOAT, INT64, GraphWriter, as_numpy
from transformer_zoo.export.onnx.layer_writer import LayerWriter
from transformer_zoo.export.onnx.packing import Packing
from transformer_zoo.generation.engine import LOGITS_TO_KEEP, PADDING_FREE
from transformer_zoo.generation.graphs import GRAPH_FILES
from transformer_zoo.models import EncoderOnlyClassifier, EncoderOnlyMaskedLM
from transformer_zoo.models.family import backbone_of, family_of


def _writer(name: str) -> tuple[GraphWriter, LayerWriter]:
    g = GraphWriter(name)
    return g, LayerWriter(g)


def _mask(g: GraphWriter, name: str) -> str:
    """The int32 key padding mask `MultiHeadAttention` reads, cast once per graph."""
    return g.op("Cast", [name], name, to=TensorProto.INT32)


def _sentence_embedding(
    g: GraphWriter, w: LayerWriter, sequence: str, attention_mask: str, normalize: bool
) -> str:
    """`models.encoder_only.mean_pool` of the (B, S, D) `sequence`, whose padding positions
    hold zeros (`Packing.unpack`): the sum over S over the real-token count (at least
    1e-9), with `normalize` divided by its L2 norm (at least 1e-12). (B, D)."""
    hint = "sentence_embedding"
    count = g.op("Cast", [attention_mask], hint, to=FLOAT)
    count = g.op("ReduceSum", [count, w.ints([1])], hint, keepdims=1)  # (B, 1)
    count = g.op("Max", [count, g.weight(f"{hint}/min_count", np.float32(1e-9))], hint)
    mean = g.op("Div", [g.op("ReduceSum", [sequence, w.ints([1])], hint, keepdims=0), count], hint)
    if not normalize:
        return mean
    norm = g.op("ReduceSum", [g.op("Mul", [mean, mean], hint), w.ints([1])], hint, keepdims=1)
    norm = g.op(
        "Max", [g.op("Sqrt", [norm], hint), g.weight(f"{hint}/min_norm", np.float32(1e-12))], hint
    )
    return g.op("Div", [mean, norm], hint)


def _last_positions(g: GraphWriter, w: LayerWriter, x: str) -> str:
    """The last `logits_to_keep` positions of the (B, S, D) `x`, an optional scalar input
    (default 0: every position). The engines pass 1 when they read only each row's next
    token, so that a prompt's LM head runs on one position, not on all of them; the
    plain graphs and the TensorFlow runners have no such input and compute all."""
    g.input(LOGITS_TO_KEEP, INT64, [])
    g.initializers.append(numpy_helper.from_array(np.array(0, np.int64), LOGITS_TO_KEEP))
    start = g.op("Neg", [g.op("Unsqueeze", [LOGITS_TO_KEEP, w.ints([0])], "keep")], "keep")
    return g.op("Slice", [x, start, w.ints([2**63 - 1]), w.ints([1])], "keep")


def _cache_inputs(g, model, part: str, past: str):
    shape = ["batch", model.num_heads, past, model.head_dim]
    names = []
    for i in range(model.num_layers):
        pair = []
        for kind in ("key", "value"):
            pair.append(g.input(f"past_key_values.{i}.{part}{kind}", FLOAT, shape))
        names.append(pair)
    return names


def _present_outputs(g, model, part: str):
    shape = ["batch", model.num_heads, "total_sequence", model.head_dim]
    names = []
    for i in range(model.num_layers):
        names.append([f"present.{i}.{part}key", f"present.{i}.{part}value"])
        for name in names[-1]:
            g.output(name, FLOAT, shape)
    return names


def decoder_only(model, opset: int) -> dict[str, onnx.ModelProto]:
    g, w = _writer("model")
    ids = g.input("input_ids", INT64, ["batch", "sequence"])
    bias = w.causal_bias(g.input("attention_mask", INT64, ["batch", "total_sequence"]), ids)
    positions = g.input("position_ids", INT64, ["batch", "sequence"])
    past = _cache_inputs(g, model, "", "past_sequence")
    g.output("logits", FLOAT, ["batch", "logits_sequence", model.vocabulary_size])
    present = _present_outputs(g, model, "")

    def attend(kind, index, block, x):
        cache = (*past[index], *present[index])
        return w.attention(block.self_attention, x, f"block_{index}.self", bias=bias, cache=cache)

    terms = w.embeddings(model.embeddings, ids, positions, None, "embeddings")
    x = w.stack(model.blocks, terms, None, model.final_norm, attend, "block")
    x = _last_positions(g, w, x)
    g.nodes.append(helper.make_node("Identity", [w.lm_head(model.lm_head, x)], ["logits"]))
    return {"model": g.model(opset)}


def encoder_decoder(model, opset: int) -> dict[str, onnx.ModelProto]:
    # The encoder, and the cross keys and values of every decoder layer in one MatMul.
    g, w = _writer("encoder")
    ids = g.input("input_ids", INT64, ["batch", "source_sequence"])
    mask = _mask(g, g.input("attention_mask", INT64, ["batch", "source_sequence"]))
    g.output("last_hidden_state", FLOAT, ["batch", "source_sequence", model.hidden_dim])

    def attend_encoder(kind, index, block, x):
        return w.attention(block.self_attention, x, f"encoder_block_{index}.self", mask)

    terms = w.embeddings(model.encoder_embeddings, ids, None, None, "encoder_embeddings")
    memory = w.stack(model.encoder_blocks, terms, None, None, attend_encoder, "encoder_block")
    g.nodes.append(helper.make_node("Identity", [memory], ["last_hidden_state"]))
    layers = [block.cross_attention_layer.key_value_dense for block in model.decoder_blocks]
    kernel = np.concatenate([as_numpy(d.kernel) for d in layers], axis=1)  # (D, L·2·H·Dh)
    projected = g.op("MatMul", [memory, g.weight("cross.kernel", kernel)], "cross")
    if layers[0].use_bias:
        bias = np.concatenate([as_numpy(d.bias) for d in layers])
        projected = g.op("Add", [projected, g.weight("cross.bias", bias)], "cross")
    heads, width = model.num_heads, model.head_dim
    split = g.op(
        "Reshape", [projected, w.ints([0, 0, 2 * model.num_layers * heads, width])], "cross"
    )
    split = g.op("Transpose", [split], "cross", perm=[0, 2, 1, 3])  # (B, L·2·H, S, Dh)
    names = [
        f"present.{i}.encoder.{kind}" for i in range(model.num_layers) for kind in ("key", "value")
    ]
    g.op("Split", [split, w.ints([heads] * len(names))], "cross", outputs=names, axis=1)
    for name in names:
        g.output(name, FLOAT, ["batch", heads, "source_sequence", width])
    encoder = g.model(opset)

    g, w = _writer("decoder")
    ids = g.input("input_ids", INT64, ["batch", "sequence"])
    bias = w.causal_bias(g.input("attention_mask", INT64, ["batch", "total_sequence"]), ids)
    positions = g.input("position_ids", INT64, ["batch", "sequence"])
    source_mask = _mask(g, g.input("encoder_attention_mask", INT64, ["batch", "source_sequence"]))
    past = _cache_inputs(g, model, "decoder.", "past_sequence")
    cross = [
        [g.input(f"past_key_values.{i}.encoder.{kind}", FLOAT,
                 ["batch", heads, "source_sequence", width]) for kind in ("key", "value")]
        for i in range(model.num_layers)
    ]  # fmt: skip
    g.output("logits", FLOAT, ["batch", "logits_sequence", model.output_vocabulary_size])
    present = _present_outputs(g, model, "decoder.")

    def attend_decoder(kind, index, block, x):
        hint = f"decoder_block_{index}.{kind}"
        if kind == "cross":
            return w.attention(
                block.cross_attention_layer, x, hint, source_mask, cross=cross[index]
            )
        cache = (*past[index], *present[index])
        return w.attention(block.self_attention, x, hint, bias=bias, cache=cache)

    terms = w.embeddings(model.decoder_embeddings, ids, positions, None, "decoder_embeddings")
    x = w.stack(model.decoder_blocks, terms, None, None, attend_decoder, "decoder_block")
    x = _last_positions(g, w, x)
    g.nodes.append(helper.make_node("Identity", [w.lm_head(model.lm_head, x)], ["logits"]))
    return {"encoder": encoder, "decoder": g.model(opset)}


def encoder_only(model, opset: int, normalize: bool = True) -> dict[str, onnx.ModelProto]:
    core = backbone_of(model)
    g, w = _writer("model")
    ids = g.input("input_ids", INT64, ["batch", "sequence"])
    attention_mask = g.input("attention_mask", INT64, ["batch", "sequence"])
    mask = _mask(g, attention_mask)
    packing = Packing(w, attention_mask)
    segments = None
    if core.type_vocabulary_size:
        segments = g.input("token_type_ids", INT64, ["batch", "sequence"])
        segments = packing.select(segments, "segments")

    def attend(kind, index, block, x):
        return w.attention(block.self_attention, x, f"block_{index}.self", mask, packing=packing)

    tokens, positions = packing.select(ids, "ids"), packing.positions()
    terms = w.embeddings(core.embeddings, tokens, positions, segments, "embeddings")
    packed = w.stack(core.blocks, terms, core.embeddings_norm, None, attend, "block")
    sequence = packing.unpack(packed, "sequence", zeros=True)
    outputs = {
        "last_hidden_state": (sequence, ["batch", "sequence", core.hidden_dim]),
        "sentence_embedding": (_sentence_embedding(g, w, sequence, attention_mask, normalize),
                               ["batch", core.hidden_dim]),
    }  # fmt: skip
    first = g.op("Gather", [sequence, w.ints(0)], "first_token", axis=1)  # (B, D)
    pooled = first
    if core.pooler_dense is not None:
        pooled = g.op("Tanh", [w.dense(first, core.pooler_dense, "pooler")], "pooler")
        outputs["pooler_output"] = (pooled, ["batch", core.hidden_dim])
    if isinstance(model, EncoderOnlyClassifier):
        logits = w.dense(pooled, model.classifier, "classifier")
        outputs["logits"] = (logits, ["batch", model.classifier.units])
    elif isinstance(model, EncoderOnlyMaskedLM):
        vocabulary = model.lm_head.vocabulary_size
        logits = packing.unpack(w.lm_head(model.lm_head, packed), "logits", zeros=True)
        outputs["logits"] = (logits, ["batch", "sequence", vocabulary])
    for name in sorted(outputs):
        value, shape = outputs[name]
        g.nodes.append(helper.make_node("Identity", [value], [name]))
        g.output(name, FLOAT, shape)
    return {"model": g.model(opset, {PADDING_FREE: "true"})}


WRITERS = {
    "decoder-only": decoder_only,
    "encoder-decoder": encoder_decoder,
    "encoder-only": encoder_only,
}


def fused_graphs(
    model, opset: int, normalize_embeddings: bool = True
) -> dict[str, onnx.ModelProto]:
    """Graph name (`"model"`, `"encoder"`, `"decoder"`) → the fused `ModelProto`, for the
    graph files of `generation.graphs.GRAPH_FILES`; an encoder-only `sentence_embedding`
    is L2-normalised with `normalize_embeddings`, as `step_graphs`."""
    family = family_of(model)
    if family == "encoder-only":
        protos = encoder_only(model, opset, normalize_embeddings)
    else:
        protos = WRITERS[family](model, opset)
    assert set(protos) <= set(GRAPH_FILES)
    return protos
