"""The onnxruntime engine runs without TensorFlow, and bad inputs get clear errors
(ValueError subclasses naming the problem), never an onnxruntime trace."""

import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from transformer_zoo.generation import Sampling
from transformer_zoo.run_directory import RunError
from transformer_zoo.serving import InputError, ModelDirectoryError, load_onnx, load_served_model

# A meta-path finder that makes every import of tensorflow or keras fail, installed before
# anything else is imported.
BLOCK_TENSORFLOW = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("tensorflow", "keras", "tf_keras", "tf2onnx"):
            raise ImportError(f"{name} is blocked in this test")
sys.meta_path.insert(0, Block())
"""


def test_runtime_serves_every_family_where_tensorflow_cannot_be_imported(family_artifacts):
    dirs = {
        f: family_artifacts(f).export_dir
        for f in ("decoder-only", "encoder-decoder", "encoder-only")
    }
    script = BLOCK_TENSORFLOW + textwrap.dedent(
        f"""
        try:
            import tensorflow
        except ImportError:
            pass
        else:
            raise SystemExit("tensorflow is importable")
        from transformer_zoo.generation import BeamSearch
        from transformer_zoo.serving import load_onnx
        print(load_onnx({str(dirs["decoder-only"])!r}).generate(["the cat"], 5, BeamSearch()))
        print(load_onnx({str(dirs["encoder-decoder"])!r}).translate(["March 5, 2021"], 6))
        model = load_onnx({str(dirs["encoder-only"])!r})
        print(model.embed(["dogs", "a cat"]).shape, model.classify(["dogs"])[0]["label"])
        banned = ("tensorflow", "keras", "transformer_zoo.models", "transformer_zoo.layers",
                  "transformer_zoo.train")
        loaded = [m for m in sys.modules if m.startswith(banned)]
        assert not loaded, loaded
        print("OK")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().endswith("OK")
    assert "(2, 32) " in result.stdout


@pytest.fixture(scope="module")
def decoder(family_artifacts):
    return load_onnx(family_artifacts("decoder-only").export_dir)


@pytest.mark.parametrize(
    "token_ids, message",
    [
        (np.array([[2.0, 5.0]]), "integer token ids"),
        (np.array([2, 5, 6]), "must be 2-D"),
        (np.zeros((1, 2, 3), np.int64), "must be 2-D"),
        (np.array([[2, 5, 10_000]]), r"must lie in \[0, \d+\)"),
        (np.array([[2, -1]]), "Received an id of -1"),
        (np.array([[0, 0], [2, 5]]), "holds no token"),
        ([[2] * 47], "leaves room for 1 new token in the model's context of 48"),
        ([[2] * 60], "does not fit"),
    ],
)
def test_bad_token_ids_raise_input_errors(decoder, token_ids, message):
    with pytest.raises(InputError, match=message):
        decoder.generate_ids(token_ids, max_new_tokens=4)


def test_prompt_longer_than_the_context_is_rejected_before_onnxruntime(decoder):
    with pytest.raises(InputError, match="context of 48 tokens"):
        decoder.generate(["the cat sat on the mat " * 20], max_new_tokens=1)


def test_wrong_family_and_bad_arguments_raise_value_errors(decoder):
    with pytest.raises(InputError, match="needs an encoder-decoder model"):
        decoder.translate(["x"])
    with pytest.raises(InputError, match="max_new_tokens"):
        decoder.generate(["x"], max_new_tokens=0)
    with pytest.raises(ValueError, match="temperature"):
        decoder.generate(["x"], 3, Sampling(temperature=0.0))
    with pytest.raises(InputError, match="strings"):
        decoder.generate([b"bytes"])


@pytest.fixture
def export_copy(family_artifacts, tmp_path):
    source = family_artifacts("encoder-only").export_dir
    target = tmp_path / "export"
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("saved_model"))
    return target


@pytest.mark.parametrize("missing", ["model.onnx", "tokenizer.model", "config.json"])
def test_directory_missing_a_file_raises_a_clear_error(export_copy, missing):
    os.remove(export_copy / missing)
    with pytest.raises(RunError, match=missing.replace(".", r"\.")):
        load_onnx(export_copy)


def test_corrupted_onnx_file_raises_a_clear_error(export_copy):
    data = (export_copy / "model.onnx").read_bytes()
    (export_copy / "model.onnx").write_bytes(data[: len(data) // 3])
    with pytest.raises(ModelDirectoryError, match="not a valid ONNX model"):
        load_onnx(export_copy)


@pytest.mark.parametrize(
    "damage", ["saved_model.pb", "variables/variables.data-00000-of-00001", "variables"]
)
def test_a_damaged_saved_model_raises_a_clear_error(family_artifacts, tmp_path, damage):
    """Each gave a TensorFlow traceback (IndexError, OSError, OpError, FileNotFoundError)."""
    target = tmp_path / "export"
    shutil.copytree(family_artifacts("encoder-only").export_dir, target)
    path = target / "saved_model" / damage
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(ModelDirectoryError, match="is not a SavedModel that TensorFlow can load"):
        load_served_model(target, "saved_model")


def test_corrupted_tokenizer_and_config_raise_clear_errors(export_copy, tmp_path):
    (export_copy / "tokenizer.model").write_bytes(b"not a sentencepiece model")
    with pytest.raises(ModelDirectoryError, match="Cannot load the tokenizer"):
        load_onnx(export_copy)
    (export_copy / "config.json").write_text("{")
    with pytest.raises(RunError, match="Cannot read"):
        load_onnx(export_copy)
    with pytest.raises(RunError, match="no such directory"):
        load_onnx(tmp_path / "nowhere")


def test_mean_pool_is_the_masked_mean_of_each_row_normalised():
    from transformer_zoo.serving import mean_pool

    rng = np.random.default_rng(0)
    sequence = rng.standard_normal((3, 5, 8)).astype(np.float32)
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 0, 0, 0, 0]])
    for normalize in (False, True):
        pooled = mean_pool(sequence, mask, normalize)
        for row, length in enumerate(mask.sum(1)):
            expected = sequence[row, :length].astype(np.float64).mean(0)
            if normalize:
                expected /= np.linalg.norm(expected)
            np.testing.assert_allclose(pooled[row], expected, rtol=1e-5, atol=1e-6)
    assert mean_pool(np.zeros((1, 2, 4), np.float32), np.zeros((1, 2), np.int64)).tolist() == [
        [0.0] * 4
    ]  # an all-padding row: zeros, not NaN (the clamps)


def test_the_graphs_sentence_embedding_is_mean_pool_of_its_last_hidden_state(wordpiece_artifacts):
    """`embed` reads the graph's pooled output; numpy's `mean_pool` (unnormalised
    embeddings, older exports) must agree with it."""
    from transformer_zoo.serving import mean_pool

    served = load_onnx(wordpiece_artifacts.export_dir)
    texts = ["The cat sat on the mat.", "dogs", "a quick fox, march"]
    outputs = served.encode(texts)
    pooled = mean_pool(outputs["last_hidden_state"], outputs["attention_mask"])
    np.testing.assert_allclose(outputs["sentence_embedding"], pooled, atol=1e-6)
    raw = served.embed(texts, normalize=False)
    np.testing.assert_allclose(
        raw / np.linalg.norm(raw, axis=1, keepdims=True), served.embed(texts), atol=1e-6
    )
