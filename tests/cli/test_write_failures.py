"""A full disk or a directory that cannot be written to: one line, before the long work
where it can be known then, and every file written before it whole. (h5py, with the disk
full under it, printed hundreds of lines of tracebacks and then crashed the process.)"""

from __future__ import annotations

import collections
import errno
import os

import keras
import numpy as np
import pytest

from tests.helpers import cli_error
from transformer_zoo import files
from transformer_zoo.cli import main
from transformer_zoo.train.callbacks.backup import Backup

SMALL = ["num_layers=1", "num_heads=2", "hidden_dim=16", "intermediate_dim=32", "max_length=16"]
Usage = collections.namedtuple("Usage", "total used free")


def _train_argv(tmp_path, out):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat. " * 40, "utf-8")
    return [
        "train", "--family", "decoder-only", "--data", str(corpus), "--tokenizer", "char",
        "--set", *SMALL, "--steps", "4", "--batch-size", "4", "--precision", "float32",
        "--out", str(out), "--verbose", "0", "--no-evaluate",
    ]  # fmt: skip


def test_a_backup_that_cannot_fit_is_one_oserror_and_nothing_half_written(tmp_path, monkeypatch):
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1000)])
    model.compile("adam", "mse")
    x, y = np.zeros((8, 4), "float32"), np.zeros((8, 1000), "float32")
    monkeypatch.setattr(files.shutil, "disk_usage", lambda path: Usage(10**9, 10**9, 10_000))
    with pytest.raises(OSError, match="No space left on device for the crash backup") as error:
        model.fit(x, y, epochs=1, verbose=0, callbacks=[Backup(tmp_path / "backup")])
    assert error.value.errno == errno.ENOSPC
    assert os.listdir(tmp_path / "backup") == []


def test_train_on_a_full_disk_ends_in_one_line_that_says_what_a_rerun_does(
    tmp_path, capsys, monkeypatch
):
    real = files.shutil.disk_usage
    full = {"now": False}

    def usage(path):
        return Usage(10**9, 10**9, 10_000) if full["now"] else real(path)

    monkeypatch.setattr(files.shutil, "disk_usage", usage)

    class FillsUp(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            full["now"] = True

    import transformer_zoo.train.trainer as trainer

    made = trainer.run_callbacks

    def with_filling(*args, **kwargs):
        return [FillsUp(), *made(*args, **kwargs)]

    monkeypatch.setattr(trainer, "run_callbacks", with_filling)
    code = main(_train_argv(tmp_path, tmp_path / "run"))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1, err
    assert err[0].startswith(f"transformer-zoo train: error: cannot write to {tmp_path / 'run'}")
    assert "No space left on device for" in err[0] and "rerun the same command to" in err[0]


def test_an_out_that_cannot_be_written_is_refused_before_the_data_is_read(
    tmp_path, capsys, monkeypatch
):
    locked = tmp_path / "locked"
    locked.mkdir()
    real = os.access
    monkeypatch.setattr(
        files.os, "access", lambda p, mode: False if str(p) == str(locked) else real(p, mode)
    )
    line = cli_error(capsys, _train_argv(tmp_path, locked / "run"))
    assert line.startswith(f"transformer-zoo train: error: --out {locked / 'run'}: ")
    assert "cannot be written to" in line
    assert not (locked / "run").exists()


def test_export_that_cannot_write_is_one_line(family_artifacts, tmp_path, capsys, monkeypatch):
    from transformer_zoo.export import run_export

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(run_export, "export_run", full)
    run_dir = family_artifacts("encoder-only").run_dir
    capsys.readouterr()
    assert main(["export", str(run_dir), "--out", str(tmp_path / "e")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"transformer-zoo export: error: cannot write to {tmp_path / 'e'}: No space left on device"
    ]


def test_evaluate_that_would_write_metrics_to_a_read_only_run_is_refused_first(
    family_artifacts, capsys, monkeypatch
):
    run_dir = str(family_artifacts("encoder-only").run_dir)
    real = os.access
    monkeypatch.setattr(
        files.os, "access", lambda p, mode: False if str(p) == run_dir else real(p, mode)
    )
    evaluated = []
    import transformer_zoo.evaluation.evaluate as module

    monkeypatch.setattr(module, "evaluate_directory", lambda *a, **k: evaluated.append(a))
    line = cli_error(capsys, ["evaluate", run_dir])
    assert "cannot be written to" in line and "metrics.json" in line
    assert evaluated == []


def test_attention_into_a_read_only_run_is_refused_before_the_model_loads(
    family_artifacts, capsys, monkeypatch
):
    """It loaded the model, then failed with "[Errno 30] Read-only file system:
    '…/.partial-…'"."""
    run_dir = str(family_artifacts("encoder-decoder").run_dir)
    real = os.access
    monkeypatch.setattr(
        files.os, "access", lambda p, mode: False if str(p) == run_dir else real(p, mode)
    )
    import transformer_zoo.models.saving as saving

    monkeypatch.setattr(saving, "load_run_model", lambda *a, **k: pytest.fail("loaded"))
    line = cli_error(capsys, ["attention", run_dir, "--text", "a source"])
    assert line.endswith(
        f"error: {run_dir} cannot be written to (read-only or not yours): name a directory "
        "for the pictures with --out DIR."
    )
