"""The examples in the docstrings of every module run and print what they show (shapes
printed as `TensorShape([...])` under TensorFlow failed 11 of them; `Tokenizer`'s used a
name it never imported, and the loss's printed more digits than it showed)."""

import doctest
import importlib
import pkgutil

import pytest

import transformer_zoo

MODULES = [
    module.name
    for module in pkgutil.walk_packages(transformer_zoo.__path__, "transformer_zoo.")
    if module.name != "transformer_zoo.cli.__main__"  # runs the CLI
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_hold(name):
    module = importlib.import_module(name)
    results = doctest.testmod(module, report=False, optionflags=doctest.ELLIPSIS)
    assert results.failed == 0, f"{results.failed} of {name}'s examples failed (see the stdout)"
