"""Greedy search in one onnxruntime call (`onnx_greedy.greedy_graph`: an ONNX `Loop` over
the step graph) gives the tokens and scores of `greedy.greedy_search` stepping the same
graph from Python, for both generative families, fused and plain graphs, float32 and
int8, ragged batches, and rows that stop at EOS at different steps."""

import numpy as np
import onnx
import pytest

from transformer_zoo.export import quantize_onnx
from transformer_zoo.generation.onnx_greedy import greedy_graph
from transformer_zoo.serving import load_onnx

FAMILIES = ["decoder-only", "encoder-decoder"]
NEW_TOKENS = 8


def _decode(served, rows, eos=None):
    """(tokens, scores) of greedy search from `rows` (prompts or sources), with `eos`
    (None: the directory's own) as the end token."""
    if eos is not None:
        served.config.special_ids = {**served.config.special_ids, "eos": eos}
    if served.family == "decoder-only":
        result = served.generate_ids(rows, NEW_TOKENS)
    else:
        result = served.translate_ids(rows, NEW_TOKENS)
    return result.tokens, result.scores


def _rows(family):
    if family == "decoder-only":
        return [[2, 5, 6, 7], [2, 8], [2, 9, 10, 11, 12, 13]]
    return [[5, 6, 7], [8, 9], [10, 11, 12, 13, 14]]


def _assert_same(in_graph, stepped):
    np.testing.assert_array_equal(in_graph[0], stepped[0])
    np.testing.assert_allclose(in_graph[1], stepped[1], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("graphs", ["fused", "plain"])
@pytest.mark.parametrize("family", FAMILIES)
def test_in_graph_greedy_gives_the_stepped_searchs_tokens_and_scores(
    family_artifacts, plain_export, family, graphs
):
    directory = family_artifacts(family).export_dir
    if graphs == "plain":
        directory = plain_export(family)[0]
    in_graph, stepped = load_onnx(directory), load_onnx(directory, in_graph_greedy=False)
    assert in_graph.engine.decodes_greedily and not stepped.engine.decodes_greedily
    rows = _rows(family)
    free = _decode(stepped, rows, eos=-1)  # no row stops: every step of every row
    _assert_same(_decode(in_graph, rows, eos=-1), free)
    assert f"{in_graph.engine.graph}+greedy" in in_graph.runner.sessions
    assert not any(name.endswith("+greedy") for name in stepped.runner.sessions)

    # An end token that the first row emits by its third step, the others later or never:
    # padding (score 0) follows each row's EOS.
    eos = int(free[0][0, 2])
    expected = _decode(stepped, rows, eos)
    assert eos in expected[0][0]
    _assert_same(_decode(in_graph, rows, eos), expected)


def test_in_graph_greedy_stops_when_every_row_has_ended(family_artifacts):
    served = load_onnx(family_artifacts("decoder-only").export_dir)
    rows = [[2, 5, 6, 7]]
    first = int(_decode(served, rows, eos=-1)[0][0, 0])
    tokens, scores = _decode(served, rows, eos=first)
    assert tokens.shape == (1, 1) and tokens[0, 0] == first  # one step, not NEW_TOKENS
    assert scores[0] < 0


@pytest.mark.parametrize("family", FAMILIES)
def test_in_graph_greedy_wraps_an_int8_graph(family_artifacts, tmp_path, family):
    quantized = tmp_path / "int8"
    quantize_onnx(family_artifacts(family).export_dir, quantized, max_accuracy_drop=None)
    rows = _rows(family)
    expected = _decode(load_onnx(quantized, in_graph_greedy=False), rows, eos=-1)
    _assert_same(_decode(load_onnx(quantized), rows, eos=-1), expected)


def test_greedy_graph_refuses_a_graph_without_a_cache(family_artifacts):
    encoder = onnx.load(family_artifacts("encoder-only").export_dir / "model.onnx")
    with pytest.raises(ValueError, match="cached step graph"):
        greedy_graph(encoder)
