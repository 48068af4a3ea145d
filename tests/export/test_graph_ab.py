"""benchmarks/graph_ab.py: the feeds it makes run on both kinds of graph, and its rounds
alternate which graph runs twice in a row."""

import numpy as np
import pytest

from benchmarks import graph_ab
from transformer_zoo.export import export_onnx
from transformer_zoo.generation.onnx_runner import make_session
from transformer_zoo.models import DecoderOnly, EncoderOnly

SIZES = dict(num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32, max_length=24)


@pytest.mark.parametrize(
    "make, expected",
    [
        (lambda: DecoderOnly(50, **SIZES), ["decoder step, 4-8 cached positions"]),
        (
            lambda: EncoderOnly(40, **{**SIZES, "max_length": 48}),
            ["encoder, batch 1 of 16 tokens", "encoder, 16 rows of 5-40 tokens"],
        ),
    ],
)
def test_workloads_run_on_the_graph_and_rounds_give_ratios(tmp_path, make, expected):
    export_onnx(make(), tmp_path)
    session = make_session(str(tmp_path / "model.onnx"), 1, allow_spinning=False)
    loads = graph_ab.workloads(session, np.random.default_rng(0), cached=(4, 8))
    assert list(loads) == expected
    for calls in loads.values():
        for feeds in calls:
            session.run(None, feeds)
        ratios = graph_ab.abba(session, session, calls, rounds=4)
        assert len(ratios) == 4 and all(r > 0 for r in ratios)


def test_rounds_alternate_which_graph_runs_twice_in_a_row():
    order = []

    class Recorder:
        def __init__(self, name):
            self.name = name

        def run(self, outputs, feeds):
            order.append(self.name)

    graph_ab.abba(Recorder("a"), Recorder("b"), [{}], rounds=2)
    assert "".join(order) == "abbabaab"
