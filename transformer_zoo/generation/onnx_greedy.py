"""Greedy search as one ONNX graph: an ONNX `Loop` whose body is a step graph.

`greedy_graph(step)` wraps a decoding step graph (`model.onnx`, or an encoder-decoder's
`decoder_model.onnx`; fused or plain, float32 or quantized) so that onnxruntime runs the
whole of `greedy.greedy_search` in one call: each iteration runs the step, picks each
row's most likely token, writes padding after a row's EOS, grows the mask and the
positions, and feeds the step's `present` caches back as its `past`. Python's work per
token, about a third of an int8 step on 2 cores, is gone (`benchmarks/serving.py`), and
any onnxruntime binding (C++, C#, Java, JavaScript) can decode with it.

Inputs (int64): the step's first-pass inputs with empty caches left out (`input_ids`,
`attention_mask`, `position_ids` of the left-aligned prompts; an encoder-decoder adds
`encoder_attention_mask` and the encoder's cross caches `past_key_values.{i}.encoder.*`),
and the scalars `max_new_tokens`, `eos_token_id` (-1: none) and `pad_token_id`.
Outputs: `tokens` (B, N) and `scores` (B,), float32: each row's summed log-probabilities
up to and including its EOS, as `greedy.greedy_search` returns them (N <= max_new_tokens;
the loop ends once every row has emitted EOS).

numpy and onnx only: the TensorFlow-free runtime builds it when it loads a directory.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

PAST = "past_key_values."
CROSS = ".encoder."
LOGITS_TO_KEEP = "logits_to_keep"  # generation.engine's name, repeated to stay import-free
GREEDY_INPUTS = ("max_new_tokens", "eos_token_id", "pad_token_id")
STEP_FEEDS = ("input_ids", "attention_mask", "position_ids")
MIN_OPSET = 13  # Squeeze, Unsqueeze and ReduceSum take their axes as inputs


def greedy_graph(step: onnx.ModelProto) -> onnx.ModelProto:
    """The greedy-search graph of a decoding step graph (see the module docstring).

    Raises:
        ValueError: `step` is not a step graph with a growing self-attention cache
            (`past_key_values.{i}[.decoder].key/.value` in, `present.*` out, `logits`).
    """
    graph = step.graph
    opset = next((o.version for o in step.opset_import if o.domain in ("", "ai.onnx")), 0)
    names = [i.name for i in graph.input]
    grown = [n for n in names if n.startswith(PAST) and CROSS not in n]  # self-attention
    if opset < MIN_OPSET or not grown or any(n not in names for n in STEP_FEEDS):
        raise ValueError(
            f"`step` must be a cached step graph of opset {MIN_OPSET} or later with inputs "
            f"{STEP_FEEDS} and past_key_values.*. Received: opset {opset}, inputs {names}"
        )
    outputs = {o.name for o in graph.output}
    presents = ["present." + n[len(PAST) :] for n in grown]
    if "logits" not in outputs or any(p not in outputs for p in presents):
        raise ValueError(f"`step` must output logits and {presents}. Received: {sorted(outputs)}")
    past_type = next(i for i in graph.input if i.name == grown[0]).type.tensor_type
    heads, head_width = past_type.shape.dim[1].dim_value, past_type.shape.dim[3].dim_value
    if not heads or not head_width:
        raise ValueError(f"`step` must give its caches' heads and head width. Received: {grown[0]}")
    # Inputs of the step that stay the same at every step (an encoder-decoder's source
    # mask and cross caches) are the greedy graph's own inputs, which the body reads
    # from the outer scope.
    invariant = [i for i in graph.input if i.name not in grown + list(STEP_FEEDS)]
    invariant = [i for i in invariant if i.name != LOGITS_TO_KEEP]

    constants = {
        "greedy/axis_1": np.array([1], np.int64),
        "greedy/axis_0": np.array([0], np.int64),
        "greedy/last": np.array([-1], np.int64),
        "greedy/end": np.array([np.iinfo(np.int64).max], np.int64),
        "greedy/one": np.array(1, np.int64),
        "greedy/zero_score": np.array(0.0, np.float32),
        "greedy/cache_tail": np.array([heads, 0, head_width], np.int64),
        "greedy/true": np.array(True),
    }
    initializers = [t for t in graph.initializer if t.name != LOGITS_TO_KEEP]
    if LOGITS_TO_KEEP in names:  # the fused graphs: the LM head on the last position only
        constants[LOGITS_TO_KEEP] = np.array(1, np.int64)
    initializers += [numpy_helper.from_array(v, name) for name, v in constants.items()]

    # The body takes the step's per-step inputs under names of its own: a subgraph may
    # not define a name that the outer graph (whose inputs keep the step's names) has.
    renamed = {name: f"step/{name}" for name in STEP_FEEDS}
    step_nodes = []
    for node in graph.node:
        node = onnx.NodeProto.FromString(node.SerializeToString())
        node.input[:] = [renamed.get(name, name) for name in node.input]
        step_nodes.append(node)
    body = helper.make_graph(
        step_nodes + _choose_nodes(),
        "greedy_step",
        [
            helper.make_tensor_value_info("greedy/iteration", TensorProto.INT64, []),
            helper.make_tensor_value_info("greedy/running", TensorProto.BOOL, []),
            *(
                helper.make_tensor_value_info(renamed[n], TensorProto.INT64, None)
                for n in STEP_FEEDS
            ),
            helper.make_tensor_value_info("greedy/done", TensorProto.BOOL, None),
            *(helper.make_tensor_value_info(n, past_type.elem_type, None) for n in grown),
        ],
        [
            helper.make_tensor_value_info("greedy/still_running", TensorProto.BOOL, []),
            helper.make_tensor_value_info("greedy/next_ids", TensorProto.INT64, None),
            helper.make_tensor_value_info("greedy/next_mask", TensorProto.INT64, None),
            helper.make_tensor_value_info("greedy/next_positions", TensorProto.INT64, None),
            helper.make_tensor_value_info("greedy/next_done", TensorProto.BOOL, None),
            *(helper.make_tensor_value_info(n, past_type.elem_type, None) for n in presents),
            helper.make_tensor_value_info("greedy/token", TensorProto.INT64, None),
            helper.make_tensor_value_info("greedy/token_score", TensorProto.FLOAT, None),
        ],
    )
    nodes = [
        helper.make_node("Shape", ["input_ids"], ["greedy/ids_shape"]),
        helper.make_node(
            "Slice",
            ["greedy/ids_shape", "greedy/axis_0", "greedy/axis_1"],
            ["greedy/batch"],
        ),
        helper.make_node(
            "Concat", ["greedy/batch", "greedy/cache_tail"], ["greedy/cache_shape"], axis=0
        ),
        helper.make_node(
            "ConstantOfShape",
            ["greedy/cache_shape"],
            ["greedy/empty_cache"],
            value=helper.make_tensor("zero", past_type.elem_type, [1], [0]),
        ),
        helper.make_node(
            "Concat", ["greedy/batch", "greedy/axis_1"], ["greedy/done_shape"], axis=0
        ),  # (B, 1)
        helper.make_node(
            "ConstantOfShape",
            ["greedy/done_shape"],
            ["greedy/not_done"],
            value=helper.make_tensor("false", TensorProto.BOOL, [1], [False]),
        ),
        helper.make_node(
            "Loop",
            ["max_new_tokens", "greedy/true", *STEP_FEEDS, "greedy/not_done"]
            + ["greedy/empty_cache"] * len(grown),
            [f"greedy/final_{i}" for i in range(4 + len(grown))]
            + ["greedy/tokens_nb1", "greedy/scores_nb1"],
            body=body,
        ),  # scans: (N, B, 1)
        helper.make_node("Squeeze", ["greedy/tokens_nb1", "greedy/last"], ["greedy/tokens_nb"]),
        helper.make_node("Transpose", ["greedy/tokens_nb"], ["tokens"], perm=[1, 0]),
        helper.make_node(
            "ReduceSum", ["greedy/scores_nb1", "greedy/axis_0"], ["greedy/scores_b1"], keepdims=0
        ),
        helper.make_node("Squeeze", ["greedy/scores_b1", "greedy/last"], ["scores"]),
    ]
    inputs = [
        helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"])
        for n in STEP_FEEDS
    ]
    inputs += invariant
    inputs += [helper.make_tensor_value_info(n, TensorProto.INT64, []) for n in GREEDY_INPUTS]
    outer = helper.make_graph(
        nodes,
        "greedy_search",
        inputs,
        [
            helper.make_tensor_value_info("tokens", TensorProto.INT64, ["batch", "new_tokens"]),
            helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["batch"]),
        ],
        initializers,
    )
    model = helper.make_model(outer, opset_imports=list(step.opset_import))
    model.ir_version = step.ir_version
    return model


def _choose_nodes() -> list[onnx.NodeProto]:
    """The body's nodes after the step: the next token of each row from the last
    position's logits, its log-probability, and the next step's inputs."""
    n = helper.make_node
    return [
        n("Slice", ["logits", "greedy/last", "greedy/end", "greedy/axis_1"], ["greedy/logits_b1v"]),
        n("Squeeze", ["greedy/logits_b1v", "greedy/axis_1"], ["greedy/logits"]),  # (B, V)
        n("ArgMax", ["greedy/logits"], ["greedy/best"], axis=-1, keepdims=1),  # (B, 1)
        n("Where", ["greedy/done", "pad_token_id", "greedy/best"], ["greedy/next_ids"]),
        n("Equal", ["greedy/next_ids", "eos_token_id"], ["greedy/is_eos"]),
        n("Or", ["greedy/done", "greedy/is_eos"], ["greedy/next_done"]),
        # Running while any row is not done: the maximum of `not done` over the batch.
        n("Not", ["greedy/next_done"], ["greedy/live"]),
        n("Cast", ["greedy/live"], ["greedy/live_int"], to=TensorProto.INT64),
        n("ReduceMax", ["greedy/live_int"], ["greedy/any_live"], keepdims=0),
        n("Cast", ["greedy/any_live"], ["greedy/still_running"], to=TensorProto.BOOL),
        n("LogSoftmax", ["greedy/logits"], ["greedy/log_probs"], axis=-1),
        n("GatherElements", ["greedy/log_probs", "greedy/next_ids"], ["greedy/picked"], axis=1),
        n("Where", ["greedy/done", "greedy/zero_score", "greedy/picked"], ["greedy/token_score"]),
        n("Identity", ["greedy/next_ids"], ["greedy/token"]),
        # The next step: one more mask column, the next position of each row.
        n("Shape", ["greedy/next_ids"], ["greedy/column_shape"]),
        n(
            "ConstantOfShape",
            ["greedy/column_shape"],
            ["greedy/column"],
            value=helper.make_tensor("one", TensorProto.INT64, [1], [1]),
        ),
        n("Concat", ["step/attention_mask", "greedy/column"], ["greedy/next_mask"], axis=1),
        n(
            "Slice",
            ["step/position_ids", "greedy/last", "greedy/end", "greedy/axis_1"],
            ["greedy/last_position"],
        ),
        n("Add", ["greedy/last_position", "greedy/one"], ["greedy/next_positions"]),
    ]
