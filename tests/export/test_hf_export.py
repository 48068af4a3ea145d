"""`export --format hf`: the same weight tables as `import-hf`, inverted. A checkpoint that
transformers wrote comes back tensor for tensor (so transformers loads our export as it
loaded its own; benchmarks/hf_checkpoints.py shows that in a torch environment), and a
model trained here reads back with the same outputs."""

import json
import os
import shutil
import stat

import numpy as np
import pytest
from safetensors.numpy import load_file
from tokenizers import Tokenizer

from tests.artifacts import LABELS, SMALL
from tests.data.hf_sentencepiece_cases import (
    CASES,
    FAMILIES,
    PAIRS,
    REFERENCE,
    TEXTS,
    our_ids,
    pieces_digest,
    train,
    write_export,
)
from tests.helpers import cli_error
from tests.models.test_hf_bert_import import CONFIG, classifier_checkpoint, write_checkpoint
from tests.models.test_hf_bert_import import LABELS as BERT_LABELS
from tests.models.test_hf_checkpoints import CHECKPOINTS
from transformer_zoo import cli
from transformer_zoo.export.run_export import export_run
from transformer_zoo.models import EncoderOnlyClassifier, from_preset
from transformer_zoo.models.hf.bert import import_hf_bert
from transformer_zoo.models.hf.gpt2 import import_hf_gpt2
from transformer_zoo.models.hf.run import import_hf_run
from transformer_zoo.run_directory import RunConfig, save_run_config
from transformer_zoo.text import load_tokenizers, pair_ids, prompt_ids


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
        tmp_path / "ckpt", classifier_checkpoint(), {**CONFIG, "id2label": BERT_LABELS}
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
    assert config["id2label"] == BERT_LABELS and config["hidden_act"] == "gelu"


@pytest.mark.parametrize("family", ["decoder-only", "encoder-only"])
def test_models_trained_here_read_back_with_the_same_outputs(family_artifacts, family, tmp_path):
    artifacts = family_artifacts(family)
    report = export_run(artifacts.run_dir, tmp_path / "hf", formats=("hf",))["hf"]
    assert report["max_abs_diff"] <= 1e-5
    # Our SentencePiece model, copied, and the tokenizer.json that encodes as it does.
    assert {"tokenizer.model", "tokenizer.json"} <= set(report["files"])
    settings = json.loads((tmp_path / "hf" / "tokenizer_config.json").read_text())
    assert settings["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert (settings["bos_token"], settings["eos_token"]) == ("<s>", "</s>")
    assert settings["split_special_tokens"]  # "<s>" in a text is text, as in ours
    text = "a test of the tokenizer"
    exported = Tokenizer.from_file(str(tmp_path / "hf" / "tokenizer.json"))
    ours = load_tokenizers(artifacts.run_dir)[0]
    assert exported.encode(text).ids == (
        pair_ids(ours, text)[0] if family == "encoder-only" else prompt_ids(ours, text)
    )
    ids = np.array([[2, 5, 7, 9, 3], [2, 6, 8, 3, 0]])
    inputs = {"token_ids": ids, "padding_mask": ids != 0}
    read = (import_hf_gpt2 if family == "decoder-only" else import_hf_bert)(tmp_path / "hf")
    np.testing.assert_allclose(
        np.asarray(read(inputs)), np.asarray(artifacts.model(inputs)), atol=1e-5
    )
    if family == "encoder-only":
        config = json.loads((tmp_path / "hf" / "config.json").read_text())
        assert list(config["id2label"].values()) == artifacts.config.label_names
    # import-hf reads GPT-2's and BERT's tokenizers only: the SentencePiece tokenizer.json
    # was read as GPT-2's byte-level one (its pre-tokenizer replaced), with wrong ids.
    with pytest.raises(ValueError, match="not a byte-level BPE|no WordPiece vocabulary"):
        import_hf_run(tmp_path / "hf", tmp_path / "reimported")
    assert not (tmp_path / "reimported").exists()


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


@pytest.mark.parametrize(("kind", "normalization"), CASES)
def test_transformers_reads_an_exported_sentencepiece_tokenizer_with_our_ids(
    kind, normalization, tmp_path
):
    """transformers 5.25's AutoTokenizer (fast and not) gave other ids than ours for the
    `LlamaTokenizer` this export described (unigram pieces split into characters, a bpe
    text's first "▁" lost, a "▁" before a char model's text). Its ids of our export
    (tests/data/make_hf_references.py sentencepiece-export) are held to SentencePiece's in
    our formats, and to those of the tokenizer.json the export writes now."""
    reference = json.loads(REFERENCE.read_text(encoding="utf-8"))
    assert reference["texts"] == TEXTS and [tuple(p) for p in reference["pairs"]] == PAIRS
    case = next(
        c for c in reference["cases"] if (c["kind"], c["normalization"]) == (kind, normalization)
    )
    tokenizer, family = train(kind, normalization), FAMILIES[normalization]
    assert pieces_digest(tokenizer) == case["pieces_digest"], (
        "train_tokenizer makes another vocabulary here than the reference's: make it again"
    )
    exported_dir = write_export(tokenizer, family, tmp_path)
    exported = Tokenizer.from_file(str(exported_dir / "tokenizer.json"))
    settings = json.loads((exported_dir / "tokenizer_config.json").read_text())
    exported.encode_special_tokens = settings["split_special_tokens"]  # as transformers
    for text, theirs, decoded in zip(TEXTS, case["ids"], case["decoded"], strict=True):
        assert our_ids(tokenizer, family, text)[0] == theirs, text
        assert exported.encode(text).ids == theirs, text
        # Not held: <unk>, which transformers drops and ours writes " ⁇ ", and a text
        # that starts with a "▁" of its own (text.hf_tokenizer_json).
        if tokenizer.unk_id not in theirs and not text.lstrip(" ").startswith("▁"):
            assert tokenizer.decode(theirs) == decoded, text
    if family != "encoder-only":
        return
    for (a, b), ids, types in zip(
        PAIRS, case["pair_ids"], case["pair_token_type_ids"], strict=True
    ):
        assert our_ids(tokenizer, family, a, b) == (ids, types)
        assert (exported.encode(a, b).ids, exported.encode(a, b).type_ids) == (ids, types)


@pytest.mark.parametrize("segments", [0, 1])
def test_a_one_segment_encoders_tokenizer_reads_a_pair_in_segment_0(tokenizer, segments, tmp_path):
    """An encoder of fewer than two segment rows exports `type_vocab_size` 1, and a
    tokenizer.json that puts a pair's second text in segment 0, as `pair_ids` does for it
    (BERT's post-processor would write segment 1, a row the checkpoint does not have)."""
    backbone = from_preset(
        "tiny", family="encoder-only", vocabulary_size=tokenizer.vocabulary_size,
        max_length=32, type_vocabulary_size=segments, **SMALL,
    )  # fmt: skip
    model = EncoderOnlyClassifier(backbone, num_classes=len(LABELS), dropout=0.0)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    model.save(run_dir / "model.keras")
    tokenizer.save(run_dir / "tokenizer.model")
    config = RunConfig(
        family="encoder-only", preset="tiny", task="classification", label_names=LABELS, seed=0
    )
    save_run_config(run_dir, config)
    export_run(run_dir, tmp_path / "hf", formats=("hf",))
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["type_vocab_size"] == 1
    exported = Tokenizer.from_file(str(tmp_path / "hf" / "tokenizer.json"))
    for a, b in PAIRS:
        encoding = exported.encode(a, b)
        ids, segment_ids = pair_ids(tokenizer, a, b, None, segments)
        assert (encoding.ids, encoding.type_ids) == (ids, segment_ids) and not any(segment_ids)


@pytest.mark.parametrize(("name", "ours"), [("relu", "relu"), ("silu", "swish")])
def test_a_relu_or_swish_gpt2_reads_as_transformers_and_exports_back(tmp_path, name, ours):
    """export --format hf refused a relu or swish `DecoderOnly` ("GPT-2 has no `relu`
    activation"), and import-hf such a checkpoint, though transformers' GPT-2 takes any
    ACT2FN name; the reference is transformers' logits with `activation_function` `name`
    (tests/data/make_hf_references.py gpt2-activations)."""
    checkpoint = tmp_path / "ckpt"
    shutil.copytree(CHECKPOINTS["gpt2"], checkpoint)
    config = json.loads((checkpoint / "config.json").read_text())
    (checkpoint / "config.json").write_text(json.dumps({**config, "activation_function": name}))
    expected = np.load(CHECKPOINTS["gpt2"] / "activations.npz")
    model = import_hf_gpt2(checkpoint)
    assert model.activation == ours
    ids = np.array(json.loads((checkpoint / "reference.json").read_text())["inputs"][:1])
    logits = np.asarray(model({"token_ids": ids, "padding_mask": np.ones_like(ids)}))[0]
    np.testing.assert_allclose(logits, expected[name], atol=1e-4)  # id 0: a token, not padding
    import_hf_run(checkpoint, tmp_path / "run")
    report = export_run(tmp_path / "run", tmp_path / "hf", formats=("hf",))["hf"]
    assert report["max_abs_diff"] == 0.0
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["activation_function"] == name
    _same_tensors(tmp_path / "hf" / "model.safetensors", checkpoint / "model.safetensors")
