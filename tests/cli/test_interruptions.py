"""`transformer-zoo train` stopped by Ctrl-C or SIGTERM at any stage: one line that says
what rerunning the command does, exit code 130 (SIGTERM ended the run silently; Ctrl-C
while the data was read said nothing of a rerun)."""

from __future__ import annotations

import os
import signal

import keras

from transformer_zoo.cli import main

SMALL = ["num_layers=1", "num_heads=2", "hidden_dim=16", "intermediate_dim=32", "max_length=16"]


def _train_argv(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat. " * 40, "utf-8")
    return [
        "train", "--family", "decoder-only", "--data", str(corpus), "--tokenizer", "char",
        "--set", *SMALL, "--steps", "40", "--eval-every", "10", "--batch-size", "4",
        "--precision", "float32", "--out", str(tmp_path / "run"), "--verbose", "0",
        "--no-evaluate", "--steps-per-execution", "1",
    ]  # fmt: skip


def test_sigterm_stops_a_run_as_ctrl_c_does(tmp_path, capsys, monkeypatch):
    import transformer_zoo.train.trainer as trainer

    made = trainer.run_callbacks

    class Terminated(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch == 1:  # after the first epoch's backup
                os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(trainer, "run_callbacks", lambda *a, **k: [*made(*a, **k), Terminated()])
    before = signal.getsignal(signal.SIGTERM)
    code = main(_train_argv(tmp_path))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 130
    assert err[-1].startswith("transformer-zoo train: interrupted; rerun the same command to ")
    assert "resume from epoch" in err[-1]
    assert signal.getsignal(signal.SIGTERM) == before  # the command's handler is gone


def test_ctrl_c_while_the_data_is_read_says_what_a_rerun_does(tmp_path, capsys, monkeypatch):
    import transformer_zoo.train.trainer as trainer

    def interrupted(config):
        raise KeyboardInterrupt

    monkeypatch.setattr(trainer, "prepare", interrupted)
    assert main(_train_argv(tmp_path)) == 130
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line == (
        "transformer-zoo train: interrupted; rerun the same command to start again "
        "(nothing was backed up yet)"
    )
