"""Which run a run started with `train --init DIR` is: the weights it starts from tell it
apart (a digest of DIR's `model.keras`, recorded with its data files' in
`extra.data_digests`), not DIR's base name, which an export keeps of it; and a run of the
code before e24dd34, which recorded the built-in data's defaults for an `--init` run
(masked-LM `pretrain_steps` among them), resumes with the same command as it recorded."""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

import keras
import pytest

from tests.artifacts import WORDPIECE_VOCABULARY
from tests.helpers import cli_error
from transformer_zoo import run_directory as rd
from transformer_zoo.cli import main
from transformer_zoo.errors import RunError
from transformer_zoo.models import from_preset
from transformer_zoo.run_state import inspect_run_directory, run_differences, run_identity
from transformer_zoo.text import WordPieceTokenizer

SMALL = dict(num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32)


def _encoder(directory: Path, seed: int) -> Path:
    """An encoder-only run directory as `import-hf` writes one (`model.keras`,
    `config.json`, `vocab.txt`), its weights drawn with `seed`."""
    tokenizer = WordPieceTokenizer(WORDPIECE_VOCABULARY, max_length=16)
    keras.utils.set_random_seed(seed)
    model = from_preset(
        "tiny", family="encoder-only", vocabulary_size=len(WORDPIECE_VOCABULARY), max_length=16,
        **SMALL,
    )  # fmt: skip
    directory.mkdir(parents=True)
    model.save(directory / rd.MODEL_FILE)
    rd.save_run_config(
        directory,
        rd.RunConfig(
            family="encoder-only", preset="tiny", task="embedding", tokenizer="vocab.txt",
            special_ids=tokenizer.special_ids, max_length=16,
        ),
    )  # fmt: skip
    tokenizer.save(directory)
    return directory


def _write_data(path: Path) -> None:
    rows = [f"{('neg', 'pos')[i % 2]}\tthe cat sat on the mat {i}" for i in range(40)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")


def _cli(*argv) -> int:
    return main([str(a) for a in argv])


@pytest.mark.slow  # two runs trained, an export and two evaluations (about 10 s)
def test_runs_from_init_checkpoints_of_one_folder_name_are_other_runs(tmp_path, capsys):
    """End to end: run B (started from /b/minilm) was taken for run A (from /a/minilm,
    other weights): `export B` wrote over A's export, and `evaluate B --engine onnx
    --model A's export` scored A's model as B's."""
    _write_data(tmp_path / "train.tsv")
    for side, seed in (("a", 1), ("b", 2)):
        init = _encoder(tmp_path / side / "minilm", seed)
        assert _cli(
            "train", "--family", "encoder-only", "--data", tmp_path / "train.tsv",
            "--init", init, "--steps", "2", "--batch-size", "4", "--steps-per-execution", "1",
            "--precision", "float32", "--out", tmp_path / side / "run", "--verbose", "0",
        ) == 0  # fmt: skip
    run_a, run_b, export = tmp_path / "a" / "run", tmp_path / "b" / "run", tmp_path / "ea"
    assert _cli("export", run_a, "--format", "onnx", "--out", export) == 0
    capsys.readouterr()
    line = cli_error(capsys, ["export", run_b, "--format", "onnx", "--out", export])
    assert "holds an export of another run (--init checkpoints differ)" in line
    argv = ["evaluate", run_b, "--engine", "onnx", "--model", export]
    assert "is an export of another run than" in cli_error(capsys, argv)
    assert _cli("evaluate", run_a, "--engine", "onnx", "--model", export) == 0


def _started(data: Path, init: Path, out: Path) -> rd.RunConfig:
    """The config.json a run from `init` writes as it starts (`trainer._write_start`)."""
    from transformer_zoo.train.config import TrainConfig
    from transformer_zoo.train.prepared import prepare, run_config_of

    prepared = prepare(
        TrainConfig(
            "encoder-only", data=str(data), init=str(init), out=str(out), steps=2,
            batch_size=4, precision="float32",
        )
    )  # fmt: skip
    return run_config_of(prepared, prepared.setup.build_model(), "training")


def test_the_weights_a_run_starts_from_tell_it_from_a_run_from_a_folder_of_that_name(tmp_path):
    """Two runs of one command but for `--init` /a/minilm or /b/minilm (other weights,
    one folder name) were one run to `export` (one written over the other's export) and
    to `evaluate --model` (one scored as the other): an export names the checkpoint by
    its base name. Each records its checkpoint's SHA-256; where both sides record one, it
    tells them apart, and a copy of the checkpoint elsewhere is the same."""
    from transformer_zoo.export.staged_export import check_export_target
    from transformer_zoo.run_state import without_places

    _write_data(tmp_path / "train.tsv")
    runs = {}
    for side, seed in (("a", 1), ("b", 2)):
        init = _encoder(tmp_path / side / "minilm", seed)
        runs[side] = _started(tmp_path / "train.tsv", init, tmp_path / side / "run")
    shutil.copytree(tmp_path / "a" / "minilm", tmp_path / "c" / "minilm")
    runs["c"] = _started(tmp_path / "train.tsv", tmp_path / "c" / "minilm", tmp_path / "c" / "run")
    export = without_places(runs["a"])  # what `export A --out ea` records of A
    export.export = {"model": {}}
    rd.save_run_config(tmp_path / "ea", export)
    with pytest.raises(ValueError, match=r"another run \(--init checkpoints differ\)"):
        check_export_target(None, str(tmp_path / "ea"), runs["b"])
    for side in ("a", "c"):
        check_export_target(None, str(tmp_path / "ea"), runs[side])
    # `evaluate RUN --model EXPORT` compares these.
    identities = {side: run_identity(config) for side, config in runs.items()}
    assert run_differences(identities["b"], run_identity(export)) == ["--init checkpoints"]
    assert run_differences(identities["c"], run_identity(export)) == []
    # An export (or a run) that recorded no digest of its checkpoint, written before,
    # is compared by the checkpoint's name, as it was: still its run's.
    del export.extra["data_digests"]["init"]
    assert run_differences(identities["a"], run_identity(export)) == []


def test_a_run_resumes_from_its_init_checkpoint_moved_not_from_other_weights(tmp_path):
    """Resuming, the checkpoint at a new place is the one the run started from (its
    recorded SHA-256), and other weights, at its recorded place or a new one, are not."""
    _write_data(tmp_path / "train.tsv")
    init, other = _encoder(tmp_path / "a" / "minilm", 1), _encoder(tmp_path / "b" / "minilm", 2)
    run = tmp_path / "run"
    config = _started(tmp_path / "train.tsv", init, run)
    rd.save_run_config(run, config)
    (run / rd.BACKUP_DIR).mkdir()
    (run / rd.BACKUP_DIR / rd.BACKUP_METADATA_FILE).write_text('{"epoch": 1}')
    moved = tmp_path / "elsewhere" / "minilm"
    shutil.move(init, moved)
    rerun = {**config.extra["train"], "init": str(moved)}
    assert inspect_run_directory(str(run), rerun) == rd.RESUME
    with pytest.raises(RunError, match="holds a different run"):
        inspect_run_directory(str(run), {**rerun, "init": str(other)})
    shutil.move(moved, init)
    shutil.copy2(other / rd.MODEL_FILE, init / rd.MODEL_FILE)
    with pytest.raises(RunError, match=r"whose weights have changed since .*put back"):
        inspect_run_directory(str(run), config.extra["train"])


def test_an_init_run_on_built_in_data_of_before_e24dd34_resumes_as_it_recorded(
    tmp_path, capsys, monkeypatch
):
    """Before e24dd34 a run from `--init` on built-in data took the data's defaults (rate
    3e-4, dropout 0, 1,500 masked-LM pretraining steps), and recorded them; since then it
    takes `INIT_DEFAULTS`, so the same command was refused ("holds a different run"), and
    giving the recorded settings too ("already pretrained: drop `pretrain_steps`"). The
    same command resumes it with the settings it recorded; a setting given otherwise is
    still another run's, and a start that backed nothing up starts afresh."""
    from transformer_zoo.train import prepared as prepared_module
    from transformer_zoo.train.config import TrainConfig
    from transformer_zoo.train.prepared import prepare

    # The built-in data, drawn once (1 s a draw), for the two runs that read it.
    monkeypatch.setattr(prepared_module, "load_task", functools.cache(prepared_module.load_task))
    init = _encoder(tmp_path / "minilm", 1)
    run = tmp_path / "run"

    def command(**given):  # `train --family encoder-only --init minilm --out run ...`
        return TrainConfig(
            "encoder-only", init=str(init), out=str(run), steps=6, eval_every=2,
            batch_size=4, max_examples=64, steps_per_execution=1, precision="float32",
            **given,
        )  # fmt: skip

    # What a checkout of e24dd34^ recorded for this command (its run, interrupted after
    # its first backup, differed from today's settings in these three only).
    then = {"learning_rate": 3e-4, "dropout": 0.0, "pretrain_steps": 1500}
    recorded = {**command().identity(), **then}
    rd.save_run_config(
        run,
        rd.RunConfig(
            family="encoder-only", preset="tiny", task="classification", tokenizer="vocab.txt",
            special_ids=rd.load_run_config(init).special_ids, data="builtin:dates-zh",
            label_names=["incorrect", "correct"],
            extra={"train": recorded, "status": "training"},
        ),
    )  # fmt: skip
    (run / rd.BACKUP_DIR).mkdir()
    (run / rd.BACKUP_DIR / rd.BACKUP_WEIGHTS_FILE).write_bytes(b"")
    (run / rd.BACKUP_DIR / rd.BACKUP_METADATA_FILE).write_text('{"epoch": 1}')
    given = command()
    capsys.readouterr()
    prepared = prepare(given)
    assert prepared.state == rd.RESUME
    assert {name: getattr(prepared.config, name) for name in then} == then
    assert prepared.config.identity() == recorded
    assert given.pretrain_steps is None  # the caller's config as it was
    assert "it keeps the settings it recorded (learning_rate 0.0003, dropout 0.0, " in (
        capsys.readouterr().out
    )
    with pytest.raises(RunError, match=r"different run \(learning_rate=0.0003 there, 5e-05 now\)"):
        prepare(command(learning_rate=5e-5))
    shutil.rmtree(run / rd.BACKUP_DIR)  # a start that failed before its first backup
    prepared = prepare(command())
    assert prepared.state == rd.FRESH and prepared.config.pretrain_steps is None
