"""`Packing`: the padding-free layout of the fused encoder-only graph (`fused.encoder_only`),
the real tokens of a padded batch gathered into one matrix."""

from __future__ import annotations

from onnx import TensorProto

from transformer_zoo.export.onnx.graph_writer import FLOAT
from transformer_zoo.export.onnx.layer_writer import LayerWriter


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

    def __init__(self, w: LayerWriter, attention_mask: str):
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
