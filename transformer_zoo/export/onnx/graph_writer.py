"""The graph-writing primitives of the fused export (`fused`): `GraphWriter`, which collects
a graph's nodes, weights, inputs and outputs and makes its `ModelProto`, and the ONNX
constants every writer shares."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

MICROSOFT = "com.microsoft"
INT64 = TensorProto.INT64
FLOAT = TensorProto.FLOAT


def as_numpy(variable) -> np.ndarray:
    """A weight (a Keras variable or an array) as a float32 numpy array."""
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
