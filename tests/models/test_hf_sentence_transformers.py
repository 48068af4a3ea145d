"""sentence-transformers checkpoints imported with `import-hf`, held to what
sentence-transformers itself computes (tests/data/hf_st_mean, a tiny BERT saved by
sentence-transformers 5 as Transformer → mean Pooling, without Normalize, as
paraphrase-MiniLM-L6-v2 and the msmarco dot-product models are): the embeddings of every
engine are normalised exactly when the checkpoint's modules say so, the current file format
is read, and modules `embed` does not compute are refused."""

import json

import numpy as np
import pytest

from tests.helpers import DATA_DIR
from transformer_zoo import cli
from transformer_zoo.export.run_export import export_run
from transformer_zoo.models.hf.run import import_hf_run
from transformer_zoo.serving import load_served_model

CHECKPOINT = DATA_DIR / "hf_st_mean"
REFERENCE = json.loads((CHECKPOINT / "reference.json").read_text())


def copy_checkpoint(directory, modules=None):
    """The checkpoint copied, with another `modules.json`."""
    for path in CHECKPOINT.rglob("*"):
        if path.is_file():
            target = directory / path.relative_to(CHECKPOINT)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    if modules is not None:
        (directory / "modules.json").write_text(json.dumps(modules))
    return directory


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """`{engine: directory}`: the run, its fused ONNX + SavedModel export, its plain ONNX."""
    root = tmp_path_factory.mktemp("st_mean")
    import_hf_run(CHECKPOINT, root / "run")
    export_run(root / "run", root / "export", formats=("onnx", "saved_model"))
    export_run(root / "run", root / "plain", formats=("onnx",), graphs="plain")
    return {
        "keras": root / "run",
        "onnx": root / "export",
        "saved_model": root / "export",
        "plain": root / "plain",
    }


@pytest.mark.parametrize("engine", ["keras", "onnx", "saved_model", "plain"])
def test_embeddings_without_normalize_are_sentence_transformers_own(exported, engine):
    served = load_served_model(exported[engine], "onnx" if engine == "plain" else engine)
    assert served.config.extra["pooling"] == {"mode": "mean", "normalize": False}
    expected = np.array(REFERENCE["embeddings"], np.float32)
    assert not np.allclose(np.linalg.norm(expected, axis=1), 1.0)  # the case that matters
    np.testing.assert_allclose(served.embed(REFERENCE["sentences"]), expected, atol=1e-5)
    # Asked for, the normalised vectors are still there.
    unit = expected / np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(
        served.embed(REFERENCE["sentences"], normalize=True), unit, atol=1e-5
    )


@pytest.mark.parametrize("engine", ["onnx", "plain"])
def test_the_onnx_graphs_sentence_embedding_output_is_unnormalised(exported, engine):
    """What a user of the ONNX file alone reads (the fused and the plain graph)."""
    served = load_served_model(exported[engine], "onnx")
    vectors = served.encode(REFERENCE["sentences"][:3])["sentence_embedding"]
    expected = np.array(REFERENCE["embeddings"][:3], np.float32)
    np.testing.assert_allclose(vectors, expected, atol=1e-5)


def test_the_normalize_module_of_sentence_transformers_5_is_read(tmp_path):
    checkpoint = copy_checkpoint(tmp_path / "ckpt", REFERENCE["modules_with_normalize"])
    config = import_hf_run(checkpoint, tmp_path / "run")
    assert config.extra["pooling"] == {"mode": "mean", "normalize": True}
    served = load_served_model(tmp_path / "run", "keras")
    expected = np.array(REFERENCE["embeddings_normalized"], np.float32)
    np.testing.assert_allclose(served.embed(REFERENCE["sentences"]), expected, atol=1e-5)


def test_modules_embed_does_not_compute_are_refused_by_name(tmp_path, capsys):
    dense = {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}
    modules = [*json.loads((CHECKPOINT / "modules.json").read_text()), dense]
    checkpoint = copy_checkpoint(tmp_path / "ckpt", modules)
    assert cli.main(["import-hf", str(checkpoint), "--out", str(tmp_path / "run")]) == 2
    error = capsys.readouterr().err
    assert "sentence_transformers.models.Dense" in error and len(error.splitlines()) == 1
    assert not (tmp_path / "run").exists()
