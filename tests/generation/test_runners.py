"""The `Runner` protocol the engines program against, held to the three runners."""

import inspect

import pytest

from transformer_zoo.generation.engine import Runner
from transformer_zoo.generation.keras_runner import KerasRunner
from transformer_zoo.generation.onnx_runner import OnnxRunner
from transformer_zoo.generation.saved_model_runner import SavedModelRunner

PROTOCOL = {
    name: inspect.signature(member)
    for name, member in vars(Runner).items()
    if inspect.isfunction(member) and not name.startswith("_")
}


@pytest.mark.parametrize("runner", [OnnxRunner, KerasRunner, SavedModelRunner])
def test_every_runner_has_the_protocols_methods_with_its_parameters(runner):
    """A newcomer who writes a runner to the protocol gets every method the engines and
    `ServedModel` call (`accepts` and `padding_free` were missing from it)."""
    assert {"run", "take", "accepts", "padding_free"} <= set(PROTOCOL)
    for name, signature in PROTOCOL.items():
        assert callable(getattr(runner, name, None)), f"{runner.__name__} lacks {name}"
        ours = list(inspect.signature(getattr(runner, name)).parameters)
        assert ours[: len(signature.parameters)] == list(signature.parameters), name
