"""`generate(model, ...)` keeps the model's traced step graphs between calls; after the
model changes it still decodes the model as `model(...)` computes it now."""

import numpy as np
import pytest

from transformer_zoo.generation import generate
from transformer_zoo.models import DecoderOnly

PROMPT = np.array([[1, 2, 3], [4, 5, 6]], "int32")
NEW_TOKENS = 4


def tiny_model(seed: int = 0) -> DecoderOnly:
    import keras

    keras.utils.set_random_seed(seed)
    return DecoderOnly(30, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32)


def greedy_by_full_pass(model) -> np.ndarray:
    """The model's own greedy continuation: argmax of its eager full forward pass."""
    ids = PROMPT
    for _ in range(NEW_TOKENS):
        logits = np.asarray(model(ids))  # (B, T, V)
        ids = np.concatenate([ids, logits[:, -1].argmax(-1)[:, None]], axis=1)
    return ids[:, PROMPT.shape[1] :]


def _randomize_new_variables(model, old_variables, seed: int) -> None:
    """Random values in the variables the change added (LoRA's adapters, the quantized
    kernels and their scales), so that the changed model decodes other tokens."""
    old = {id(variable) for variable in old_variables}
    rng = np.random.default_rng(seed)
    for variable in model.variables:
        if id(variable) not in old:
            if "int" in str(variable.dtype):
                values = rng.integers(-127, 128, size=variable.shape)
            else:
                values = rng.uniform(0.5, 1.5, size=variable.shape)
            variable.assign(values.astype(variable.dtype))


@pytest.mark.parametrize("use_cache", [True, False])
@pytest.mark.parametrize("change", ["enable_lora", "quantize"])
def test_generate_after_enable_lora_or_quantize_decodes_the_changed_model(change, use_cache):
    """The graphs traced by the first call read the variables of that call: after
    `enable_lora` (new adapters) or `quantize` (integer kernels and scales in new
    variables) the second call decoded the model as it was."""
    model = tiny_model()
    before = generate(model, PROMPT, NEW_TOKENS, use_cache=use_cache).tokens
    np.testing.assert_array_equal(before, greedy_by_full_pass(model))
    old_variables = model.variables
    if change == "enable_lora":
        model.enable_lora(2)
    else:
        model.quantize("int8")
    _randomize_new_variables(model, old_variables, seed=1)
    expected = greedy_by_full_pass(model)
    assert not np.array_equal(expected, before)  # the change shows in the tokens
    after = generate(model, PROMPT, NEW_TOKENS, use_cache=use_cache).tokens
    np.testing.assert_array_equal(after, expected)


def test_generate_after_load_weights_decodes_the_loaded_values(tmp_path):
    """New values in the same variables need no new trace: the graphs read them."""
    model, other = tiny_model(0), tiny_model(1)
    generate(model, PROMPT, NEW_TOKENS)
    other.save_weights(tmp_path / "other.weights.h5")
    model.load_weights(tmp_path / "other.weights.h5")
    expected = greedy_by_full_pass(other)
    np.testing.assert_array_equal(greedy_by_full_pass(model), expected)
    np.testing.assert_array_equal(generate(model, PROMPT, NEW_TOKENS).tokens, expected)


def test_a_model_that_generated_is_freed_with_its_kept_graphs():
    """The kept engines hold the model; kept in a table keyed by the model, they held it for
    ever (a notebook that builds models in a loop grew without bound)."""
    import gc
    import weakref

    model = tiny_model()
    generate(model, PROMPT, NEW_TOKENS)
    generate(model, PROMPT, NEW_TOKENS, use_cache=False)
    freed = weakref.ref(model)
    del model
    gc.collect()
    assert freed() is None
