"""onnxruntime-genai, an independent client, runs our decoder-only export (the fused
graph, and its int8 and int4 copies) and produces our greedy tokens: the proof that the
graph follows the conventions (DESIGN.md)."""

import numpy as np
import pytest

from transformer_zoo.export import quantize_onnx
from transformer_zoo.generation import generate
from transformer_zoo.serving import load_onnx

og = pytest.importorskip("onnxruntime_genai")


def genai_greedy(directory, prompt: list[int], new_tokens: int) -> np.ndarray:
    model = og.Model(str(directory))
    params = og.GeneratorParams(model)
    # No EOS stop on either side, so that both run exactly `new_tokens` steps.
    params.set_search_options(max_length=len(prompt) + new_tokens, do_sample=False)
    generator = og.Generator(model, params)
    generator.append_tokens(np.array([prompt], np.int32))
    while not generator.is_done():
        generator.generate_next_token()
    return np.asarray(generator.get_sequence(0))[len(prompt) :]


@pytest.mark.parametrize("prompt", [[2, 7, 9, 11, 5], [2]])
def test_onnxruntime_genai_greedy_tokens_equal_ours(family_artifacts, prompt):
    art = family_artifacts("decoder-only")
    new_tokens = 12
    theirs = genai_greedy(art.export_dir, prompt, new_tokens)
    ours = generate(art.model, np.array([prompt]), new_tokens, eos_id=None).tokens[0]
    assert len(ours) == new_tokens  # untrained weights may repeat one token; equality still binds
    np.testing.assert_array_equal(theirs, ours)


@pytest.mark.parametrize("weights", ["int8", "int4"])
def test_onnxruntime_genai_runs_the_quantized_exports(family_artifacts, tmp_path, weights):
    """The int8 and int4 copies keep the conventions: genai's greedy tokens equal our
    runtime's on them."""
    art = family_artifacts("decoder-only")
    quantize_onnx(art.export_dir, tmp_path / weights, max_accuracy_drop=None, weights=weights)
    prompt, new_tokens = [2, 7, 9, 11, 5], 12
    theirs = genai_greedy(tmp_path / weights, prompt, new_tokens)
    ours = load_onnx(tmp_path / weights).generate_ids([prompt], new_tokens).tokens[0]
    np.testing.assert_array_equal(theirs, ours)


def test_onnxruntime_genai_samples_when_asked(family_artifacts):
    """`do_sample` with the config's own search defaults samples (different seeds, different
    tokens), as our sampling does; a `top_k` of 1 there made it greedy whatever the seed."""
    model = og.Model(str(family_artifacts("decoder-only").export_dir))
    prompt, runs = [2, 7, 9, 11, 5], set()
    for seed in range(4):
        params = og.GeneratorParams(model)
        params.set_search_options(max_length=len(prompt) + 12, do_sample=True, random_seed=seed)
        generator = og.Generator(model, params)
        generator.append_tokens(np.array([prompt], np.int32))
        while not generator.is_done():
            generator.generate_next_token()
        runs.add(tuple(np.asarray(generator.get_sequence(0))[len(prompt) :]))
    assert len(runs) > 1
