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
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from transformer_zoo.generation.engine import LOGITS_TO_KEEP, PADDING_FREE
from transformer_zoo.generation.graphs import GRAPH_FILES
from transformer_zoo.models import EncoderOnlyClassifier, EncoderOnlyMaskedLM
from transformer_zoo.models.family import backbone_of, family_of

MICROSOFT = "com.microsoft"
# Masked scores: our layers write the lowest float32 in place of a masked score, so that a
# query with no allowed key (a padding position) averages all values uniformly; added to
# a score instead, -3e38 swallows it the same way.
MASK_FILTER_VALUE = -3.0e38
INT64 = TensorProto.INT64
FLOAT = TensorProto.FLOAT


def _numpy(variable) -> np.ndarray:
    return np.asarray(variable.numpy() if hasattr(variable, "numpy") else variable, np.float32)


class GraphWriter:
    """Collects nodes, weights, inputs and outputs and makes the `ModelProto`."""

    def __init__(self, name: str):
        self.name = name
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self._used = Counter()

    def unique(self, hint: str) -> str:
        self._used[hint] += 1
        count = self._used[hint]
        return hint if count == 1 else f"{hint}_{count}"

    def weight(self, hint: str, array) -> str:
        name = self.unique(hint)
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def op(self, op_type: str, inputs, hint: str, outputs: int = 1, domain: str = "", **attrs):
        """Adds a node; returns its output name, or the list of `outputs` names (`None`
        in `outputs` as a list marks an optional output left out)."""
        names = outputs if isinstance(outputs, list) else [
            self.unique(f"{hint}/{op_type}" + (f":{i}" if outputs > 1 else ""))
            for i in range(outputs)
        ]  # fmt: skip
        names = [name or "" for name in names]
        self.nodes.append(
            helper.make_node(
                op_type,
                list(inputs),
                names,
                name=self.unique(f"{hint}/{op_type}"),
                domain=domain or None,
                **attrs,
            )
        )
        return names[0] if not isinstance(outputs, list) and outputs == 1 else names

    def input(self, name: str, elem_type: int, shape) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, elem_type, shape))
        return name

    def output(self, name: str, elem_type: int, shape) -> None:
        self.outputs.append(helper.make_tensor_value_info(name, elem_type, shape))

    def model(self, opset: int, metadata: dict[str, str] | None = None) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes, self.name, self.inputs, self.outputs, self.initializers
        )
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(MICROSOFT, 1)],
            producer_name="transformer_zoo",
        )
        model.ir_version = min(model.ir_version, 10)
        helper.set_model_props(model, metadata or {})
        return model


class _Writer:
    """The layers of our models as fused ONNX nodes (one method per layer type)."""

    def __init__(self, g: GraphWriter):
        self.g = g
        self._constants: dict[str, str] = {}  # int64 constants, written once per graph
        # id(TokenAndPositionEmbedding) -> its token table's initializer, for a tied head
        self._token_tables: dict[int, str] = {}

    # --- primitives ---------------------------------------------------------------

    def dense(self, x: str, layer, hint: str, with_bias: bool = True):
        """`x @ kernel` and the bias: added here (`with_bias`), or returned for a fused
        node to add: `(output, bias name or None)`."""
        out = self.g.op("MatMul", [x, self.g.weight(f"{hint}.kernel", _numpy(layer.kernel))], hint)
        bias = self.g.weight(f"{hint}.bias", _numpy(layer.bias)) if layer.use_bias else None
        if with_bias:
            return self.g.op("Add", [out, bias], hint) if bias else out
        return out, bias

    def layer_norm(self, x: str, norm, hint: str) -> str:
        gamma, beta = self._norm_weights(norm, hint)
        return self.g.op(
            "LayerNormalization", [x, gamma, beta], hint, axis=-1, epsilon=float(norm.epsilon)
        )

    def _norm_weights(self, norm, hint):
        gamma = self.g.weight(f"{hint}.gamma", _numpy(norm.gamma))
        beta = self.g.weight(f"{hint}.beta", _numpy(norm.beta))
        return gamma, beta

    def add_norm(self, x: str, bias: str | None, residual: str, norm, hint: str):
        """`norm(x + bias + residual)` in one `SkipLayerNormalization`; returns
        `(normalized, sum)`. Without a norm: `(sum, sum)`."""
        if norm is None:
            total = self.g.op("Add", [x, residual], hint)
            if bias:
                total = self.g.op("Add", [total, bias], hint)
            return total, total
        gamma, beta = self._norm_weights(norm, hint)
        normalized, total = self.g.unique(f"{hint}/normalized"), self.g.unique(f"{hint}/sum")
        self.g.op(
            "SkipLayerNormalization",
            [x, residual, gamma, beta] + ([bias] if bias else []),
            hint,
            outputs=[normalized, None, None, total],
            domain=MICROSOFT,
            epsilon=float(norm.epsilon),
        )
        return normalized, total

    def activation(self, x: str, bias: str | None, name: str, hint: str) -> str:
        """The FFN activation with its bias folded in where a fused operator exists."""
        if bias and name == "gelu":
            return self.g.op("BiasGelu", [x, bias], hint, domain=MICROSOFT)
        if name == "gelu_tanh":
            return self.g.op("FastGelu", [x] + ([bias] if bias else []), hint, domain=MICROSOFT)
        if bias:
            x = self.g.op("Add", [x, bias], hint)
        if name == "gelu":
            return self.g.op("Gelu", [x], hint, domain=MICROSOFT)
        if name == "swish":
            return self.g.op("QuickGelu", [x], hint, domain=MICROSOFT, alpha=1.0)
        if name == "relu":
            return self.g.op("Relu", [x], hint)
        raise ValueError(f"The fused export has no activation {name!r}.")

    # --- layers ---------------------------------------------------------------------

    def embeddings(self, layer, ids: str, positions: str | None, segments: str | None, hint):
        """The terms `TokenAndPositionEmbedding` sums: token (scaled), position, segment."""
        g = self.g
        table = g.weight(f"{hint}.token", _numpy(layer.token_embedding.embeddings))
        self._token_tables[id(layer)] = table
        tokens = g.op("Gather", [table, ids], hint)
        if layer.scale_embeddings:
            scale = g.weight(f"{hint}.scale", np.float32(math.sqrt(layer.embedding_dim)))
            tokens = g.op("Mul", [tokens, scale], hint)
        if positions is None:  # 0 .. S - 1 for every row (the encoders)
            length = g.op("Gather", [g.op("Shape", [ids], hint), self.ints(1)], hint)
            positions = g.op("Range", [self.ints(0), length, self.ints(1)], hint)
        encoding = self.positions(layer.position_encoding, layer.embedding_dim, positions, hint)
        terms = [tokens, encoding]
        if layer.segment_embedding is not None:
            segment_table = _numpy(layer.segment_embedding.embeddings)
            if segments is None:
                terms.append(g.weight(f"{hint}.segment_0", segment_table[0]))
            else:
                table = g.weight(f"{hint}.segment", segment_table)
                terms.append(g.op("Gather", [table, segments], hint))
        return terms

    def positions(self, encoding, width: int, positions: str, hint: str) -> str:
        """`PositionalEncoding`: the learned table's rows, or the sinusoid computed from
        the positions with the layer's formula (any position, as the layer allows)."""
        g = self.g
        if encoding.mode == "learned":
            table = g.weight(f"{hint}.position", _numpy(encoding.position_embeddings))
            return g.op("Gather", [table, positions], hint)
        inverse = np.exp(np.arange(0, width, 2, dtype=np.float32) * (-math.log(10000.0) / width))
        angles = g.op(
            "Mul",
            [
                g.op(
                    "Unsqueeze",
                    [g.op("Cast", [positions], hint, to=FLOAT), self.ints([-1])],
                    hint,
                ),
                g.weight(f"{hint}.inverse_frequency", inverse.astype(np.float32)),
            ],
            hint,
        )  # (B, S, D/2), or (S, D/2) for an encoder's shared positions
        sin, cos = g.op("Sin", [angles], hint), g.op("Cos", [angles], hint)
        if encoding.layout == "halves":
            return g.op("Concat", [sin, cos], hint, axis=-1)
        pairs = g.op(
            "Concat",
            [g.op("Unsqueeze", [sin, self.ints([-1])], hint),
             g.op("Unsqueeze", [cos, self.ints([-1])], hint)],
            hint,
            axis=-1,
        )  # fmt: skip
        shape = g.op("Concat", [g.op("Shape", [angles], hint), self.ints([-1])], hint, axis=0)
        shape = g.op("Slice", [shape, self.ints([0]), self.ints([-2]), self.ints([0])], hint)
        shape = g.op("Concat", [shape, self.ints([width])], hint, axis=0)
        return g.op("Reshape", [pairs, shape], hint)

    def ints(self, value) -> str:
        """An int64 constant (shapes, axes, split sizes), one initializer per value."""
        array = np.asarray(value, np.int64)
        key = f"const_{'x'.join(map(str, array.shape)) or 's'}_" + "_".join(
            str(v).replace("-", "m") for v in array.ravel()
        )
        if key not in self._constants:
            self._constants[key] = self.g.weight(key, array)
        return self._constants[key]

    def attention(self, layer, x: str, hint: str, mask: str = "", bias: str = "",
                  cache=None, cross=None, packing: Packing | None = None):  # fmt: skip
        """One `MultiHeadAttention` node; returns its (B, S, H·Dh) output. Masked by `mask`
        (a (B, T) int32 key padding mask) or `bias` (a (B, 1, S, T) additive bias,
        `causal_bias`). `cache`: (past key, past value, present key, present value) names
        for self-attention over a cache; `cross`: the (B, H, S, Dh) key and value names.
        `packing`: `x` holds only the real tokens (`Packing`); the projected query, key and
        value are laid out (B, S, ·) for the node and its output packed again."""
        g = self.g
        attrs = {"num_heads": layer.num_heads, "mask_filter_value": MASK_FILTER_VALUE}
        if cross is not None:
            query = self.dense(x, layer.query_dense, f"{hint}.query")
            return g.op(
                "MultiHeadAttention", [query, cross[0], cross[1], "", mask, bias], hint,
                domain=MICROSOFT, **attrs,
            )  # fmt: skip
        kernel = np.concatenate(
            [_numpy(layer.query_dense.kernel), _numpy(layer.key_value_dense.kernel)], axis=1
        )  # (D, 3·H·Dh): query, key, value
        qkv = g.op("MatMul", [x, g.weight(f"{hint}.qkv.kernel", kernel)], hint)
        if packing is not None:
            qkv = packing.unpack(qkv, hint)
        width = layer.num_heads * layer.head_width
        query, key, value = g.op("Split", [qkv, self.ints([width] * 3)], hint, outputs=3, axis=-1)
        qkv_bias = ""
        if layer.use_bias:
            qkv_bias = g.weight(
                f"{hint}.qkv.bias",
                np.concatenate(
                    [_numpy(layer.query_dense.bias), _numpy(layer.key_value_dense.bias)]
                ),
            )
        inputs = [query, key, value, qkv_bias, mask, bias]
        if cache is None:
            out = g.op("MultiHeadAttention", inputs, hint, domain=MICROSOFT, **attrs)
            return out if packing is None else packing.pack(out, hint)
        past_key, past_value, present_key, present_value = cache
        out = g.unique(f"{hint}/attended")
        g.op(
            "MultiHeadAttention", inputs + [past_key, past_value], hint,
            outputs=[out, present_key, present_value], domain=MICROSOFT, **attrs,
        )  # fmt: skip
        return out

    def causal_bias(self, attention_mask: str, ids: str) -> str:
        """The (B, 1, S, T) additive bias of causal self-attention over a left-padded cache,
        once per step for every layer: 0 where query i (at column T - S + i) may attend key
        j (j <= T - S + i and not padding), `MASK_FILTER_VALUE` elsewhere. A bias rather
        than `unidirectional` + a key padding mask, because `MultiHeadAttention` then
        drops a padding query's later keys, where our layer (and so every other engine)
        averages over all of them."""
        g, hint = self.g, "causal_bias"
        total = g.op("Gather", [g.op("Shape", [attention_mask], hint), self.ints(1)], hint)
        new = g.op("Gather", [g.op("Shape", [ids], hint), self.ints(1)], hint)
        rows = g.op("Range", [g.op("Sub", [total, new], hint), total, self.ints(1)], hint)
        columns = g.op("Range", [self.ints(0), total, self.ints(1)], hint)
        causal = g.op(
            "LessOrEqual",
            [g.op("Unsqueeze", [columns, self.ints([0])], hint),
             g.op("Unsqueeze", [rows, self.ints([1])], hint)],
            hint,
        )  # fmt: skip  # (S, T)
        keys = g.op(
            "Cast",
            [g.op("Unsqueeze", [attention_mask, self.ints([1, 2])], hint)],
            hint,
            to=TensorProto.BOOL,
        )
        allowed = g.op("And", [keys, causal], hint)  # (B, 1, S, T)
        zero = g.weight("bias_allowed", np.float32(0.0))
        masked = g.weight("bias_masked", np.float32(MASK_FILTER_VALUE))
        return g.op("Where", [allowed, zero, masked], hint)

    def feed_forward(self, layer, x: str, hint: str):
        hidden, bias = self.dense(x, layer.intermediate_dense, f"{hint}.intermediate", False)
        hidden = self.activation(hidden, bias, layer.activation, hint)
        return self.dense(hidden, layer.output_dense, f"{hint}.output", with_bias=False)

    def stack(self, blocks, terms: list[str], first_norm, final_norm, attend, hint: str) -> str:
        """Blocks over the sum of `terms` (the embeddings); `first_norm` normalises that sum
        first (BERT's embedding LayerNorm), `final_norm` the stack's output. `attend(kind,
        index, block, x)` writes a block's attention (`kind` "self" or "cross") and returns
        its (B, S, H·Dh) output. Returns the stack's output name."""
        pre_ln = {block.norm_first for block in blocks}
        if len(pre_ln) > 1:
            raise ValueError("The fused export needs all blocks of a stack Pre-LN or all Post-LN.")
        pre_ln = pre_ln.pop() if pre_ln else False
        if pre_ln and first_norm is not None:  # none of our models; validation would catch it
            raise ValueError("The fused export has no Pre-LN stack with an embedding LayerNorm.")
        steps = []
        for index, block in enumerate(blocks):
            steps.append((index, block, "self", block.self_attention_norm))
            if block.cross_attention:
                steps.append((index, block, "cross", block.cross_attention_norm))
            steps.append((index, block, "ffn", block.feed_forward_norm))
        total = terms[0]
        rest = terms[1:]
        for term in rest[1:]:
            rest[0] = self.g.op("Add", [rest[0], term], f"{hint}.embeddings")
        norm = steps[0][3] if pre_ln and steps else first_norm
        if rest:
            normalized, total = self.add_norm(total, None, rest[0], norm, f"{hint}.embeddings")
        else:
            normalized = self.layer_norm(total, norm, f"{hint}.embeddings") if norm else total
        # Pre-LN: `x` is the next sublayer's normalized input, `total` the residual stream;
        # Post-LN: `x` is both.
        x = normalized
        for position, (index, block, kind, norm) in enumerate(steps):
            name = f"{hint}.{index}.{kind}"
            if kind == "ffn":
                out, bias = self.feed_forward(block.feed_forward, x, name)
            else:
                layer = block.self_attention if kind == "self" else block.cross_attention_layer
                attended = attend(kind, index, block, x)
                out, bias = self.dense(attended, layer.output_dense, f"{name}.output", False)
            if pre_ln:
                following = steps[position + 1][3] if position + 1 < len(steps) else final_norm
                x, total = self.add_norm(out, bias, total, following, name)
            else:
                x, _ = self.add_norm(out, bias, x, norm, name)
        if not pre_ln and final_norm is not None:
            x = self.layer_norm(x, final_norm, f"{hint}.final_norm")
        return x

    def lm_head(self, head, x: str, hint: str = "lm_head") -> str:
        g = self.g
        if head.transform_activation is not None:
            x = self.dense(x, head.transform_dense, f"{hint}.transform")
            x = self.activation(x, None, head.transform_activation, hint)
            x = self.layer_norm(x, head.transform_norm, f"{hint}.transform_norm")
        table = self._token_tables.get(id(head.embedding)) if head.tied else None
        if table is not None:  # h Eᵀ from the table the embedding reads: stored once
            logits = g.op("FusedMatMul", [x, table], hint, domain=MICROSOFT, transB=1, alpha=1.0)
        else:
            kernel = _numpy(head.embedding.embeddings).T if head.tied else _numpy(head.kernel)
            kernel = g.weight(f"{hint}.kernel", np.ascontiguousarray(kernel))
            logits = g.op("MatMul", [x, kernel], hint)
        if head.use_bias:
            logits = g.op("Add", [logits, g.weight(f"{hint}.bias", _numpy(head.bias))], hint)
        return logits


class Packing:
    """Padding-free stacks: the real tokens of a (B, S) batch, by its attention mask, as
    one (N, ·) matrix. The MatMuls, LayerNorms and activations then run on the N real
    tokens only, not on B × S positions (a batch of texts of mixed lengths costs what its
    tokens cost); only `MultiHeadAttention` sees the (B, S, ·) layout: one `Gather` lays
    its query, key and value out, one `GatherND` packs its output again. Padding
    positions are not computed: the stack's padded outputs hold zeros there (the plain
    graph and the Keras model hold values that no real token reads).

    The index arithmetic is written once per graph: `coords`, the (N, 2) (row, column) of
    the real tokens in row-major order; `slots`, the (B, S) packed row of every position
    (row 0 for padding, whose keys the mask hides and whose queries are dropped)."""

    def __init__(self, w: _Writer, attention_mask: str):
        self.w, g, hint = w, w.g, "packing"
        self.coords = g.op("Transpose", [g.op("NonZero", [attention_mask], hint)], hint)
        flat = g.op("Reshape", [attention_mask, w.ints([-1])], hint)  # (B·S,)
        rows = g.op("Sub", [g.op("CumSum", [flat, w.ints(0)], hint), w.ints(1)], hint)
        real = g.op("Cast", [flat], hint, to=TensorProto.BOOL)
        slots = g.op("Where", [real, rows, w.ints(0)], hint)
        self.slots = g.op("Reshape", [slots, g.op("Shape", [attention_mask], hint)], hint)
        self.real = g.op(
            "Unsqueeze", [g.op("Cast", [attention_mask], hint, to=FLOAT), w.ints([-1])], hint
        )  # (B, S, 1)

    def select(self, values: str, hint: str) -> str:
        """The (N,) entries of a (B, S) input (ids, segments) at the real tokens."""
        return self.w.g.op("GatherND", [values, self.coords], hint)

    def positions(self) -> str:
        """The (N,) position of each real token in its row (0 .. S - 1)."""
        return self.w.g.op("Gather", [self.coords, self.w.ints(1)], "packing", axis=1)

    def pack(self, x: str, hint: str) -> str:
        """(B, S, C) -> (N, C)."""
        return self.w.g.op("GatherND", [x, self.coords], hint)

    def unpack(self, x: str, hint: str, zeros: bool = False) -> str:
        """(N, C) -> (B, S, C); padding positions hold a copy of row 0, or zeros."""
        spread = self.w.g.op("Gather", [x, self.slots], hint)
        return self.w.g.op("Mul", [spread, self.real], hint) if zeros else spread


def _writer(name: str) -> tuple[GraphWriter, _Writer]:
    g = GraphWriter(name)
    return g, _Writer(g)


def _mask(g: GraphWriter, name: str) -> str:
    """The int32 key padding mask `MultiHeadAttention` reads, cast once per graph."""
    return g.op("Cast", [name], name, to=TensorProto.INT32)


def _sentence_embedding(
    g: GraphWriter, w: _Writer, sequence: str, attention_mask: str, normalize: bool
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


def _last_positions(g: GraphWriter, w: _Writer, x: str) -> str:
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
    kernel = np.concatenate([_numpy(d.kernel) for d in layers], axis=1)  # (D, L·2·H·Dh)
    projected = g.op("MatMul", [memory, g.weight("cross.kernel", kernel)], "cross")
    if layers[0].use_bias:
        bias = np.concatenate([_numpy(d.bias) for d in layers])
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
