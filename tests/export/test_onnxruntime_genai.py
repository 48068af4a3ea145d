"""onnxruntime-genai, an independent client, runs our decoder-only export and produces
our greedy tokens: the proof that the graph follows the conventions (DESIGN.md)."""

import numpy as np
import pytest

from transformer_zoo.models import generate

og = pytest.importorskip("onnxruntime_genai")


@pytest.mark.parametrize("prompt", [[2, 7, 9, 11, 5], [2]])
def test_onnxruntime_genai_greedy_tokens_equal_ours(family_artifacts, prompt):
    art = family_artifacts("decoder-only")
    new_tokens = 12
    model = og.Model(str(art.export_dir))
    params = og.GeneratorParams(model)
    # No EOS stop on either side, so that both run exactly `new_tokens` steps.
    params.set_search_options(max_length=len(prompt) + new_tokens, do_sample=False)
    generator = og.Generator(model, params)
    generator.append_tokens(np.array([prompt], np.int32))
    while not generator.is_done():
        generator.generate_next_token()
    theirs = np.asarray(generator.get_sequence(0))[len(prompt) :]
    ours = generate(art.model, np.array([prompt]), new_tokens, eos_id=None).tokens[0]
    assert len(ours) == new_tokens  # untrained weights may repeat one token; equality still binds
    np.testing.assert_array_equal(theirs, ours)
