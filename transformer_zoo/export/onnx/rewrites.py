"""Graph rewrites that remove what tf2onnx adds around Keras layers and onnxruntime does
not remove (measured with onnxruntime's profiler on the decoding step, where at batch 1
every node costs a few microseconds whatever its size):

- `collapse_tensordot`: Keras' Dense on a (B, T, D) input is TensorFlow's `tensordot`,
  which tf2onnx writes as Shape → Cast → Gather → Concat → Cast → Reshape around a 2-D
  MatMul and a Reshape back; ONNX MatMul broadcasts over leading axes, so one MatMul of
  the 3-D input does the same.
- `merge_parallel_matmuls`: MatMuls of one input by constant weights (the query and the
  fused key/value projections of self-attention) become one MatMul and a Split, one
  pass over the activations instead of two ("fused QKV").
- `fuse_select`: tf2onnx lowers `tf.where` (SelectV2) to Not, two Casts, two Muls and an
  Add; ONNX `Where` is one node (and does not turn 0 · −3e38 into NaN-prone arithmetic).
- `share_layer_shapes`: every attention layer computes its causal mask and its reshape
  targets from the shapes of its own tensors; the blocks of one stack are identical, so
  the same tensor of another block has the same shape. Reading the shapes of the first
  block everywhere lets `eliminate_common_subexpressions` compute them (and the masks
  built from them) once per graph instead of once per layer.
- `eliminate_common_subexpressions` and `eliminate_dead_nodes`: the usual clean-ups.
- `untie_lm_heads`: not a clean-up but the quantizers' preparation: a fused graph's tied
  LM head reads the embedding's table (`FusedMatMul` with `transB`); onnxruntime's
  quantizers know `MatMul`, so the head gets a transposed copy of its own.

Every export is validated against the model afterwards, so a wrong rewrite cannot ship.
"""

from __future__ import annotations

import re
from collections import defaultdict

import numpy as np
import onnx
from onnx import helper, numpy_helper


class _Index:
    def __init__(self, graph: onnx.GraphProto):
        self.graph = graph
        # Holding every node wrapper keeps their id()s unique while a pass runs: protobuf
        # makes a new Python object on each access and may reuse a freed one's id.
        self.nodes = list(graph.node)
        self.producer = {out: node for node in self.nodes for out in node.output}
        self.consumers = defaultdict(list)
        for node in self.nodes:
            for name in node.input:
                self.consumers[name].append(node)
        self.initializers = {init.name: init for init in graph.initializer}

    def const(self, name):
        init = self.initializers.get(name)
        return None if init is None else numpy_helper.to_array(init)

    def op(self, name, op_type):
        node = self.producer.get(name)
        return node if node is not None and node.op_type == op_type else None


def _replace_nodes(graph, nodes, removed_ids, replacements):
    """Rebuilds `graph.node` from `nodes` (the wrappers the ids were taken from): drops
    nodes in `removed_ids` and puts `replacements[id(node)]` in place of a node."""
    kept = []
    for node in nodes:
        if id(node) in replacements:
            kept.extend(replacements[id(node)])
        elif id(node) not in removed_ids:
            kept.append(node)
    del graph.node[:]
    graph.node.extend(kept)


def _shape_chain_source(g: _Index, shape_name: str, width: int):
    """x if `shape_name` is tensordot's output shape `concat(shape(x)[:-1], [width])`."""
    node = g.producer.get(shape_name)
    while node is not None and node.op_type == "Cast":
        node = g.producer.get(node.input[0])
    if node is None or node.op_type != "Concat" or len(node.input) != 2:
        return None
    tail = g.const(node.input[1])
    if tail is None or tail.reshape(-1).tolist() != [width]:
        return None
    gather = g.op(node.input[0], "Gather")
    if gather is None:
        return None
    source = g.producer.get(gather.input[0])
    while source is not None and source.op_type == "Cast":
        source = g.producer.get(source.input[0])
    if source is None or source.op_type != "Shape":
        return None
    return source.input[0]


def collapse_tensordot(model: onnx.ModelProto) -> int:
    """Reshape(x, [-1, D]) → MatMul(W) → Reshape(x.shape[:-1] + [N]) becomes MatMul(x, W)."""
    g = _Index(model.graph)
    replacements, removed, count = {}, set(), 0
    for node in g.nodes:
        if node.op_type != "MatMul":
            continue
        weight = g.const(node.input[1])
        flatten = g.op(node.input[0], "Reshape")
        if weight is None or weight.ndim != 2 or flatten is None:
            continue
        target = g.const(flatten.input[1])
        if target is None or target.reshape(-1).tolist() != [-1, weight.shape[0]]:
            continue
        users = g.consumers.get(node.output[0], [])
        if len(users) != 1 or users[0].op_type != "Reshape":
            continue
        restore = users[0]
        if _shape_chain_source(g, restore.input[1], weight.shape[1]) == flatten.input[0]:
            matmul = helper.make_node(
                "MatMul", [flatten.input[0], node.input[1]], [restore.output[0]], name=node.name
            )
            replacements[id(restore)] = [matmul]
            removed.add(id(node))
        else:
            # tf2onnx merged the Reshape back with a following one (MultiHeadAttention's
            # split into heads), whose target shape (B, T, H, Dh) holds no 0 (copy-a-dim)
            # entry at run time: it reads the 3-D product just as well.
            node.input[0] = flatten.input[0]
        count += 1
    _replace_nodes(model.graph, g.nodes, removed, replacements)
    return count


def merge_parallel_matmuls(model: onnx.ModelProto) -> int:
    """MatMuls of one input by constant (K, N_i) weights → one MatMul by the concatenated
    (K, ΣN_i) weight, then a Split back into the N_i-wide outputs."""
    g = _Index(model.graph)
    groups = defaultdict(list)
    for node in g.nodes:
        if node.op_type == "MatMul" and node.input[1] in g.initializers:
            weight = g.const(node.input[1])
            if weight.ndim == 2:
                groups[node.input[0]].append((node, weight))
    replacements, removed, count = {}, set(), 0
    for source, members in groups.items():
        if len(members) < 2 or len({w.shape[0] for _, w in members}) != 1:
            continue
        if len({w.dtype for _, w in members}) != 1:
            continue
        name = f"merged_matmul_{count}"
        weight = np.concatenate([w for _, w in members], axis=1)
        model.graph.initializer.append(numpy_helper.from_array(weight, f"{name}/weight"))
        sizes = numpy_helper.from_array(
            np.array([w.shape[1] for _, w in members], np.int64), f"{name}/sizes"
        )
        model.graph.initializer.append(sizes)
        merged = helper.make_node("MatMul", [source, f"{name}/weight"], [f"{name}/out"], name=name)
        split = helper.make_node(
            "Split",
            [f"{name}/out", f"{name}/sizes"],
            [node.output[0] for node, _ in members],
            name=f"{name}/split",
            axis=-1,
        )
        # Placed where the first of them was: the source exists there already.
        replacements[id(members[0][0])] = [merged, split]
        removed.update(id(node) for node, _ in members[1:])
        count += 1
    _replace_nodes(model.graph, g.nodes, removed, replacements)
    return count


def _cast_of_condition(g: _Index, name: str, negated: bool):
    cast = g.op(name, "Cast")
    if cast is None:
        return None
    if not negated:
        return cast.input[0]
    inverse = g.op(cast.input[0], "Not")
    return None if inverse is None else inverse.input[0]


def _select_branch(g: _Index, mul, negated: bool):
    """(condition, value) of Mul(Cast([Not](c)), value) in either operand order."""
    if mul is None or mul.op_type != "Mul":
        return None
    for i in (0, 1):
        condition = _cast_of_condition(g, mul.input[i], negated)
        if condition is not None:
            return condition, mul.input[1 - i]
    return None


def fuse_select(model: onnx.ModelProto) -> int:
    """Add(Mul(Cast(c), a), Mul(Cast(Not(c)), b)) → Where(c, a, b)."""
    g = _Index(model.graph)
    replacements, count = {}, 0
    for node in g.nodes:
        if node.op_type != "Add" or len(node.input) != 2:
            continue
        left, right = (g.producer.get(name) for name in node.input)
        for then_mul, else_mul in ((left, right), (right, left)):
            then = _select_branch(g, then_mul, negated=False)
            other = _select_branch(g, else_mul, negated=True)
            if then is not None and other is not None and then[0] == other[0]:
                where = helper.make_node(
                    "Where", [then[0], then[1], other[1]], [node.output[0]], name=node.name
                )
                replacements[id(node)] = [where]
                count += 1
                break
    _replace_nodes(model.graph, g.nodes, set(), replacements)
    return count


def eliminate_common_subexpressions(model: onnx.ModelProto) -> int:
    """Nodes with the same op, inputs and attributes are computed once."""
    graph_outputs = {o.name for o in model.graph.output}
    nodes = list(model.graph.node)
    seen, rename, removed = {}, {}, set()
    for node in nodes:
        for i, name in enumerate(node.input):
            if name in rename:
                node.input[i] = rename[name]
        if node.op_type in ("RandomNormal", "RandomUniform", "Multinomial"):
            continue
        key = (
            node.op_type,
            node.domain,
            tuple(node.input),
            tuple(a.SerializeToString() for a in node.attribute),
            len(node.output),
        )
        if key not in seen:
            seen[key] = node
        elif not graph_outputs & set(node.output):  # a graph output keeps its producer
            for mine, theirs in zip(node.output, seen[key].output, strict=True):
                rename[mine] = theirs
            removed.add(id(node))
    _replace_nodes(model.graph, nodes, removed, {})
    return len(removed)


def eliminate_dead_nodes(model: onnx.ModelProto) -> int:
    """Removes nodes (and initializers) nothing uses, repeatedly."""
    graph, removed = model.graph, 0
    while True:
        nodes = list(graph.node)
        used = {o.name for o in graph.output}
        for node in nodes:
            used.update(node.input)
        dead = {id(n) for n in nodes if not any(out in used for out in n.output)}
        if not dead:
            break
        _replace_nodes(graph, nodes, dead, {})
        removed += len(dead)
    used = {name for node in graph.node for name in node.input}
    for init in [i for i in graph.initializer if i.name not in used]:
        graph.initializer.remove(init)
    return removed


# `block_3_1/...` (tf2onnx's names of Keras layers), `present.3.key`, `past_key_values.3.…`
_LAYER_INDEX = re.compile(r"((?:^|/|_)block_)\d+|^(present|past_key_values)\.\d+\.")


def _layer_invariant_name(name: str) -> str | None:
    shared = _LAYER_INDEX.sub(
        lambda m: (m.group(1) or f"{m.group(2)}.") + "#" + ("" if m.group(1) else "."), name
    )
    return shared if shared != name else None


def share_layer_shapes(model: onnx.ModelProto) -> int:
    """Shape(block_i/t) → Shape(block_j/t) for the first block j whose t is measured.

    Sound for our models, whose stacks repeat one block configuration: tensors with the
    same name in two blocks have the same shape (not the same values). Only `Shape`
    inputs change, and the export's validation checks the result.
    """
    canonical, count = {}, 0
    for node in model.graph.node:
        if node.op_type != "Shape":
            continue
        key = _layer_invariant_name(node.input[0])
        if key is None:
            continue
        key = (key, tuple(a.SerializeToString() for a in node.attribute))
        if key not in canonical:
            canonical[key] = node.input[0]
        elif canonical[key] != node.input[0]:
            node.input[0] = canonical[key]
            count += 1
    return count


def untie_lm_heads(model: onnx.ModelProto) -> int:
    """`FusedMatMul(h, E, transB=1)` over an initializer E (the fused graphs' tied LM head,
    `h Eᵀ` from the table the token embedding's `Gather` reads) becomes `MatMul(h, Eᵀ)`
    over a transposed copy, the graph a tied head had before it shared the table:
    onnxruntime's int8 and int4 quantizers rewrite `MatMul`s, not `FusedMatMul`s, and
    store the head's weights apart from the table's anyway. Returns how many."""
    graph = model.graph
    tables = {t.name: t for t in graph.initializer}
    count = 0
    for node in graph.node:
        attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if (
            node.op_type != "FusedMatMul"
            or node.domain != "com.microsoft"
            or node.input[1] not in tables
            or attributes != {"transB": 1, "alpha": 1.0}
        ):
            continue
        name = f"{node.input[1]}.transposed"
        while name in tables:
            name += "_"
        kernel = np.ascontiguousarray(numpy_helper.to_array(tables[node.input[1]]).T)
        tables[name] = numpy_helper.from_array(kernel, name)
        graph.initializer.append(tables[name])
        node.op_type, node.domain = "MatMul", ""
        del node.attribute[:]
        node.input[1] = name
        count += 1
    return count


def simplify(model: onnx.ModelProto) -> tuple[onnx.ModelProto, dict]:
    """All of the rewrites above, in an order where each helps the next."""
    stats = {"nodes_before": len(model.graph.node)}
    stats["tensordots"] = collapse_tensordot(model)
    stats["dead"] = eliminate_dead_nodes(model)
    stats["shared_shapes"] = share_layer_shapes(model)
    stats["common"] = eliminate_common_subexpressions(model)
    stats["merged_matmuls"] = merge_parallel_matmuls(model)
    stats["selects"] = fuse_select(model)
    stats["dead"] += eliminate_dead_nodes(model)
    stats["nodes_after"] = len(model.graph.node)
    return model, stats
