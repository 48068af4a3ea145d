"""The SavedModel works with TensorFlow's own client, `saved_model_cli`."""

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from transformer_zoo.generation import generate

SAVED_MODEL_CLI = pathlib.Path(sys.executable).with_name("saved_model_cli")


def _cli(*args):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    result = subprocess.run(
        [str(SAVED_MODEL_CLI), *args], capture_output=True, text=True, timeout=180, env=env
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


@pytest.mark.slow  # 15 s of saved_model_cli; the signatures run in-process in test_engines_agree.py
def test_saved_model_cli_shows_the_signatures_and_runs_generate(family_artifacts, tmp_path):
    art = family_artifacts("decoder-only")
    path = str(art.export_dir / "saved_model")
    shown = _cli("show", "--all", "--dir", path)
    for signature in ("serving_default", "generate", "decoder_step"):
        assert f"signature_def['{signature}']" in shown
    assert "inputs['past_key_values.0.key']" in shown and "outputs['present.1.value']" in shown
    assert "inputs['max_new_tokens']" in shown and "outputs['tokens']" in shown

    prompts = np.array([[2, 7, 9, 11, 5], [2, 14, 0, 0, 0]], np.int64)  # right-padded
    np.save(tmp_path / "ids.npy", prompts)
    np.save(tmp_path / "mask.npy", (prompts != 0).astype(np.int64))
    np.save(tmp_path / "budget.npy", np.int32(8))
    feeds = f"input_ids={tmp_path}/ids.npy;attention_mask={tmp_path}/mask.npy;"
    feeds += f"max_new_tokens={tmp_path}/budget.npy"
    out = tmp_path / "out"
    _cli(
        "run", "--dir", path, "--tag_set", "serve", "--signature_def", "generate",
        "--inputs", feeds, "--outdir", str(out),
    )  # fmt: skip
    tokens = np.load(out / "tokens.npy")
    expected = generate(art.model, prompts, 8, eos_id=3).tokens
    np.testing.assert_array_equal(tokens, expected)
