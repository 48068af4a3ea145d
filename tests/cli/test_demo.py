import os

import pytest

from transformer_zoo.cli import main


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


@pytest.mark.slow
def test_demo_runs_end_to_end_and_onnx_agrees_with_keras(tmp_path):
    from transformer_zoo.demo import run_demo

    summary = run_demo(str(tmp_path / "demo"), time_budget=30)
    assert summary["onnx_keras_agree"].split("/")[0] == summary["onnx_keras_agree"].split("/")[1]
    assert all(os.path.getsize(p) > 5000 for p in summary["pictures"])
