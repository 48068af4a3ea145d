import json
import os

import pytest

from transformer_zoo.cli import main
from transformer_zoo.run_directory import RunConfig, save_run_config


@pytest.fixture(scope="module")
def run_dir(trained_runs):
    return trained_runs["encoder-decoder"].run_dir


@pytest.mark.slow  # 12 s; test_attention_command_works_in_a_fresh_process covers the command
def test_attention_command_draws_both_pictures(run_dir, tmp_path, capsys):
    code = main(["attention", run_dir, "--text", "March 5, 2021", "--out", str(tmp_path)])
    assert code == 0
    printed = capsys.readouterr().out
    for name in ("attention.png", "causal_mask.png"):
        path = tmp_path / name
        assert path.stat().st_size > 5000 and str(path) in printed


@pytest.mark.parametrize(
    "args, message",
    [
        (["--text", "   "], "empty"),
        (["--text", "x"], "lacks"),  # a directory that is not a run
    ],
)
def test_attention_command_errors_are_one_line(run_dir, tmp_path, capsys, args, message):
    target = run_dir if message == "empty" else str(tmp_path)
    if message == "lacks":
        os.makedirs(tmp_path, exist_ok=True)
    code = main(["attention", target, *args])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "error" in err


def test_attention_out_under_a_file_is_one_line_before_the_model_loads(
    run_dir, tmp_path, capsys, monkeypatch
):
    import transformer_zoo.models.saving as saving

    def no_load(*args, **kwargs):
        raise AssertionError("the model loaded before --out was checked")

    monkeypatch.setattr(saving, "load_run_model", no_load)
    (tmp_path / "a-file").write_text("mine")
    out = tmp_path / "a-file" / "pictures"
    code = main(["attention", run_dir, "--text", "March 5, 2021", "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith("transformer-zoo attention: error:") and "a-file" in err


def test_demo_into_a_file_or_another_run_is_one_line(tmp_path, capsys):
    from transformer_zoo.demo import demo_config

    a_file = tmp_path / "a-file"
    a_file.write_text("mine")
    other = tmp_path / "other-demo"  # the demo's run with --seed 0, done or not
    identity = demo_config(str(other), seed=0).identity()
    save_run_config(
        other, RunConfig("encoder-decoder", "tiny", "translation", extra={"train": identity})
    )
    for out, flags in ((a_file, []), (other, ["--seed", "1"])):
        code = main(["demo", "--out", str(out), *flags])
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1, err
        assert err.startswith("transformer-zoo demo: error:") and str(out) in err
    assert a_file.read_text() == "mine" and os.listdir(other) == ["config.json"]


def test_demo_prints_exact_match_bleu_and_chrf_per_category(run_dir):
    from transformer_zoo.demo import _score_lines

    with open(os.path.join(run_dir, "metrics.json"), encoding="utf-8") as file:
        test = json.load(file)["test"]
    lines = _score_lines(test)
    categories = [line.split()[0] for line in lines]
    assert categories[0] == "all" and sorted(categories) == sorted(test["chrf"])
    for line in lines:
        category = line.split()[0]
        assert f"BLEU {test['bleu'][category]:5.1f}" in line
        assert f"chrF {test['chrf'][category]:5.1f}" in line


@pytest.mark.slow
def test_demo_runs_end_to_end_and_onnx_agrees_with_keras(tmp_path):
    from transformer_zoo.demo import prepare_demo, run_demo

    summary = run_demo(prepare_demo(str(tmp_path / "demo"), time_budget=30))
    assert summary["onnx_keras_agree"].split("/")[0] == summary["onnx_keras_agree"].split("/")[1]
    assert all(os.path.getsize(p) > 5000 for p in summary["pictures"])
