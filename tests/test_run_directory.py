"""The run directory contract: `RunConfig` round-trips and malformed directories fail clearly."""

import json

import pytest

from transformer_zoo.run_directory import RunConfig, RunError, load_run_config, save_run_config


def test_config_round_trips_through_the_directory(tmp_path):
    cfg = RunConfig(
        family="encoder-only",
        preset="tiny",
        task="classification",
        special_ids={"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4},
        tokenizer="vocab.txt",
        max_length=64,
        label_names=["no", "yes"],
        data="builtin:dates-zh",
        seed=7,
        extra={"epochs": 3},
    )
    save_run_config(tmp_path, cfg)
    assert load_run_config(tmp_path) == cfg
    assert [p.name for p in tmp_path.iterdir()] == ["config.json"]  # no temporary file left


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        "[1, 2]",
        json.dumps({"family": "decoder-only", "preset": "tiny"}),
        json.dumps({"family": "rnn", "preset": "tiny", "task": "language-model"}),
        json.dumps({"family": "decoder-only", "preset": "tiny", "task": "translation"}),
        json.dumps({"family": "decoder-only", "preset": "tiny", "task": "language-model", "x": 1}),
        json.dumps({"family": "encoder-only", "preset": "t", "task": "classification"}),
        json.dumps(
            {"family": "decoder-only", "preset": "t", "task": "language-model", "max_length": "9"}
        ),
    ],
)
def test_malformed_config_raises_run_error(tmp_path, content):
    (tmp_path / "config.json").write_text(content)
    with pytest.raises(RunError):
        load_run_config(tmp_path)


def test_missing_directory_or_config_raises_run_error(tmp_path):
    with pytest.raises(RunError, match="no such directory"):
        load_run_config(tmp_path / "absent")
    with pytest.raises(RunError, match="config.json"):
        load_run_config(tmp_path)
    (tmp_path / "model.onnx").write_bytes(b"")  # a model file given for its directory
    with pytest.raises(RunError, match=f"is a file; give the directory.*its folder, {tmp_path}"):
        load_run_config(tmp_path / "model.onnx")


def test_a_hugging_face_directory_is_told_apart_with_advice_serve_can_follow(tmp_path, capsys):
    """`serve HF_DIR` (an `export --format hf` directory) was told "give the run
    directory", which serve refuses ("has no ONNX files"): one message serves every
    command, so it says which directory each kind of command reads."""
    from tests.helpers import cli_error

    config = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_layer": 1}
    (tmp_path / "config.json").write_text(json.dumps(config))
    line = cli_error(capsys, ["serve", tmp_path])
    assert line == (
        f"transformer-zoo serve: error: {tmp_path} holds a Hugging Face model (transformers' "
        "config.json, model_type 'gpt2'), not a run or an export of ours: `import-hf` makes "
        "a run of it (a run directory, as evaluate, export and --engine keras read); serve "
        "and --engine onnx read what `export --format onnx` wrote of a run"
    )


def test_run_error_is_a_value_error():
    assert issubclass(RunError, ValueError)


def _backed_up_run(directory, train: dict) -> None:
    """An interrupted decoder-only run whose `extra.train` is `train`, with a backup."""
    cfg = RunConfig(
        family="decoder-only",
        preset="tiny",
        task="language-model",
        data=train["data"],
        extra={"train": train, "status": "training"},
    )
    save_run_config(directory, cfg)
    (directory / "backup").mkdir()
    (directory / "backup" / "training_metadata.json").write_text('{"epoch": 1}')


def test_a_run_that_stored_relative_paths_resumes_from_the_same_directory(tmp_path, monkeypatch):
    """Runs written before paths were stored absolute resume when rerun from where they
    started, and are still told apart from a run on another file."""
    from transformer_zoo.run_directory import RESUME
    from transformer_zoo.run_state import inspect_run_directory

    monkeypatch.chdir(tmp_path)
    old = {"data": "corpus.txt", "test": None, "seed": 0}
    _backed_up_run(tmp_path / "run", old)
    now = {**old, "data": str(tmp_path / "corpus.txt")}
    assert inspect_run_directory(str(tmp_path / "run"), now) == RESUME
    other = {**now, "data": str(tmp_path / "other.txt")}
    (tmp_path / "corpus.txt").write_text("the run's data")
    with pytest.raises(RunError, match="holds a different run"):  # the recorded file is there
        inspect_run_directory(str(tmp_path / "run"), other)
    # The recorded file moved away: the advice keeps the backup (it said to delete it).
    (tmp_path / "corpus.txt").rename(tmp_path / "moved.txt")
    with pytest.raises(RunError, match="holds a run of files at other paths .* put the files back"):
        inspect_run_directory(str(tmp_path / "run"), other)
    for different in ({**other, "epochs": 99}, {**now, "valid": str(tmp_path / "v.txt")}):
        with pytest.raises(RunError, match="holds a different run"):
            inspect_run_directory(str(tmp_path / "run"), different)


def test_a_start_that_stopped_before_its_first_backup_may_be_rerun_with_other_settings(
    tmp_path,
):
    """A NaN loss or Ctrl-C before the first backup left a config of status "training"
    that refused the rerun with a lower learning rate as "a different run"."""
    from transformer_zoo.run_directory import FRESH
    from transformer_zoo.run_state import inspect_run_directory

    settings = {"data": "builtin:dates-zh", "learning_rate": 1e12}
    cfg = RunConfig("decoder-only", "tiny", "language-model", extra={"train": settings, "status": "training"})  # fmt: skip
    save_run_config(tmp_path / "run", cfg)
    lower = {**settings, "learning_rate": 1e-3}
    assert inspect_run_directory(str(tmp_path / "run"), lower) == FRESH
    finished = RunConfig("decoder-only", "tiny", "language-model", extra={"train": settings, "status": "finished"})  # fmt: skip
    save_run_config(tmp_path / "done", finished)
    with pytest.raises(RunError, match="holds a different run"):
        inspect_run_directory(str(tmp_path / "done"), lower)


def test_a_different_run_is_refused_with_how_to_proceed(tmp_path):
    """After a NaN loss, the advised rerun (--precision float32) is a different run: the
    error says to choose another --out or delete the directory."""
    from transformer_zoo.run_state import inspect_run_directory

    settings = {"data": "builtin:dates-zh", "precision": "mixed_float16"}
    cfg = RunConfig("decoder-only", "tiny", "language-model", extra={"train": settings, "status": "finished"})  # fmt: skip
    save_run_config(tmp_path / "run", cfg)
    with pytest.raises(RunError) as error:
        inspect_run_directory(str(tmp_path / "run"), {**settings, "precision": "float32"})
    assert str(error.value) == (
        f"--out {str(tmp_path / 'run')!r} holds a different run (precision='mixed_float16' "
        "there, 'float32' now); choose another --out, or delete that directory to start over"
    )


def test_an_export_of_the_run_is_refused_as_out(tmp_path):
    """An export copies its run's config.json (its training settings and finished status)
    without model.keras: `train --out EXPORT` took it for the run, unfinished, and
    trained into it."""
    from transformer_zoo.run_state import inspect_run_directory

    settings = {"data": "builtin:dates-zh", "seed": 0}
    cfg = RunConfig(
        family="decoder-only",
        preset="tiny",
        task="language-model",
        extra={"train": settings, "status": "finished"},
        export={"onnx": {"graphs": {}}},
    )
    save_run_config(tmp_path / "export", cfg)
    with pytest.raises(RunError, match="holds an export, not a run"):
        inspect_run_directory(str(tmp_path / "export"), settings)
    assert sorted(p.name for p in (tmp_path / "export").iterdir()) == ["config.json"]


def test_a_trimmed_history_ends_its_lines_as_keras_csvlogger_does(tmp_path):
    """A resumed run's history.csv held "\\n" lines (the trimmed ones) and then "\\r\\n"
    ones (those CSVLogger appended)."""
    import keras
    import numpy as np

    from transformer_zoo.run_state import trim_history

    path = tmp_path / "history.csv"
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    x, y = np.zeros((4, 2)), np.zeros((4, 1))
    model.fit(x, y, epochs=3, verbose=0, callbacks=[keras.callbacks.CSVLogger(str(path))])
    trim_history(str(path), 2)
    model.fit(x, y, epochs=3, initial_epoch=2, verbose=0,
              callbacks=[keras.callbacks.CSVLogger(str(path), append=True)])  # fmt: skip
    lines = path.read_bytes().split(b"\n")[:-1]
    assert len(lines) == 4 and all(line.endswith(b"\r") for line in lines)


def test_a_steps_run_that_recorded_the_default_epochs_resumes(tmp_path):
    """Before 2026-12-05 a `--steps` run on built-in data recorded the data's default
    `epochs: 4` beside `steps`; the same command now records `epochs: None`, and such a
    run (a backup to resume, or a finished run) was refused as "a different run"."""
    from transformer_zoo.run_directory import RESUME
    from transformer_zoo.run_state import inspect_run_directory

    old = {"data": "builtin:dates-zh", "steps": 20, "epochs": 4, "seed": 0}
    _backed_up_run(tmp_path / "run", old)
    assert inspect_run_directory(str(tmp_path / "run"), {**old, "epochs": None}) == RESUME
    with pytest.raises(RunError, match="holds a different run"):  # other steps: another run
        inspect_run_directory(str(tmp_path / "run"), {**old, "epochs": None, "steps": 30})
