"""`export --format hf`: the same weight tables as `import-hf`, inverted. A checkpoint that
transformers wrote comes back tensor for tensor (so transformers loads our export as it
loaded its own; benchmarks/hf_checkpoints.py shows that in a torch environment), and a
model trained here reads back with the same outputs."""

import json
import os
import stat

import numpy as np
import pytest
from safetensors.numpy import load_file

from tests.helpers import cli_error
from tests.models.test_hf_bert_import import CONFIG, LABELS, classifier_checkpoint, write_checkpoint
from tests.models.test_hf_checkpoints import CHECKPOINTS
from transformer_zoo import cli
from transformer_zoo.export.run_export import export_run
from transformer_zoo.models.hf.bert import import_hf_bert
from transformer_zoo.models.hf.gpt2 import import_hf_gpt2
from transformer_zoo.models.hf.run import import_hf_run


def _same_tensors(written, original, buffers=()):
    ours, theirs = load_file(written), load_file(original)
    assert sorted(ours) == sorted(set(theirs) - set(buffers))
    for name, value in ours.items():
        np.testing.assert_array_equal(value, theirs[name], err_msg=name)


def test_gpt2_checkpoint_comes_back_tensor_for_tensor(tmp_path):
    import_hf_run(CHECKPOINTS["gpt2"], tmp_path / "run")
    report = export_run(tmp_path / "run", tmp_path / "hf", formats=("hf",))["hf"]
    assert report["architecture"] == "GPT2LMHeadModel" and report["max_abs_diff"] == 0.0
    _same_tensors(tmp_path / "hf" / "model.safetensors", CHECKPOINTS["gpt2"] / "model.safetensors")
    ours = json.loads((tmp_path / "hf" / "config.json").read_text())
    theirs = json.loads((CHECKPOINTS["gpt2"] / "config.json").read_text())
    keys = ["model_type", "vocab_size", "n_positions", "n_embd", "n_layer", "n_head",
            "activation_function", "layer_norm_epsilon", "bos_token_id", "eos_token_id"]  # fmt: skip
    assert {k: ours[k] for k in keys} == {k: theirs[k] for k in keys}
    assert ours["n_inner"] == 4 * theirs["n_embd"] and theirs["n_inner"] is None
    tokenizer = json.loads((tmp_path / "hf" / "tokenizer_config.json").read_text())
    assert tokenizer["eos_token"] == "<|endoftext|>"
    assert (tmp_path / "hf" / "tokenizer.json").read_bytes() == (
        tmp_path / "run" / "tokenizer.json"
    ).read_bytes()


def test_bert_classifier_checkpoint_comes_back_tensor_for_tensor(tmp_path):
    checkpoint = write_checkpoint(
        tmp_path / "ckpt", classifier_checkpoint(), {**CONFIG, "id2label": LABELS}
    )
    import_hf_run(checkpoint, tmp_path / "run")
    report = export_run(tmp_path / "run", tmp_path / "hf", formats=("hf",))["hf"]
    assert report["architecture"] == "BertForSequenceClassification"
    _same_tensors(
        tmp_path / "hf" / "model.safetensors",
        checkpoint / "model.safetensors",
        buffers=["bert.embeddings.position_ids"],  # transformers makes it; not a weight
    )
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["id2label"] == LABELS and config["hidden_act"] == "gelu"


@pytest.mark.parametrize("family", ["decoder-only", "encoder-only"])
def test_models_trained_here_read_back_with_the_same_outputs(family_artifacts, family, tmp_path):
    artifacts = family_artifacts(family)
    report = export_run(artifacts.run_dir, tmp_path / "hf", formats=("hf",))["hf"]
    assert report["max_abs_diff"] <= 1e-5
    assert "tokenizer.model" in report["files"]  # our SentencePiece model, copied
    settings = json.loads((tmp_path / "hf" / "tokenizer_config.json").read_text())
    assert settings["tokenizer_class"] == "LlamaTokenizer" and settings["add_bos_token"]
    assert settings["add_eos_token"] == (family == "encoder-only")  # [bos] text [eos]
    assert (settings["bos_token"], settings["eos_token"]) == ("<s>", "</s>")
    ids = np.array([[2, 5, 7, 9, 3], [2, 6, 8, 3, 0]])
    inputs = {"token_ids": ids, "padding_mask": ids != 0}
    read = (import_hf_gpt2 if family == "decoder-only" else import_hf_bert)(tmp_path / "hf")
    np.testing.assert_allclose(
        np.asarray(read(inputs)), np.asarray(artifacts.model(inputs)), atol=1e-5
    )
    if family == "encoder-only":
        config = json.loads((tmp_path / "hf" / "config.json").read_text())
        assert list(config["id2label"].values()) == artifacts.config.label_names


def test_what_hf_cannot_hold_is_refused_in_one_line(family_artifacts, tmp_path, capsys):
    run_dir = family_artifacts("encoder-decoder").run_dir
    assert cli.main(["export", str(run_dir), "--format", "hf", "--out", str(tmp_path / "a")]) == 2
    error = capsys.readouterr().err
    assert "decoder-only (GPT-2) and encoder-only (BERT)" in error and len(error.splitlines()) == 1
    with pytest.raises(ValueError, match="export it alone"):
        export_run(run_dir, tmp_path / "b", formats=("hf", "onnx"))
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_an_hf_export_given_where_ours_is_expected_is_named(tmp_path, capsys):
    """`evaluate --model HF_EXPORT` said "Unknown config keys ['architectures', ...]"."""
    checkpoint = write_checkpoint(tmp_path / "ckpt", config=CONFIG)
    import_hf_run(checkpoint, tmp_path / "run")
    export_run(tmp_path / "run", tmp_path / "hf", formats=("hf",))
    capsys.readouterr()  # the export's report
    argv = ["evaluate", str(tmp_path / "run"), "--engine", "onnx", "--model", str(tmp_path / "hf")]
    line = cli_error(capsys, argv)
    assert f"{tmp_path / 'hf'} holds a Hugging Face model (transformers' config.json" in line
    assert "what `export --format onnx` wrote" in line


def test_a_swish_encoder_exports_as_silu_and_reads_back(tmp_path):
    """BERT's `hidden_act` "silu" (transformers' name of swish) both ways."""
    checkpoint = write_checkpoint(tmp_path / "ckpt", config={**CONFIG, "hidden_act": "silu"})
    import_hf_run(checkpoint, tmp_path / "run")
    report = export_run(tmp_path / "run", tmp_path / "hf", formats=("hf",))["hf"]
    assert report["max_abs_diff"] == 0.0
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["hidden_act"] == "silu"
    _same_tensors(
        tmp_path / "hf" / "model.safetensors",
        checkpoint / "model.safetensors",
        buffers=["embeddings.position_ids"],
    )


def test_an_hf_export_of_another_run_is_refused_and_of_the_same_run_rewritten(
    family_artifacts, tmp_path, capsys
):
    """An hf export over one of another run added its files beside the other's
    tokenizer (GPT-2's tokenizer.json stayed beside tokenizer.model, and import-hf read
    the stale one): refused as the ONNX exporters refuse, the directory left as it was."""
    import_hf_run(CHECKPOINTS["gpt2"], tmp_path / "gpt2")
    out = tmp_path / "hf"
    export_run(tmp_path / "gpt2", out, formats=("hf",))
    before = {path.name: path.read_bytes() for path in out.iterdir()}
    argv = ["export", str(family_artifacts("decoder-only").run_dir), "--format", "hf"]
    capsys.readouterr()  # the log of the export above, where a CLI test left its handler
    error = cli_error(capsys, [*argv, "--out", str(out)])
    assert "holds an export of another run" in error, error
    assert {path.name: path.read_bytes() for path in out.iterdir()} == before
    export_run(tmp_path / "gpt2", out, formats=("hf",))  # the same run: written again
    assert sorted(path.name for path in out.iterdir()) == sorted(before)
    (out / "config.json").write_text((CHECKPOINTS["gpt2"] / "config.json").read_text())
    capsys.readouterr()
    error = cli_error(
        capsys, ["export", str(tmp_path / "gpt2"), "--format", "hf", "--out", str(out)]
    )
    assert "holds no Hugging Face export of ours" in error  # transformers' own checkpoint


def test_hf_files_take_the_umask_mode(tmp_path):
    """safetensors' save_file made model.safetensors 0600 (unreadable by other users)."""
    import_hf_run(CHECKPOINTS["gpt2"], tmp_path / "gpt2")
    umask = os.umask(0o022)
    try:
        export_run(tmp_path / "gpt2", tmp_path / "hf", formats=("hf",))
    finally:
        os.umask(umask)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "hf").iterdir()}
    assert modes == dict.fromkeys(modes, 0o644) and "model.safetensors" in modes
