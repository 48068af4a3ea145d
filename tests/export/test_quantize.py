"""`quantize_onnx` and `transformer-zoo export --quantize int8 int4`: an int8 or int4 copy
that serves, is scored on the task next to float32 (references from the Keras engine, so the float32
export must score exactly 1), and is refused, leaving nothing behind, past the limit."""

import json
import logging
import os
import types

import numpy as np
import onnx
import pytest

from tests.artifacts import SENTENCES
from transformer_zoo.cli import main
from transformer_zoo.data import Task
from transformer_zoo.data.examples import (
    ClassificationExample,
    PromptCompletion,
    TextStream,
    TranslationPair,
)
from transformer_zoo.evaluation.evaluate import evaluate
from transformer_zoo.evaluation.passes import predict
from transformer_zoo.export import QuantizationError, quantize_onnx
from transformer_zoo.export.quantize import FLOAT32_SCORES, compare_on_task
from transformer_zoo.run_directory import load_run_config
from transformer_zoo.serving import ModelDirectoryError, load_onnx, load_served_model

INPUTS = sorted({s for s in SENTENCES if len(s) < 25})  # they fit the tiny contexts


def keras_task(art, family: str) -> Task:
    """A task whose test references are what the Keras engine predicts (the evaluation's
    own `predict`, so with its length limits)."""
    keras_model = load_served_model(art.run_dir, "keras")
    if family == "encoder-decoder":
        examples = [TranslationPair(s, "") for s in INPUTS]
        return Task(
            "keras",
            family,
            [],
            [],
            [
                TranslationPair(s, t)
                for s, t in zip(INPUTS, predict(keras_model, examples), strict=True)
            ],
        )
    if family == "decoder-only":
        examples = [PromptCompletion(p, "") for p in INPUTS]
        return Task(
            "keras",
            family,
            [],
            [],
            [
                PromptCompletion(p, c)
                for p, c in zip(INPUTS, predict(keras_model, examples), strict=True)
            ],
        )
    examples = [ClassificationExample("", text) for text in INPUTS]
    labels = predict(keras_model, examples)
    return Task(
        "keras",
        family,
        [],
        [],
        [ClassificationExample(label, text) for label, text in zip(labels, INPUTS, strict=True)],
    )


@pytest.mark.parametrize(
    "family, weights",
    [
        ("encoder-decoder", "int8"),
        pytest.param("encoder-decoder", "int4", marks=pytest.mark.slow),
        ("decoder-only", "int8"),
        ("decoder-only", "int4"),
        ("encoder-only", "int8"),
        ("encoder-only", "int4"),
    ],
)
def test_quantized_copy_serves_and_is_scored_next_to_float32(
    family_artifacts, tmp_path, family, weights
):
    art = family_artifacts(family)
    task = keras_task(art, family)
    out = tmp_path / weights
    report = quantize_onnx(art.export_dir, out, task=task, max_accuracy_drop=1.0, weights=weights)

    assert report["float32"] == 1.0  # the float32 ONNX export predicts what Keras does
    assert 0.0 <= report[weights] <= 1.0
    assert report["drop"] == pytest.approx(1.0 - report[weights])
    assert report["examples"] == len(INPUTS)
    assert report["metric"] == ("accuracy" if family == "encoder-only" else "exact_match")
    for name, sizes in report["files"].items():
        assert name.endswith(".onnx") and os.path.isfile(out / name)
        assert sizes[f"{weights}_bytes"] < sizes["float32_bytes"]
    assert json.loads((out / "quantization.json").read_text()) == report
    nodes = {n.op_type for name in report["files"] for n in onnx.load(out / name).graph.node}
    assert ("MatMulNBits" in nodes) == (weights == "int4")
    assert "FusedMatMul" not in nodes  # a tied head is untied first, then quantized

    config = load_run_config(out)
    assert config.export["onnx"]["quantization"] == weights
    assert "saved_model" not in config.export  # the SavedModel is float32 and stays behind
    served = load_onnx(out)
    if family == "encoder-decoder":
        assert all(isinstance(t, str) for t in served.translate(INPUTS[:2]))
    elif family == "decoder-only":
        assert all(isinstance(t, str) for t in served.generate(INPUTS[:2], 4))
    else:
        assert served.classify(INPUTS[:2])[0]["label"] in art.config.label_names


def test_a_plain_text_task_is_scored_window_by_window(family_artifacts, tmp_path, caplog):
    """A plain-text task's test split is one text: scored over its windows, and the log
    says so rather than counting one example."""
    art = family_artifacts("decoder-only")
    text = " ".join(INPUTS * 4)
    task = Task("text", "decoder-only", [TextStream(text)], [], [TextStream(text)])
    with caplog.at_level(logging.INFO, logger="transformer_zoo.export.quantize"):
        report = quantize_onnx(art.export_dir, tmp_path / "q", task=task, max_accuracy_drop=1.0)
    assert report["metric"] == "token_accuracy" and report["float32"] > 0
    windows = evaluate(load_onnx(art.export_dir), task)["examples"]
    assert report["examples"] == windows > 1
    scoring = [r.getMessage() for r in caplog.records if "scoring" in r.getMessage()]
    assert scoring == [
        f"int8: scoring the {m} model on at most 1000 windows of the test text"
        for m in ("float32", "int8")
    ]
    # A second weight type takes the float32 scores of the first (`export --quantize int8
    # int4` scores the float32 model once).
    caplog.clear()
    known = {key: report[key] for key in FLOAT32_SCORES}
    with caplog.at_level(logging.INFO, logger="transformer_zoo.export.quantize"):
        int4 = quantize_onnx(
            art.export_dir, tmp_path / "q4", task=task, max_accuracy_drop=1.0, weights="int4",
            float32_scores=known,
        )  # fmt: skip
    scoring = [r.getMessage() for r in caplog.records if "scoring" in r.getMessage()]
    assert scoring == ["int4: scoring the int4 model on at most 1000 windows of the test text"]
    assert int4["float32"] == report["float32"] and int4["examples"] == windows


def test_quantize_examples_limits_the_windows_of_a_text(family_artifacts, caplog):
    """`--quantize-examples N` cut the one-text list before it was windowed, so a plain-text
    task was scored on all its windows whatever N was."""
    art = family_artifacts("decoder-only")
    text = " ".join(INPUTS * 4)
    task = Task("text", "decoder-only", [TextStream(text)], [], [TextStream(text)])
    served = load_onnx(art.export_dir)
    assert evaluate(served, task)["examples"] > 2
    two = evaluate(served, task, limit=2)
    assert two["examples"] == 2 and two["tokens"] == 2 * served.max_length
    with caplog.at_level(logging.INFO, logger="transformer_zoo.export.quantize"):
        report = compare_on_task(art.export_dir, art.export_dir, task, 2)
    assert report["examples"] == 2 and report["drop"] == 0
    assert caplog.records[-1].getMessage().endswith("on 2 windows")


@pytest.mark.parametrize("weights, within", [("int8", 0.1), ("int4", 0.25)])
def test_quantized_weights_stay_close_to_float32(family_artifacts, tmp_path, weights, within):
    art = family_artifacts("encoder-only")
    quantize_onnx(art.export_dir, tmp_path / "q", max_accuracy_drop=None, weights=weights)
    ids = np.array([[5, 9, 12, 7, 3, 0]])
    feeds = {"input_ids": ids, "attention_mask": (ids != 0).astype(np.int64)}
    feeds["token_type_ids"] = np.zeros_like(ids)
    outputs = [
        load_onnx(d).runner.run("model", feeds)["last_hidden_state"]
        for d in (art.export_dir, tmp_path / "q")
    ]
    difference = np.abs(outputs[0] - outputs[1]).max()
    assert 0 < difference < within * np.abs(outputs[0]).max()  # changed, but not much


def test_a_drop_past_the_limit_writes_nothing(family_artifacts, tmp_path, monkeypatch):
    art = family_artifacts("encoder-decoder")
    scores = {"examples": 3, "metric": "exact_match", "float32": 0.9, "int8": 0.8, "drop": 0.1}
    monkeypatch.setattr(
        "transformer_zoo.export.quantize.compare_on_task", lambda *args: dict(scores)
    )
    task = types.SimpleNamespace(test=[])
    with pytest.raises(QuantizationError, match=r"drop of 0\.1000 > max_accuracy_drop=0\.05"):
        quantize_onnx(art.export_dir, tmp_path / "q", task=task, max_accuracy_drop=0.05)
    assert os.listdir(tmp_path) == []  # neither the directory nor a staging folder


@pytest.mark.parametrize("drop", [0.0, 0.05])
def test_a_drop_equal_to_the_limit_is_accepted(family_artifacts, tmp_path, monkeypatch, drop):
    """`max_accuracy_drop` is "the largest accepted fall": a score that falls by exactly
    that much (no fall at all with `max_accuracy_drop=0`) writes the copy, and its report."""
    art = family_artifacts("encoder-decoder")
    scores = {"examples": 3, "metric": "exact_match", "float32": 0.9, "int8": 0.9 - drop}
    scores["drop"] = drop  # 0.9 - 0.85 is not exactly 0.05 in floats
    monkeypatch.setattr(
        "transformer_zoo.export.quantize.compare_on_task", lambda *args: dict(scores)
    )
    task = types.SimpleNamespace(test=[])
    report = quantize_onnx(art.export_dir, tmp_path / "q", task=task, max_accuracy_drop=drop)
    assert report["drop"] == report["max_accuracy_drop"] == drop
    with open(tmp_path / "q" / "quantization.json") as file:
        assert json.load(file)["drop"] == drop
    assert load_run_config(tmp_path / "q").export["onnx"]["quantization"] == "int8"


def test_bad_requests_are_refused(family_artifacts, wordpiece_artifacts, tmp_path):
    art = family_artifacts("encoder-only")
    with pytest.raises(ModelDirectoryError, match="names no task.*--max-accuracy-drop none"):
        quantize_onnx(wordpiece_artifacts.export_dir, tmp_path / "a")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(ModelDirectoryError, match="new or empty"):
        quantize_onnx(art.export_dir, tmp_path / "full", max_accuracy_drop=None)
    with pytest.raises(ValueError, match="max_accuracy_drop"):
        quantize_onnx(art.export_dir, tmp_path / "b", max_accuracy_drop=1.5)
    with pytest.raises(ValueError, match="`weights` must be one of"):
        quantize_onnx(art.export_dir, tmp_path / "b", max_accuracy_drop=None, weights="int2")
    quantize_onnx(art.export_dir, tmp_path / "c", max_accuracy_drop=None)
    with pytest.raises(ModelDirectoryError, match="already quantized"):
        quantize_onnx(tmp_path / "c", tmp_path / "d", max_accuracy_drop=None)


def test_export_command_writes_the_quantized_copies(family_artifacts, tmp_path, capsys):
    art = family_artifacts("decoder-only")
    argv = ["export", art.run_dir, "--format", "onnx", "--out", tmp_path / "e"]
    quantize = ["--quantize", "int8", "int4", "--max-accuracy-drop", "none"]
    code = main([str(a) for a in argv] + quantize)
    out, _ = capsys.readouterr()
    assert code == 0
    report = json.loads(out)
    assert set(report) == {"onnx", "int8", "int4"} and "float32" not in report["int8"]
    for weights in ("int8", "int4"):
        code = main(["generate", "the cat", "--model", str(tmp_path / "e" / weights)])
        assert code == 0 and capsys.readouterr().out.strip() != ""

    code = main([str(a) for a in argv] + ["--quantize", "int8"])  # the run names no task
    assert code == 2 and "names no task" in capsys.readouterr().err
    for bad in (["--max-accuracy-drop", "2"], ["--quantize-examples", "0"]):
        with pytest.raises(SystemExit):  # argparse: exit code 2 before anything is exported
            main([str(a) for a in argv] + ["--quantize", "int8", *bad])


@pytest.mark.parametrize("per_channel", [True, False])
def test_per_channel_gives_each_output_column_its_own_weight_scale(
    family_artifacts, tmp_path, per_channel
):
    """int8 `per_channel` is onnxruntime's `quantize_dynamic(per_channel=True)`: each
    quantized (K, N) MatMul weight has N scales and zero points, one per output column;
    without it, one of each for the whole matrix."""
    art = family_artifacts("encoder-only")
    out = tmp_path / "q"
    quantize_onnx(
        art.export_dir, out, max_accuracy_drop=None, weights="int8", per_channel=per_channel
    )
    graph = onnx.load(out / "model.onnx").graph
    shapes = {t.name: tuple(t.dims) for t in graph.initializer}
    matmuls = [n for n in graph.node if n.op_type == "MatMulInteger"]
    assert matmuls
    for node in matmuls:
        weight, weight_zero_point = node.input[1], node.input[3]
        _, columns = shapes[weight]
        expected = (columns,) if per_channel else ()
        scale = weight.removesuffix("_quantized") + "_scale"
        assert (shapes[scale], shapes[weight_zero_point]) == (expected, expected), node.name
