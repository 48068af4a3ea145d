"""The acceptance test of real pretrained weights: all-MiniLM-L6-v2, imported with
`transformer-zoo import-hf`, exported with `transformer-zoo export`, and served with
`transformer-zoo embed`, reproduces the embeddings sentence-transformers computed
(tests/data/README.md) with cosine ≥ 0.9999 for every sentence, through the Keras and
the ONNX engines (the ONNX export, 40 s of tf2onnx, is in the slow set). No torch: the
reference is stored.

The sentences include accented and other non-ASCII text, Chinese, one-character inputs,
leading and trailing spaces, and one input over 256 tokens, which must be truncated as
sentence-transformers truncates it.
"""

import types

import numpy as np
import pytest

from tests.helpers import minilm_dir, minilm_reference
from transformer_zoo import cli
from transformer_zoo.run_directory import load_run_config

COSINE = 0.9999


@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
    """The run directory, imported once through the CLI; `minilm_export` adds its ONNX
    export (tf2onnx on 91 MB of weights: 40 s, so the ONNX checks are in the slow set)."""
    checkpoint = minilm_dir()
    root = tmp_path_factory.mktemp("minilm")
    run_dir, export_dir = root / "run", root / "export"
    assert cli.main(["import-hf", str(checkpoint), "--out", str(run_dir)]) == 0
    sentences, ids, reference = minilm_reference()
    # One sentence per line, exactly as recorded: split on "\n" only, nothing stripped.
    assert not any("\n" in s or "\r" in s for s in sentences)
    sentence_file = root / "sentences.txt"
    sentence_file.write_bytes(("\n".join(sentences) + "\n").encode("utf-8"))
    return types.SimpleNamespace(
        run_dir=run_dir,
        export_dir=export_dir,
        sentence_file=sentence_file,
        sentences=sentences,
        ids=ids,
        reference=reference,
        root=root,
    )


@pytest.fixture(scope="module")
def minilm_export(minilm):
    argv = ["export", str(minilm.run_dir), "--format", "onnx", "--out", str(minilm.export_dir)]
    assert cli.main(argv) == 0
    return minilm


def test_the_reference_covers_the_required_inputs(minilm):
    sentences, ids = minilm.sentences, minilm.ids
    assert any(any("\u4e00" <= c <= "\u9fff" for c in s) for s in sentences)  # Chinese
    assert any(any(c in "éüñ" for c in s) for s in sentences)  # accents
    assert any(len(s) == 1 for s in sentences)
    assert any(s != s.strip(" ") and s.startswith(" ") and s.endswith(" ") for s in sentences)
    assert max(len(row) for row in ids) == 256  # the truncated one: [CLS] + 254 + [SEP]


def test_import_hf_writes_an_embedding_run(minilm):
    config = load_run_config(minilm.run_dir)
    assert (config.family, config.task, config.max_length) == ("encoder-only", "embedding", 256)
    assert config.extra["pooling"] == {"mode": "mean", "normalize": True}


@pytest.mark.slow
def test_the_export_keeps_the_checkpoint_positions_and_uses_fused_operators(minilm_export):
    exported = load_run_config(minilm_export.export_dir).export
    assert exported["model"]["max_length"] == 512  # max_position_embeddings
    assert exported["onnx"]["graph_kind"] == "fused"


@pytest.mark.parametrize(
    "engine, batch_size", [pytest.param("onnx", 5, marks=pytest.mark.slow), ("keras", 32)]
)
def test_embed_reproduces_sentence_transformers(request, minilm, engine, batch_size):
    if engine == "onnx":
        request.getfixturevalue("minilm_export")
    model_dir = minilm.export_dir if engine == "onnx" else minilm.run_dir
    output = minilm.root / f"{engine}.npy"
    argv = ["embed", "--model", str(model_dir), "--input", str(minilm.sentence_file)]
    argv += ["--output", str(output), "--engine", engine, "--batch-size", str(batch_size)]
    assert cli.main(argv) == 0
    embeddings = np.load(output)
    assert embeddings.dtype == np.float32 and embeddings.shape == (len(minilm.sentences), 384)
    np.testing.assert_allclose(np.linalg.norm(embeddings, axis=1), 1.0, atol=1e-5)
    # Row i against reference row i: the rows come back in input order.
    cosine = (embeddings.astype(np.float64) * minilm.reference).sum(axis=1)
    worst = int(cosine.argmin())
    assert cosine.min() >= COSINE, f"{minilm.sentences[worst]!r}: cosine {cosine[worst]:.6f}"
