"""The examples in the docstrings of `transformer_zoo.layers` and `transformer_zoo.models`
run and print what they show (shapes printed as `TensorShape([...])` under TensorFlow
failed 11 of them)."""

import doctest
import importlib
import pkgutil

import pytest

import transformer_zoo.layers
import transformer_zoo.models

MODULES = [
    f"{package.__name__}.{module.name}"
    for package in (transformer_zoo.layers, transformer_zoo.models)
    for module in pkgutil.iter_modules(package.__path__)
    if not module.ispkg
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_hold(name):
    results = doctest.testmod(importlib.import_module(name), report=False)
    assert results.failed == 0, f"{results.failed} of {name}'s examples failed (see the stdout)"
