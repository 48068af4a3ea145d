"""Run and export directories that leave the machine they were made on: a run records its
data files by absolute paths and their SHA-256, so a run copied elsewhere, or whose data
moved, is pointed at its data's new place (`--data`, `--valid`; `--test FILE` scores a
file) and checked against those digests; an export carries no path of the machine that
trained, and is still known as its run's."""

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.helpers import cli_error
from transformer_zoo import run_directory as rd
from transformer_zoo.cli import main
from transformer_zoo.data.run_task import check_data_files
from transformer_zoo.errors import RunError
from transformer_zoo.run_state import inspect_run_directory, run_differences, run_identity

SMALL = ["num_layers=1", "num_heads=2", "hidden_dim=16", "intermediate_dim=32", "max_length=16"]
OLD = Path(__file__).parent / "data" / "old_formats"


def _last_json(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def machine_a(tmp_path_factory):
    """A finished decoder-only run on machine A's `home/corpus.txt`, its test scores, and
    the run and the data copied to machine B's own places (A's gone from there)."""
    root = tmp_path_factory.mktemp("moved")
    home = root / "A" / "home"
    home.mkdir(parents=True)
    (home / "corpus.txt").write_text("the cat sat on the mat. " * 40, "utf-8")
    code = main([
        "train", "--family", "decoder-only", "--data", str(home / "corpus.txt"),
        "--tokenizer", "char", "--set", *SMALL, "--steps", "2", "--batch-size", "4",
        "--precision", "float32", "--out", str(home / "run"), "--verbose", "0",
    ])  # fmt: skip
    assert code == 0
    scores = evaluate_json(["evaluate", home / "run"])
    b = root / "B"
    shutil.copytree(home / "run", b / "srv" / "run")
    (b / "data").mkdir()
    shutil.copy2(home / "corpus.txt", b / "data" / "corpus.txt")
    return {"home": home, "b": b, "scores": scores}


def evaluate_json(argv) -> dict:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([str(a) for a in argv]) == 0
    return json.loads(out.getvalue().strip().splitlines()[-1])


@pytest.fixture
def data_gone(machine_a):
    """Machine A's data file away from its path (machine B has its copy)."""
    corpus = machine_a["home"] / "corpus.txt"
    corpus.rename(corpus.with_suffix(".away"))
    yield corpus
    corpus.with_suffix(".away").rename(corpus)


def test_a_copied_run_is_evaluated_on_its_data_at_its_new_place(machine_a, data_gone, capsys):
    """`evaluate RUN` on another machine could only be told to put the data back at the
    trainer's path: --data gives its new place, checked against the recorded SHA-256."""
    run, new = machine_a["b"] / "srv" / "run", machine_a["b"] / "data" / "corpus.txt"
    metrics = (run / rd.METRICS_FILE).read_bytes()
    line = cli_error(capsys, ["evaluate", run])
    assert f"{data_gone} (the data file this run trained on" in line
    assert "give its new place with --data FILE" in line
    assert (run / rd.METRICS_FILE).read_bytes() == metrics  # nothing written
    scores = evaluate_json(["evaluate", run, "--data", new])
    assert {k: scores[k] for k in ("examples", "val_loss", "token_accuracy")} == {
        k: machine_a["scores"][k] for k in ("examples", "val_loss", "token_accuracy")
    }
    other = machine_a["b"] / "data" / "other.txt"
    other.write_text("the cat sat on the mat. " * 39, "utf-8")
    line = cli_error(capsys, ["evaluate", run, "--data", other])
    assert f"--data {other} is not the data file this run trained on ({data_gone}" in line
    line = cli_error(capsys, ["evaluate", run, "--valid", new])
    assert "this run named no --valid file" in line


def test_a_copied_run_quantizes_scored_on_its_data_at_its_new_place(
    machine_a, data_gone, capsys, tmp_path
):
    """`export --quantize` scores the copies on the run's task: with its data moved it
    could only be refused (or quantize unscored)."""
    run, new = machine_a["b"] / "srv" / "run", machine_a["b"] / "data" / "corpus.txt"
    argv = ["export", run, "--format", "onnx", "--out", tmp_path / "e", "--quantize", "int8"]
    line = cli_error(capsys, argv)
    assert f"{data_gone} (the data file" in line and "--data FILE" in line
    assert not (tmp_path / "e").exists()  # refused before anything was written
    assert main([str(a) for a in [*argv, "--data", new]]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["int8"]["examples"] == machine_a["scores"]["examples"]
    assert (tmp_path / "e" / "int8" / "model.onnx").is_file()
    unscored = ["export", run, "--format", "onnx", "--out", tmp_path / "f", "--data", new]
    assert "apply with --quantize" in cli_error(capsys, unscored)
    assert not (tmp_path / "f").exists()


def test_an_export_carries_no_path_of_the_machine_that_trained(machine_a, capsys, tmp_path):
    """An export's config.json (and a Hugging Face export's `transformer_zoo_run`) named
    the trainer's data file by its absolute path, the user's home in it: shared or served
    elsewhere it means nothing. The export is still known as its run's."""
    home, run = machine_a["home"], machine_a["home"] / "run"
    exports = {"all": tmp_path / "export", "hf": tmp_path / "hf"}
    for fmt, out in exports.items():
        assert main(["export", str(run), "--format", fmt, "--out", str(out)]) == 0
    capsys.readouterr()
    for out in exports.values():
        for path in out.rglob("*"):
            if path.is_file():
                assert str(home).encode() not in path.read_bytes(), path
    assert rd.load_run_config(exports["all"]).data == "corpus.txt"
    identity = run_identity(rd.load_run_config(run))
    assert run_differences(identity, run_identity(rd.load_run_config(exports["all"]))) == []
    for fmt, out in exports.items():  # into the same directory again: the same run's
        assert main(["export", str(run), "--format", fmt, "--out", str(out)]) == 0
    scores = evaluate_json(["evaluate", run, "--engine", "onnx", "--model", exports["all"]])
    assert scores["examples"] == machine_a["scores"]["examples"]
    # Another run on a file of the same name (other contents) is not this one.
    other = rd.load_run_config(run)
    other.extra["data_digests"] = {"data": "0" * 64}
    assert "data" in run_differences(run_identity(other), run_identity(rd.load_run_config(run)))
    # The export scored alone names its data by its name only: its place is asked for.
    with pytest.raises(RunError, match="by its name only, corpus.txt .* with --data FILE"):
        check_data_files(rd.load_run_config(exports["all"]))


def test_a_copied_run_resumes_with_its_data_at_its_new_place(tmp_path, monkeypatch, capsys):
    """The same `train` command with the data's new place was refused as "a run of files
    at other paths" (put the files back there); the file with the recorded SHA-256 is the
    run's, and the run then records its new place."""
    import keras

    from transformer_zoo.train import train_result
    from transformer_zoo.train.config import TrainConfig
    from transformer_zoo.train.prepared import TRAINED, prepare
    from transformer_zoo.train.trainer import train

    home, b = tmp_path / "A", tmp_path / "B"
    home.mkdir()
    (home / "corpus.txt").write_text("abc abd abe\n" * 40, encoding="utf-8")
    small = dict(num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32, max_length=16)

    def config(data, out):
        return TrainConfig(
            "decoder-only", data=str(data), out=str(out), tokenizer="char", overrides=small,
            steps=2, batch_size=4, steps_per_execution=1, precision="float32",
        )  # fmt: skip

    evaluate = train_result.evaluate

    def ctrl_c(*args, **kwargs):  # trained and saved; the test evaluation interrupted
        raise KeyboardInterrupt

    monkeypatch.setattr(train_result, "evaluate", ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        train(config(home / "corpus.txt", home / "run"), verbose=0)
    shutil.copytree(home / "run", b / "run")
    (b / "data").mkdir()
    os.rename(home / "corpus.txt", b / "data" / "corpus.txt")
    (b / "data" / "other.txt").write_text("abc abd abf\n" * 40, encoding="utf-8")
    with pytest.raises(RunError, match="other.txt is not the data file it trained on"):
        prepare(config(b / "data" / "other.txt", b / "run"))
    monkeypatch.setattr(train_result, "evaluate", evaluate)
    monkeypatch.setattr(keras.Model, "fit", lambda *a, **k: pytest.fail("trained again"))
    prepared = prepare(config(b / "data" / "corpus.txt", b / "run"))
    assert prepared.state == TRAINED
    assert "test" in train(prepared, verbose=0).metrics
    recorded = rd.load_run_config(b / "run")
    assert recorded.data == str(b / "data" / "corpus.txt")
    assert recorded.extra["status"] == "finished"


def test_an_old_run_from_another_machine_is_the_same_run_on_its_data_here(tmp_path):
    """A run of c0e587e (tests/data/old_formats), trained on another machine's copy of
    tests/data/g2p/train.tsv: given this copy (the same SHA-256), it is the same run, its
    data read from here; an export written today of it is known as its own."""
    from transformer_zoo.data.run_task import relocate
    from transformer_zoo.run_state import without_places

    data = Path(__file__).parent / "data" / "g2p" / "train.tsv"
    old = rd.load_run_config(OLD / "untied_encoder_decoder")
    assert not os.path.exists(old.data)  # /tmp/rupg/old4/...: the machine that trained
    rd.save_run_config(tmp_path / "run", old)
    (tmp_path / "run" / rd.BACKUP_DIR).mkdir()
    (tmp_path / "run" / rd.BACKUP_DIR / rd.BACKUP_METADATA_FILE).write_text('{"epoch": 1}')
    rerun = {**old.extra["train"], "data": str(data)}  # the same command, the data here
    assert inspect_run_directory(str(tmp_path / "run"), rerun) == rd.RESUME
    with pytest.raises(RunError, match="give its new place with --data FILE"):
        check_data_files(old)
    check_data_files(relocate(old, data=str(data)))
    assert run_differences(run_identity(old), run_identity(without_places(old))) == []
    # What a Hugging Face export of it recorded then (whole paths): still its run's.
    recorded = {**run_identity(old), "data": old.data, "data_digests": None}
    recorded["train"] = old.extra["train"]
    assert run_differences(recorded, run_identity(old)) == []


def test_an_export_of_an_old_pair_classifier_reads_no_file_of_the_same_name_here(
    tmp_path, monkeypatch
):
    """A classifier trained before `extra.text_pairs` (and without --columns) is told a
    pair reader by its training file; its export names that file by its name only, which
    must not be read from the working directory (another file may bear that name)."""
    from transformer_zoo.data.run_task import trained_on_pairs
    from transformer_zoo.run_state import without_places

    config = rd.RunConfig.from_dict(json.loads((OLD / "pair_classifier_config.json").read_text()))
    config.extra["train"]["columns"] = None
    (tmp_path / "pairs").mkdir()
    config.data = str(tmp_path / "pairs" / "train.tsv")  # where it trained: rows of pairs
    rows = [f"{i % 2}\ttext {i}\tsecond {i}" for i in range(60)]
    (tmp_path / "pairs" / "train.tsv").write_text("\n".join(rows) + "\n")
    assert trained_on_pairs(config) is True
    exported = without_places(config)
    exported.export = {"model": {}}
    assert exported.data == "train.tsv"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.tsv").write_text("\n".join(f"{i % 2}\ttext {i}" for i in range(60)) + "\n")
    assert trained_on_pairs(exported) is None  # cannot be told: both are taken
