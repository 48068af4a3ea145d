"""The transformer-block emitter of the fused export (`fused`): `LayerWriter` writes each
layer of our models (Dense, LayerNorm, embeddings, attention, FFN, a whole stack of
blocks, the LM head) as onnxruntime's fused `com.microsoft` nodes into a `GraphWriter`."""

from __future__ import annotations

import math

import numpy as np
from onnx import TensorProto

from transformer_zoo.export.onnx.graph_writer import FLOAT, MICROSOFT, GraphWriter, as_numpy

# Masked scores: our layers write the lowest float32 in place of a masked score, so that a
# query with no allowed key (a padding position) averages all values uniformly; added to
# a score instead, -3e38 swallows it the same way.
MASK_FILTER_VALUE = -3.0e38


class LayerWriter:
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
        out = self.g.op(
            "MatMul", [x, self.g.weight(f"{hint}.kernel", as_numpy(layer.kernel))], hint
        )
        bias = self.g.weight(f"{hint}.bias", as_numpy(layer.bias)) if layer.use_bias else None
        if with_bias:
            return self.g.op("Add", [out, bias], hint) if bias else out
        return out, bias

    def layer_norm(self, x: str, norm, hint: str) -> str:
        gamma, beta = self._norm_weights(norm, hint)
        return self.g.op(
            "LayerNormalization", [x, gamma, beta], hint, axis=-1, epsilon=float(norm.epsilon)
        )

    def _norm_weights(self, norm, hint):
        gamma = self.g.weight(f"{hint}.gamma", as_numpy(norm.gamma))
        beta = self.g.weight(f"{hint}.beta", as_numpy(norm.beta))
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
        table = g.weight(f"{hint}.token", as_numpy(layer.token_embedding.embeddings))
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
            segment_table = as_numpy(layer.segment_embedding.embeddings)
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
            table = g.weight(f"{hint}.position", as_numpy(encoding.position_embeddings))
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
                  cache=None, cross=None, packing=None):  # fmt: skip
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
            [as_numpy(layer.query_dense.kernel), as_numpy(layer.key_value_dense.kernel)], axis=1
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
                    [as_numpy(layer.query_dense.bias), as_numpy(layer.key_value_dense.bias)]
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
            kernel = as_numpy(head.embedding.embeddings).T if head.tied else as_numpy(head.kernel)
            kernel = g.weight(f"{hint}.kernel", np.ascontiguousarray(kernel))
            logits = g.op("MatMul", [x, kernel], hint)
        if head.use_bias:
            logits = g.op("Add", [logits, g.weight(f"{hint}.bias", as_numpy(head.bias))], hint)
        return logits
