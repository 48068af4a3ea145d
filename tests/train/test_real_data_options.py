"""What a user with real data needs (issue 13): TSV headers and named columns, plain text
as one token stream cut into windows, `--set` model arguments checked against the
constructor, `--steps` with a validation every K steps, `--init` from an encoder run, and
`evaluate --test FILE` with both engines. End to end on the small slices of tests/data."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import keras
import numpy as np
import pytest

from tests.helpers import cli_error
from transformer_zoo.cli import main
from transformer_zoo.data import load_task
from transformer_zoo.data.user_files import DataError, read_classification_tsv
from transformer_zoo.run_directory import load_run_config

DATA = Path(__file__).resolve().parents[1] / "data"
SHAKESPEARE = DATA / "shakespeare" / "input_head.txt"
SST2 = DATA / "sst2_format"
SMALL = ["num_layers=1", "num_heads=2", "hidden_dim=32", "intermediate_dim=64"]


def _last_json(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def _error(capsys, argv) -> str:
    return cli_error(capsys, argv)


# Headers and columns


def test_columns_are_chosen_by_header_name_with_the_label_last():
    examples = read_classification_tsv(SST2 / "train.tsv", columns=["sentence", "label"])
    with open(SST2 / "train.tsv", encoding="utf-8") as file:
        rows = list(csv.DictReader(file, delimiter="\t"))
    assert [(e.label, e.text) for e in examples] == [
        (r["label"], r["sentence"].strip()) for r in rows
    ]
    assert all(e.text2 is None for e in examples)


def test_a_missing_column_names_the_file_and_the_header_line(tmp_path):
    with pytest.raises(DataError) as error:
        read_classification_tsv(SST2 / "train.tsv", columns=["text", "label"])
    assert str(error.value).startswith(f"{SST2 / 'train.tsv'}:1: no column named 'text'")
    assert "'sentence', 'label'" in str(error.value)
    short = tmp_path / "short.tsv"
    short.write_text("sentence\tlabel\ngood film\t1\nno label here\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"short.tsv:3: expected 2 tab-separated fields"):
        read_classification_tsv(short, columns=["sentence", "label"])


def test_translation_columns_in_any_order(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("id\ttarget\tsource\n1\tK AE T\tCAT\n2\tD AO G\tDOG\n", encoding="utf-8")
    task = load_task(str(path), "encoder-decoder", valid=str(path), test=str(path),
                     columns=["source", "target"])  # fmt: skip
    assert [(p.source, p.target) for p in task.train] == [("CAT", "K AE T"), ("DOG", "D AO G")]


# Token streams


def test_a_stream_keeps_the_text_whole_and_splits_it_as_nanogpt_does():
    task = load_task(str(SHAKESPEARE), "decoder-only", stream=True)
    text = SHAKESPEARE.read_text(encoding="utf-8").rstrip("\n")
    (train,), (valid,) = task.train, task.valid
    assert train.text + valid.text == text and len(train.text) == int(0.9 * len(text))
    assert task.test == task.valid  # no --test file: the validation text
    tokenizer, _ = task.fit_tokenizers(kind="char")
    assert tokenizer.decode(tokenizer.encode(valid.text)) == valid.text  # newlines kept
    assert len(tokenizer.encode(valid.text)) == len(valid.text)  # one piece per character


@pytest.mark.parametrize("windows", ["random", "epoch"])
def test_every_target_of_a_window_is_the_next_character_of_its_input(windows):
    from transformer_zoo.data.pipelines import stream_dataset
    from transformer_zoo.text.tokenizer import BOS_ID

    task = load_task(str(SHAKESPEARE), "decoder-only", stream=True)
    tokenizer, _ = task.fit_tokenizers(kind="char")
    ids = np.array(tokenizer.encode(task.train[0].text))
    length, batch = 16, 8
    data = stream_dataset(ids, batch, length, windows=windows, shuffle=True, seed=3)
    batches = list(data.as_numpy_iterator())
    assert sum(len(labels) for _, labels, _ in batches) == len(ids) // length  # one pass
    every = {tuple(ids[s : s + length]) for s in range(len(ids) - length + 1)}
    rows = []
    for inputs, labels, weights in batches:
        tokens = inputs["token_ids"]
        assert tokens.shape[1] == labels.shape[1] == length and (weights == 1).all()
        assert (tokens[:, 0] == BOS_ID).all()
        np.testing.assert_array_equal(tokens[:, 1:], labels[:, :-1])  # next token, shifted
        rows += [tuple(row) for row in labels]
    assert set(rows) <= every  # each row is a window of the stream itself
    aligned = sorted(tuple(ids[s : s + length]) for s in range(0, len(ids) - length + 1, length))
    if windows == "epoch":
        assert sorted(rows) == aligned  # each non-overlapping window once
    else:
        assert len(set(rows)) > len(rows) // 2 and sorted(rows) != aligned


def test_a_decoder_trains_on_windows_for_a_number_of_steps_and_reports_val_loss(tmp_path, capsys):
    out = tmp_path / "lm"
    code = main([
        "train", "--family", "decoder-only", "--data", str(SHAKESPEARE), "--tokenizer", "char",
        "--set", *SMALL, "max_length=32", "--batch-size", "8", "--steps", "25",
        "--eval-every", "10", "--steps-per-execution", "5", "--precision", "float32",
        "--out", str(out), "--verbose", "0",
    ])  # fmt: skip
    assert code == 0
    capsys.readouterr()
    training = json.loads((out / "metrics.json").read_text())["training"]
    assert training["steps"] == 25 and training["stopped_by"] == "steps"
    with open(out / "history.csv", encoding="utf-8") as file:
        history = list(csv.DictReader(file))
    assert len(history) == 3  # validations after steps 10, 20 and 25
    config = load_run_config(out)
    assert config.extra["train"]["overrides"] == {
        "num_layers": 1, "num_heads": 2, "hidden_dim": 32, "intermediate_dim": 64, "max_length": 32,
    }  # fmt: skip
    model = keras.saving.load_model(out / "model.keras")
    assert (model.num_layers, model.hidden_dim, model.max_length) == (1, 32, 32)
    # evaluate scores the same windows Keras validated on, with its own numpy code
    assert main(["evaluate", str(out)]) == 0
    printed = _last_json(capsys)
    assert printed["val_loss"] == pytest.approx(float(history[-1]["val_loss"]), rel=1e-4)
    assert printed["examples"] == len(SHAKESPEARE.read_text()) // 10 // 32  # windows
    assert printed["perplexity"] == pytest.approx(np.exp(printed["val_loss"]))


# --set


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("num_layer=2", "`num_layer` is not an argument of a decoder-only model; the arguments"),
        ("num_layers=2.5", "`num_layers` takes an integer (the preset has num_layers=2)"),
        ("dropout=high", "`dropout` must be in [0, 1). Received: dropout='high'"),
        ("vocabulary_size=100", "vocabulary_size is the tokenizer's vocabulary size"),
        ("num_layers", "--set takes KEY=VALUE pairs or a .json file"),
    ],
)
def test_set_refuses_unknown_and_ill_typed_arguments_in_one_line(tmp_path, capsys, item, message):
    argv = ["train", "--family", "decoder-only", "--data", str(SHAKESPEARE), "--set", item]
    line = _error(capsys, [*argv, "--out", str(tmp_path / "run")])
    assert message in line
    assert not (tmp_path / "run").exists()


def test_set_reads_a_json_file_of_arguments(tmp_path):
    from transformer_zoo.cli.train_arguments import parse_overrides

    path = tmp_path / "model.json"
    path.write_text(json.dumps({"num_layers": 4, "hidden_dim": 128}), encoding="utf-8")
    assert parse_overrides([str(path), "num_layers=6", "activation=gelu"]) == {
        "num_layers": 6, "hidden_dim": 128, "activation": "gelu",
    }  # fmt: skip


# --init and evaluate --test with both engines


def test_init_starts_the_classifier_from_the_encoder_it_names(wordpiece_artifacts, tmp_path):
    from transformer_zoo.train.family_setup import FamilySetup

    task = load_task(str(SST2 / "train.tsv"), "encoder-only", valid=str(SST2 / "test.tsv"),
                     test=str(SST2 / "test.tsv"), columns=["sentence", "label"])  # fmt: skip
    setup = FamilySetup.create(task, "tiny", init=str(wordpiece_artifacts.run_dir))
    assert setup.tokenizer.vocabulary == wordpiece_artifacts.tokenizer.vocabulary
    keras.config.set_dtype_policy("mixed_bfloat16")  # as `train` builds it
    try:
        classifier = setup.build_model()
    finally:
        keras.config.set_dtype_policy("float32")
    ids = np.array([[2, 5, 6, 7, 3, 0], [2, 8, 9, 3, 0, 0]], "int32")
    inputs = {"token_ids": ids, "padding_mask": (ids != 0).astype("int32")}
    for imported, copied in zip(
        wordpiece_artifacts.model.weights, classifier.backbone.weights, strict=True
    ):
        np.testing.assert_array_equal(imported.numpy(), copied.numpy())
    expected = wordpiece_artifacts.model(inputs)["sequence_output"]
    got = classifier.backbone(inputs)["sequence_output"]
    np.testing.assert_allclose(np.asarray(got, "float32"), expected, atol=0.05)  # bf16 compute
    assert classifier.num_classes == 2 and classifier.backbone.dtype_policy.name == "mixed_bfloat16"


def test_init_keeps_an_imported_encoders_max_length_and_dropout(tmp_path):
    """A sentence-transformers encoder (its tokenizer's model_max_length 32, 64 positions)
    fine-tuned at 64 with `--init`, and with dropout 0 instead of the checkpoint's."""
    from transformer_zoo.models.hf.run import import_hf_run
    from transformer_zoo.train.family_setup import FamilySetup

    checkpoint = DATA / "hf_st_mean"
    import_hf_run(checkpoint, tmp_path / "minilm")
    length = json.loads((tmp_path / "minilm" / "config.json").read_text())["max_length"]
    dropout = json.loads((checkpoint / "config.json").read_text())["hidden_dropout_prob"]
    rows = [f"{('neg', 'pos')[i % 2]}\t{' '.join(['the cat sat'] * 30)} {i}" for i in range(20)]
    (tmp_path / "long.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    setup = FamilySetup.create(
        load_task(str(tmp_path / "long.tsv"), "encoder-only"), "tiny",
        init=str(tmp_path / "minilm"),
    )  # fmt: skip
    classifier = setup.build_model()
    assert setup.max_length == length < classifier.backbone.max_length  # 32 of 64 positions
    assert classifier.backbone.dropout == classifier.dropout == dropout
    inputs, _ = next(iter(setup.dataset("train", classifier, batch_size=4)))
    assert inputs["token_ids"].shape == (4, length)  # 90 words, cut to the run's length


@pytest.mark.parametrize("given", [None, 0.2], ids=["checkpoints", "dropout-given"])
def test_init_from_a_classifier_gives_the_new_head_its_classifier_dropout(tmp_path, given):
    """Transformers' `BertForSequenceClassification` drops out before its head at the
    config's `classifier_dropout` (the hidden dropout where it is None), and a classifier
    checkpoint loaded for another task keeps that rate for its new head; `--init` gave the
    new head the encoder's dropout. `--dropout` sets both."""
    from transformer_zoo.models.hf.run import import_hf_run
    from transformer_zoo.train.family_setup import FamilySetup

    checkpoint = tmp_path / "hf"
    shutil.copytree(DATA / "hf_bert_classifier", checkpoint)
    hf_config = json.loads((checkpoint / "config.json").read_text())
    hf_config["classifier_dropout"] = 0.3  # the slice's is None: its hidden dropout, 0.1
    (checkpoint / "config.json").write_text(json.dumps(hf_config), encoding="utf-8")
    import_hf_run(checkpoint, tmp_path / "classifier")
    setup = FamilySetup.create(
        load_task(str(SST2 / "train.tsv"), "encoder-only", columns=["sentence", "label"]),
        "tiny",
        init=str(tmp_path / "classifier"),
    )
    classifier = setup.build_model(given)
    assert classifier.num_classes == 2  # a fresh head, for the new labels
    if given is None:
        assert classifier.backbone.dropout == hf_config["hidden_dropout_prob"] == 0.1
        assert classifier.dropout == hf_config["classifier_dropout"]
    else:
        assert classifier.backbone.dropout == classifier.dropout == given


def test_init_trains_and_evaluate_scores_a_file_with_keras_and_onnx(
    wordpiece_artifacts, tmp_path, capsys
):
    out, export = tmp_path / "sst", tmp_path / "sst-onnx"
    files = ["--data", str(SST2 / "train.tsv"), "--valid", str(SST2 / "test.tsv")]
    code = main([
        "train", "--family", "encoder-only", *files, "--columns", "sentence,label",
        "--init", str(wordpiece_artifacts.run_dir), "--steps", "4", "--batch-size", "4",
        "--steps-per-execution", "2", "--precision", "float32", "--out", str(out),
        "--verbose", "0",
    ])  # fmt: skip
    assert code == 0
    assert (out / "vocab.txt").read_text() == (
        wordpiece_artifacts.run_dir / "vocab.txt"
    ).read_text()
    assert load_run_config(out).tokenizer == "vocab.txt"
    assert main(["export", str(out), "--format", "onnx", "--out", str(export)]) == 0
    capsys.readouterr()
    scores = {}
    for engine in ("keras", "onnx"):
        extra = ["--engine", engine] + (["--model", str(export)] if engine == "onnx" else [])
        assert main(["evaluate", str(out), "--test", str(SST2 / "train.tsv"), *extra]) == 0
        scores[engine] = _last_json(capsys)
    assert scores["keras"]["examples"] == scores["onnx"]["examples"] == 12  # the file's lines
    assert scores["onnx"]["accuracy"] == pytest.approx(scores["keras"]["accuracy"], abs=1e-3)
    assert set(scores["onnx"]) >= {"examples", "accuracy", "engine", "model", "file"}


def test_init_refuses_a_run_of_another_family_and_a_new_tokenizer(
    family_artifacts, tmp_path, capsys
):
    argv = ["train", "--family", "encoder-only", "--data", str(SST2 / "train.tsv"),
            "--columns", "sentence,label", "--out", str(tmp_path / "r")]  # fmt: skip
    decoder = family_artifacts("decoder-only").run_dir  # built first: its export logs
    capsys.readouterr()
    line = _error(capsys, [*argv, "--init", str(decoder)])
    assert "holds a decoder-only model; a classifier starts from an encoder-only run" in line
    line = _error(capsys, [*argv, "--init", str(tmp_path), "--tokenizer", "char"])
    assert "keeps that run's tokenizer" in line


def test_evaluate_with_an_export_needs_its_directory(tmp_path, capsys):
    line = _error(capsys, ["evaluate", str(tmp_path), "--engine", "onnx"])
    assert "--engine onnx scores an export: give its directory with --model" in line


def test_init_warns_when_the_training_text_is_unknown_to_its_tokenizer(
    wordpiece_artifacts, tmp_path, caplog
):
    """Fine-tuning text in a script the initial model's tokenizer lacks became `<unk>`
    throughout, silently."""
    from transformer_zoo.train.data_warnings import warn_unknown
    from transformer_zoo.train.family_setup import FamilySetup

    texts = {
        "known.tsv": ["the cat sat on the mat .", "a quick fox , the dogs ."],
        "unknown.tsv": ["这是一个普通的句子", "the cat 坐在垫子上"],
    }
    warned = {}
    for name, lines in texts.items():
        rows = [f"{('neg', 'pos')[i % 2]}\t{lines[i % 2]} {'.' * i}" for i in range(20)]
        (tmp_path / name).write_text("\n".join(rows) + "\n", encoding="utf-8")
        setup = FamilySetup.create(
            load_task(str(tmp_path / name), "encoder-only"), "tiny",
            init=str(wordpiece_artifacts.run_dir),
        )  # fmt: skip
        caplog.clear()
        with caplog.at_level("WARNING", logger="transformer_zoo.train.data_warnings"):
            warn_unknown(setup, "runs/minilm")
        warned[name] = caplog.text
    assert warned["known.tsv"] == ""
    assert "are unknown to the tokenizer of --init runs/minilm" in warned["unknown.tsv"]


def test_pretrain_data_is_read_by_masked_lm_and_by_the_tokenizer(tmp_path, capsys):
    """Masked-LM pretraining on an unlabelled corpus of one's own, then the classifier."""
    from transformer_zoo.text import load_tokenizers

    rows = [f"{('neg', 'pos')[i % 2]}\tthe film number {i}" for i in range(40)]
    (tmp_path / "train.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    corpus = [f"zebra quasar {i}" for i in range(60)]
    (tmp_path / "corpus.txt").write_text("\n\n".join(corpus) + "\n", encoding="utf-8")
    out = tmp_path / "run"
    small = ["num_layers=1", "num_heads=2", "hidden_dim=16", "intermediate_dim=32"]
    code = main([
        "train", "--family", "encoder-only", "--data", str(tmp_path / "train.tsv"),
        "--pretrain-data", str(tmp_path / "corpus.txt"), "--pretrain-steps", "4",
        "--steps", "2", "--steps-per-execution", "2", "--set", *small, "--batch-size", "8",
        "--precision", "float32", "--out", str(out), "--verbose", "0", "--no-evaluate",
    ])  # fmt: skip
    assert code == 0
    # 8,000 pieces asked (the default); the two files hold far fewer, which is said.
    assert "The tokenizer has " in capsys.readouterr().out
    pretraining = json.loads((out / "metrics.json").read_text())["training"]["pretraining"]
    assert pretraining["steps"] == 4
    tokenizer = load_tokenizers(out)[0]
    unknown = tokenizer.special_ids["unk"]
    # 'q' and 'z' occur only in the corpus: a tokenizer of the labelled file alone lacks them.
    assert unknown not in tokenizer.encode("zebra quasar")
    assert load_run_config(out).extra["train"]["pretrain_data"] == str(tmp_path / "corpus.txt")


def test_jit_compiles_the_masked_lm_pretraining_too(tmp_path, monkeypatch):
    """`--jit` reached the classifier's fit, not the masked-LM pretraining's (Keras'
    "auto" applied there)."""
    rows = [f"{('neg', 'pos')[i % 2]}\tthe film number {i}" for i in range(40)]
    (tmp_path / "train.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    small = ["num_layers=1", "num_heads=2", "hidden_dim=16", "intermediate_dim=32"]
    fits = []

    def fit(model, *args, **kwargs):  # the first fit, pretraining's, is all it needs
        fits.append((type(model).__name__, model.jit_compile))
        raise KeyboardInterrupt

    monkeypatch.setattr(keras.Model, "fit", fit)
    code = main([
        "train", "--family", "encoder-only", "--data", str(tmp_path / "train.tsv"), "--jit",
        "--pretrain-steps", "4", "--steps", "2", "--set", *small, "--batch-size", "8",
        "--precision", "float32", "--out", str(tmp_path / "run"), "--verbose", "0",
    ])  # fmt: skip
    assert code == 130 and fits == [("EncoderOnlyMaskedLM", True)]


@pytest.mark.slow  # 14 s: two runs with pretraining
def test_a_run_resumed_after_pretraining_keeps_its_pretraining_in_the_metrics(
    tmp_path, capsys, monkeypatch
):
    """The backup holds the pretrained weights, so a resumed run does not pretrain again;
    its metrics said `pretraining: null`."""
    import keras

    import transformer_zoo.train.trainer as trainer

    rows = [f"{('neg', 'pos')[i % 2]}\tthe film number {i}" for i in range(40)]
    (tmp_path / "train.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    small = ["num_layers=1", "num_heads=2", "hidden_dim=16", "intermediate_dim=32"]
    argv = [
        "train", "--family", "encoder-only", "--data", str(tmp_path / "train.tsv"),
        "--pretrain-steps", "4", "--steps", "4", "--eval-every", "2", "--set", *small,
        "--steps-per-execution", "1", "--batch-size", "8", "--precision", "float32",
        "--out", str(tmp_path / "run"), "--verbose", "0", "--no-evaluate",
    ]  # fmt: skip
    made = trainer.run_callbacks

    class Interrupt(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            raise KeyboardInterrupt  # after the first epoch's backup

    monkeypatch.setattr(trainer, "run_callbacks", lambda *a, **k: [*made(*a, **k), Interrupt()])
    assert main(argv) == 130
    monkeypatch.setattr(trainer, "run_callbacks", made)
    assert main(argv) == 0
    assert "Resuming" in capsys.readouterr().out
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())["training"]
    assert metrics["resumed_from_epoch"] == 1 and metrics["pretraining"]["steps"] == 4
