"""`transformer-zoo train` stopped by Ctrl-C or SIGTERM at any stage: one line that says
what rerunning the command does, exit code 130 (SIGTERM ended the run silently; Ctrl-C
while the data was read said nothing of a rerun)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

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
    import transformer_zoo.train.prepared as prepared

    def interrupted(config):
        raise KeyboardInterrupt

    monkeypatch.setattr(prepared, "prepare", interrupted)
    assert main(_train_argv(tmp_path)) == 130
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line == (
        "transformer-zoo train: interrupted; rerun the same command to start again "
        "(nothing was backed up yet)"
    )


# A child started with SIGINT ignored, as bash starts a script's `&` job; it says when it
# has started (its TensorFlow import is stubbed to wait, which keeps it fast) and
# whether SIGINT is still ignored.
BACKGROUND_JOB = textwrap.dedent(
    """
    import signal, sys, time
    import transformer_zoo.cli as cli

    def waiting():
        print("started", signal.getsignal(signal.SIGINT) == signal.SIG_IGN, flush=True)
        time.sleep(60)

    cli._import_tensorflow_quietly = waiting
    sys.exit(cli.main(sys.argv[1:]))
    """
)


def test_sigterm_stops_a_run_started_with_ctrl_c_ignored(tmp_path):
    """bash starts a script's `&` job with SIGINT ignored; SIGTERM then ended the run
    silently (exit 143), as the handler was only set where SIGINT was not ignored."""
    child = subprocess.Popen(
        [sys.executable, "-c", BACKGROUND_JOB, *_train_argv(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        assert child.stdout.readline().split() == ["started", "True"]  # SIGINT stays ignored
        child.send_signal(signal.SIGTERM)
        err = child.communicate(timeout=30)[1]
    finally:
        child.kill()
    assert child.returncode == 130, err[-2000:]
    assert err.strip().splitlines() == ["transformer-zoo train: interrupted"]
