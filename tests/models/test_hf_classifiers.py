"""Sequence classifiers and cross-encoders imported with `import-hf`, held to what
transformers' text-classification pipeline says of the same checkpoint
(tests/data/hf_bert_classifier, made by tests/data/make_hf_references.py): its scores under
each `problem_type` (softmax, a sigmoid per label, a regression's raw value), for texts and
text pairs, and its tokenizer's pair ids; heads a sentence classifier would misread are
refused."""

import json

import pytest
from safetensors.numpy import load_file, save_file

from tests.helpers import DATA_DIR
from transformer_zoo import cli
from transformer_zoo.export.run_export import export_run
from transformer_zoo.models.hf.run import import_hf_run
from transformer_zoo.serving import load_served_model
from transformer_zoo.text.formats import encoder_rows
from transformer_zoo.text.wordpiece import WordPieceTokenizer

CHECKPOINT = DATA_DIR / "hf_bert_classifier"
REFERENCE = json.loads((CHECKPOINT / "reference.json").read_text())
VARIANTS = ("multi_label", "single_label", "one_label", "regression")


def variant_checkpoint(directory, variant):
    """The checkpoint as `make_hf_references.classifier_variant` makes `variant`: its
    problem type changed, or (one_label, regression) only the head's first row kept."""
    directory.mkdir(parents=True)
    config = json.loads((CHECKPOINT / "config.json").read_text())
    tensors = load_file(CHECKPOINT / "model.safetensors")
    if variant in ("multi_label", "single_label"):
        config["problem_type"] = f"{variant}_classification"
    else:
        config["problem_type"] = "regression" if variant == "regression" else None
        config["id2label"], config["label2id"] = {"0": "LABEL_0"}, {"LABEL_0": 0}
        tensors["classifier.weight"] = tensors["classifier.weight"][:1].copy()
        tensors["classifier.bias"] = tensors["classifier.bias"][:1].copy()
    save_file(tensors, directory / "model.safetensors")
    (directory / "config.json").write_text(json.dumps(config))
    for name in ("vocab.txt", "tokenizer_config.json"):
        (directory / name).write_bytes((CHECKPOINT / name).read_bytes())
    return directory


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """variant → its run directory; "one_label" also exported to ONNX (fused and plain)
    and SavedModel."""
    root = tmp_path_factory.mktemp("classifiers")
    out = {}
    for variant in VARIANTS:
        out[variant] = root / variant
        import_hf_run(variant_checkpoint(root / "ckpt" / variant, variant), out[variant])
    export_run(out["one_label"], root / "export", formats=("onnx", "saved_model"))
    export_run(out["one_label"], root / "plain", formats=("onnx",), graphs="plain")
    out["exports"] = {"onnx": root / "export", "saved_model": root / "export"}
    out["plain"] = root / "plain"
    return out


def assert_like_the_pipeline(results, expected):
    """Our `classify` results against the pipeline's `top_k=None` lists (best first)."""
    assert len(results) == len(expected)
    for ours, theirs in zip(results, expected, strict=True):
        assert ours["label"] == theirs[0]["label"]
        assert ours["score"] == pytest.approx(theirs[0]["score"], abs=1e-5)
        scores = {entry["label"]: entry["score"] for entry in theirs}
        assert ours["probabilities"] == pytest.approx(scores, abs=1e-5)


@pytest.mark.parametrize("variant", VARIANTS)
def test_classify_scores_texts_and_pairs_as_the_transformers_pipeline(runs, variant):
    served = load_served_model(runs[variant], "keras")
    assert served.config.extra["problem_type"] == (
        None if variant == "one_label" else "regression" if variant == "regression"
        else f"{variant}_classification"
    )  # fmt: skip
    assert_like_the_pipeline(served.classify(REFERENCE["texts"]), REFERENCE[variant]["texts"])
    first, second = zip(*REFERENCE["pairs"], strict=True)
    pairs = served.classify(list(first), list(second))
    assert_like_the_pipeline(pairs, REFERENCE[variant]["pairs"])


@pytest.mark.parametrize("engine", ["onnx", "saved_model", "plain"])
def test_every_engine_scores_a_cross_encoder_with_a_sigmoid(runs, engine):
    directory = runs["plain"] if engine == "plain" else runs["exports"][engine]
    served = load_served_model(directory, "onnx" if engine == "plain" else engine)
    first, second = zip(*REFERENCE["pairs"], strict=True)
    pairs = served.classify(list(first), list(second))
    assert_like_the_pipeline(pairs, REFERENCE["one_label"]["pairs"])


def test_classify_pairs_on_the_command_line(runs, tmp_path, capsys):
    lines = tmp_path / "pairs.tsv"
    lines.write_text("".join(f"{a}\t{b}\n" for a, b in REFERENCE["pairs"]))
    argv = ["classify", "--model", str(runs["one_label"]), "--engine", "keras", "--pairs"]
    assert cli.main([*argv, "--input", str(lines), "--format", "jsonl"]) == 0
    results = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert_like_the_pipeline(results, REFERENCE["one_label"]["pairs"])


def test_wordpiece_pairs_are_the_ids_of_berts_tokenizer():
    """[CLS] a [SEP] b [SEP], segments 0 then 1, and transformers' longest_first
    truncation, at each recorded length."""
    tokenizer = WordPieceTokenizer.from_directory(CHECKPOINT)
    first, second = zip(*REFERENCE["pairs"], strict=True)
    for length, expected in REFERENCE["pair_ids"].items():
        rows = encoder_rows(tokenizer, list(first), list(second), int(length))
        assert [ids for ids, _ in rows] == [e["input_ids"] for e in expected], length
        assert [segments for _, segments in rows] == [e["token_type_ids"] for e in expected]


def test_hf_export_writes_the_problem_type_back(runs, tmp_path):
    for variant in ("multi_label", "regression"):
        export_run(runs[variant], tmp_path / variant, formats=("hf",))
        config = json.loads((tmp_path / variant / "config.json").read_text())
        assert config["problem_type"] == (
            "regression" if variant == "regression" else "multi_label_classification"
        )
        again = import_hf_run(tmp_path / variant, tmp_path / f"{variant}-run")
        assert again.extra["problem_type"] == config["problem_type"]


@pytest.mark.parametrize("architecture", ["BertForTokenClassification", "BertForMultipleChoice"])
def test_heads_of_other_tasks_are_refused_by_name(tmp_path, capsys, architecture):
    checkpoint = variant_checkpoint(tmp_path / "ckpt", "single_label")
    config = json.loads((checkpoint / "config.json").read_text())
    config["architectures"] = [architecture]
    (checkpoint / "config.json").write_text(json.dumps(config))
    assert cli.main(["import-hf", str(checkpoint), "--out", str(tmp_path / "run")]) == 2
    error = capsys.readouterr().err
    assert architecture in error and len(error.strip().splitlines()) == 1, error
    assert not (tmp_path / "run").exists()
