"""Run and export directories that leave the machine they were made on: a run records its
data files by absolute paths and their SHA-256, so a run copied elsewhere, or whose data
moved, is pointed at its data's new place (`--data`, `--valid`; `--test FILE` scores a
file) and checked against those digests; an export carries no path of the machine that
trained, and is still known as its run's."""

import dataclasses
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


def test_quantize_onnx_of_an_export_says_what_to_pass_from_python(machine_a, tmp_path):
    """`quantize_onnx(EXPORT, OUT)` of an export (its data named by its name only) was
    told the command line's `--data FILE`, which Python has not: it names the task to
    pass, which then quantizes."""
    from transformer_zoo.data.run_task import run_task
    from transformer_zoo.export.quantize import quantize_onnx

    run = machine_a["home"] / "run"
    assert main(["export", str(run), "--format", "onnx", "--out", str(tmp_path / "e")]) == 0
    with pytest.raises(RunError, match=r"task=run_task\(load_run_config\(RUN_DIR\)\)"):
        quantize_onnx(tmp_path / "e", tmp_path / "q")
    report = quantize_onnx(tmp_path / "e", tmp_path / "q", task=run_task(rd.load_run_config(run)))
    assert report["examples"] == machine_a["scores"]["examples"]


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
    # Recorded with whole paths, the run and the run whose data moved (under another name):
    # the same run, told by the data's SHA-256.
    renamed = tmp_path / "g2p_train.tsv"
    shutil.copy2(data, renamed)
    moved = relocate(old, data=str(renamed))
    assert moved.data == str(renamed) and moved.extra["data_digests"] == old.extra["data_digests"]
    assert run_differences(_whole_identity(old), _whole_identity(moved)) == []
    other = dataclasses.replace(moved, extra={**moved.extra, "data_digests": {"data": "0" * 64}})
    assert "data" in run_differences(_whole_identity(old), _whole_identity(other))
    # What a Hugging Face export of it recorded then (whole paths): still its run's.
    recorded = {**run_identity(old), "data": old.data, "data_digests": None}
    recorded["train"] = old.extra["train"]
    assert run_differences(recorded, run_identity(old)) == []


def _whole_identity(config) -> dict:
    """A `run_identity` as recorded with whole paths (`run_identity` names files by base
    names itself)."""
    from transformer_zoo.run_state import RUN_IDENTITY, RUN_IDENTITY_EXTRA

    identity = {key: getattr(config, key) for key in RUN_IDENTITY}
    identity.update({key: config.extra.get(key) for key in RUN_IDENTITY_EXTRA})
    return identity


def test_an_old_run_without_digests_resumes_on_its_data_at_its_new_place(tmp_path):
    """A run trained before its data's SHA-256 were recorded (6215e95): `evaluate --data`
    took the file at its new place as given, the resuming `train` refused it ("put the
    files back"). Both take it, the file recorded gone; a new place with no file there is
    still refused."""
    from transformer_zoo.data.run_task import relocate

    data = Path(__file__).parent / "data" / "g2p" / "train.tsv"
    old = rd.load_run_config(OLD / "untied_encoder_decoder")
    old.extra.pop("data_digests", None)
    assert not os.path.exists(old.data)
    rd.save_run_config(tmp_path / "run", old)
    (tmp_path / "run" / rd.BACKUP_DIR).mkdir()
    (tmp_path / "run" / rd.BACKUP_DIR / rd.BACKUP_METADATA_FILE).write_text('{"epoch": 1}')
    rerun = {**old.extra["train"], "data": str(data)}
    assert inspect_run_directory(str(tmp_path / "run"), rerun) == rd.RESUME
    check_data_files(relocate(old, data=str(data)))
    gone = {**rerun, "data": str(tmp_path / "nowhere.tsv")}
    with pytest.raises(RunError, match="holds a run of files at other paths"):
        inspect_run_directory(str(tmp_path / "run"), gone)


def _pair_run(directory: Path):
    """A pair classifier's config (tests/data/old_formats) on `directory`'s train.tsv,
    its valid split cut from it, and its --test file test.tsv, their digests recorded."""
    from transformer_zoo.data.run_task import data_digests

    config = rd.RunConfig.from_dict(json.loads((OLD / "pair_classifier_config.json").read_text()))
    for name, rows in (("train", 80), ("test", 10)):
        lines = ["s1\ts2\tlabel"] + [f"{name} {i} a\t{name} {i} b\t{i % 2}" for i in range(rows)]
        (directory / f"{name}.tsv").write_text("\n".join(lines) + "\n", "utf-8")
    data, test = str(directory / "train.tsv"), str(directory / "test.tsv")
    config.data = data
    config.extra["train"] = {**config.extra["train"], "data": data, "test": test}
    config.extra["data_digests"] = data_digests(data, None, test)
    return config


def test_the_valid_split_is_scored_without_the_test_file(tmp_path, capsys):
    """`evaluate --split valid` of a run whose --test file is gone demanded that file
    ("give its new place with --test FILE", which on evaluate scores that file instead);
    the valid split does not need it. `--split valid --test FILE` scored the test file."""
    from transformer_zoo.data.run_task import run_task

    config = _pair_run(tmp_path)
    valid = _reference(config).valid  # cut with the test file there
    assert valid
    os.remove(tmp_path / "test.tsv")
    task = run_task(config, split="valid")
    assert task.valid == valid and task.test == []
    with pytest.raises(
        RunError, match=r"test.tsv \(the --test file .* is not there: put it back .* on train,"
    ):
        run_task(config)
    line = cli_error(
        capsys, ["evaluate", tmp_path, "--split", "valid", "--test", tmp_path / "train.tsv"]
    )
    assert "does not go with --split valid" in line


def _reference(config):
    """`config`'s task as `load_task` cuts it from all of its files, as training did."""
    from transformer_zoo.data.tasks import load_task

    settings = config.extra["train"]
    stream = settings.get("windows") in ("random", "epoch")
    return load_task(
        config.data, config.family, seed=config.seed or 0, valid=settings.get("valid"),
        test=settings.get("test"), columns=settings.get("columns"), stream=stream,
    )  # fmt: skip


def _with_files(config, directory: Path, **files):
    """`config` recording `files` ({setting: name in `directory`}) and their SHA-256."""
    from transformer_zoo.data.run_task import data_digests

    paths = {name: str(directory / file) for name, file in files.items()}
    paths = {"data": config.data, "valid": None, "test": None, **paths}
    train = {**config.extra["train"], **paths}
    digests = data_digests(paths["data"], paths["valid"], paths["test"])
    extra = {**config.extra, "train": train, "data_digests": digests}
    return dataclasses.replace(config, data=paths["data"], extra=extra)


def _write_valid(directory: Path) -> None:
    """A --valid file for `_pair_run`'s columns."""
    rows = ["s1\ts2\tlabel"] + [f"v {i} a\tv {i} b\t{i % 2}" for i in range(6)]
    (directory / "valid.tsv").write_text("\n".join(rows) + "\n", "utf-8")


def _away(*paths: Path):
    """Moves `paths` aside (a data file gone from where the run recorded it)."""
    for path in paths:
        path.rename(path.with_suffix(".away"))


def test_a_split_of_a_file_of_its_own_needs_that_file_alone(tmp_path):
    """A run trained on --data, --valid and --test files that moved: `evaluate --split
    valid --valid NEW` was refused until --data was given too, and the test split was
    refused for a missing --valid file, though each split is that file alone."""
    from transformer_zoo.data.run_task import relocate, run_task

    config = _pair_run(tmp_path)
    _write_valid(tmp_path)
    config = _with_files(config, tmp_path, valid="valid.tsv", test="test.tsv")
    reference = _reference(config)
    moved = tmp_path / "moved"
    moved.mkdir()
    for name in ("valid.tsv", "test.tsv"):
        shutil.copy2(tmp_path / name, moved / name)
    _away(tmp_path / "train.tsv", tmp_path / "valid.tsv", tmp_path / "test.tsv")
    valid = run_task(relocate(config, valid=str(moved / "valid.tsv")), split="valid")
    assert valid.valid == reference.valid and valid.test == []
    test = run_task(relocate(config, test=str(moved / "test.tsv")))
    assert test.test == reference.test and test.valid == []
    with pytest.raises(RunError, match=r"valid.tsv \(the --valid file .* is not there"):
        run_task(config, split="valid")
    with pytest.raises(RunError, match=r"test.tsv \(the --test file .* is not there"):
        run_task(config)


def test_a_split_cut_from_the_data_file_needs_it_and_not_the_other_splits_file(tmp_path):
    """A split that training cut from the data file needs that file (README: the cut is
    drawn from it), but not the file of the other split, whose contents the cut does not
    depend on."""
    from transformer_zoo.data.run_task import run_task

    config = _pair_run(tmp_path)  # valid cut from train.tsv; test.tsv a file of its own
    reference = _reference(config)
    _away(tmp_path / "test.tsv")
    assert run_task(config, split="valid").valid == reference.valid
    _away(tmp_path / "train.tsv")
    with pytest.raises(RunError, match=r"train.tsv \(the data file .* is not there"):
        run_task(config, split="valid")
    _write_valid(tmp_path)
    (tmp_path / "train.away").rename(tmp_path / "train.tsv")
    cut_test = _with_files(config, tmp_path, valid="valid.tsv")  # test cut from train.tsv
    reference = _reference(cut_test)
    _away(tmp_path / "valid.tsv")
    assert run_task(cut_test).test == reference.test


def test_a_token_streams_test_split_without_a_test_file_is_its_valid_file_alone(tmp_path):
    """A plain-text run's test split, without a --test file, is its validation text: the
    --valid file, which is all it needs."""
    from transformer_zoo.data.run_task import run_task

    (tmp_path / "train.txt").write_text("the cat sat on the mat. " * 20, "utf-8")
    (tmp_path / "valid.txt").write_text("a dog sat on a log. " * 10, "utf-8")
    config = dataclasses.replace(
        _pair_run(tmp_path), family="decoder-only", task="language-model", label_names=None
    )
    config.extra["train"] = {**config.extra["train"], "windows": "random", "columns": None}
    config = _with_files(
        dataclasses.replace(config, data=str(tmp_path / "train.txt")), tmp_path, valid="valid.txt"
    )
    reference = _reference(config)
    _away(tmp_path / "train.txt")
    assert run_task(config).test == reference.test
    assert run_task(config, split="valid").valid == reference.valid


def test_an_export_names_its_data_file_from_where_it_is(tmp_path, monkeypatch):
    """An export names its data file by its base name: `evaluate EXP --data train.tsv`
    from the data's folder was taken as the recorded path, nothing relocated, and then
    refused ("give its place with --data FILE")."""
    from transformer_zoo.data.run_task import relocate, run_task
    from transformer_zoo.run_state import without_places

    config = _pair_run(tmp_path)
    exported = without_places(config)
    exported.export = {"model": {}}
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RunError, match="by its name only"):
        check_data_files(exported)
    here = relocate(exported, data="train.tsv", test="test.tsv")
    assert here.data == str(tmp_path / "train.tsv")
    check_data_files(here)
    assert run_task(here).test == run_task(config).test
    assert relocate(config, data=config.data) is config  # its own path: as it is


def test_file_scoring_refusals_name_each_command(tmp_path):
    """`export --quantize --test FILE` was told what `evaluate` does (a decoder-only run
    on built-in data), or lost the `--max-accuracy-drop none` way out (an imported
    embedding model, which no file can score)."""
    import dataclasses as dc

    from transformer_zoo.data.run_task import run_task
    from transformer_zoo.errors import ModelDirectoryError
    from transformer_zoo.export.quantize import require_task

    (tmp_path / "text.txt").write_text("some text\n", "utf-8")
    config = _pair_run(tmp_path)
    builtin = dc.replace(
        config, family="decoder-only", task="language-model", label_names=None,
        data="builtin:dates-zh", extra={"train": {}},
    )  # fmt: skip
    with pytest.raises(ValueError, match="evaluate and export --quantize score the built-in"):
        run_task(builtin, str(tmp_path / "text.txt"))
    embedding = dc.replace(config, task="embedding", label_names=None, data=None, extra={})
    with pytest.raises(ModelDirectoryError, match="no labels .*`--max-accuracy-drop none`"):
        require_task(embedding, test=str(tmp_path / "text.txt"))


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


def test_a_rerun_on_built_in_data_names_the_data_the_run_records():
    """A resumed `train` passes its `--data` to `relocate`: `builtin:NAME` is what the run
    records, not a file of the working directory (made absolute, it was refused as a new
    place of a file the run trained on)."""
    from transformer_zoo.data.run_task import relocate

    config = rd.RunConfig(
        family="encoder-decoder", preset="tiny", task="translation", data="builtin:dates-zh"
    )
    assert relocate(config, data="builtin:dates-zh") is config
