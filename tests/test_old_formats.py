"""Files written by older versions (tests/data/old_formats, see its README.md): each either
works or is refused at once, in one line that says what happened and what to do."""

import copy
import gzip
import hashlib
import json
import os
import shutil
from pathlib import Path

import keras
import pytest

from transformer_zoo.errors import InputError, ModelDirectoryError, RunError, first_line
from transformer_zoo.models.presets import from_preset
from transformer_zoo.models.saving import load_run_model
from transformer_zoo.run_directory import ModelDimensions, RunConfig
from transformer_zoo.serving.served_model import ServedModel
from transformer_zoo.train.callbacks.backup import restore_backup

OLD = Path(__file__).parent / "data" / "old_formats"
UNTIED = OLD / "untied_encoder_decoder"  # tie_weights="none", saved by c0e587e


def _gunzip(source: Path, target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(gzip.decompress(source.read_bytes()))
    return target


def _digests(directory: Path) -> dict:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.iterdir())
        if p.is_file()
    }


def test_an_untied_head_saved_before_its_projection_sublayer_is_refused_in_one_line(tmp_path):
    """A `.keras` file whose untied LMHead held its kernel itself (before 121f1b1) names
    that and what to do, in one line; Keras' own message ended at a colon."""
    _gunzip(UNTIED / "model.keras.gz", tmp_path / "run" / "model.keras")
    with pytest.raises(ModelDirectoryError) as refused:
        load_run_model(tmp_path / "run")
    message = str(refused.value)
    assert "\n" not in message and first_line(refused.value) == message
    assert "saved before 2026-12-05 (commit 121f1b1)" in message
    assert 'untied output layer (tie_weights="none")' in message
    assert "train the run again under another --out, or export it with the version" in message


# The backup's optimizer (adamw-cosine) holds one variable fewer than a plain AdamW.
@pytest.mark.filterwarnings("ignore:Skipping variable loading for optimizer")
def test_an_untied_heads_old_backup_is_refused_before_any_step_and_kept(tmp_path):
    """The backup of such a run, killed mid-way, cannot be resumed: `restore_backup`
    (which `train` calls before its first step) refuses it in one line and leaves the
    backup's files as they were."""
    backup = tmp_path / "backup"
    _gunzip(UNTIED / "backup" / "latest.weights.h5.gz", backup / "latest.weights.h5")
    shutil.copy(UNTIED / "backup" / "training_metadata.json", backup)
    before = _digests(backup)
    extra = json.loads((UNTIED / "config.json").read_text())["extra"]
    vocabulary, target_vocabulary = extra["vocabulary_sizes"]
    model = from_preset(
        extra["train"]["preset"],
        "encoder-decoder",
        **extra["train"]["overrides"],
        vocabulary_size=vocabulary,
        target_vocabulary_size=target_vocabulary,
    )
    model.compile(optimizer=keras.optimizers.AdamW(), loss="sparse_categorical_crossentropy")
    with pytest.raises(RunError) as refused:
        restore_backup(backup, model)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"Cannot resume from the backup in {backup}: its weights were")
    assert "saved before 2026-12-05 (commit 121f1b1)" in message
    assert "start the run again under another --out (this backup is left as it is)" in message
    assert _digests(backup) == before


def test_train_prints_the_refused_resume_in_one_line(tmp_path, capsys, monkeypatch):
    """`transformer-zoo train` ends in that one line (exit 2), not in a traceback."""
    from tests.helpers import cli_error

    message = "Cannot resume from the backup in OUT/backup: its weights were saved before ..."

    def refuse(prepared, verbose=None):
        raise RunError(message)

    monkeypatch.setattr("transformer_zoo.train.prepared.prepare", lambda config: config)
    monkeypatch.setattr("transformer_zoo.train.trainer.train", refuse)
    line = cli_error(capsys, ["train", "--family", "encoder-decoder", "--out", tmp_path / "r"])
    assert line == f"transformer-zoo train: error: {message}"


# --- a classifier trained before runs recorded `extra.text_pairs` (69b2c7e, 2026-12-04) --
# pair_classifier_config.json: bf22a90's run on `s1<TAB>s2<TAB>label` (--columns s1,s2,label).
# A run of today's with the same command records the same config but for `text_pairs: true`,
# `data_digests` and four newer settings, all None.
PAIR_RUN = json.loads((OLD / "pair_classifier_config.json").read_text())
DIMENSIONS = ModelDimensions("EncoderOnlyClassifier", 25, 1, 2, 16, 32, 128, num_classes=2)


def _served(config: dict) -> ServedModel:
    return ServedModel(RunConfig.from_dict(config), DIMENSIONS, runner=None)


def _with_train(columns: list[str] | None, data: str | None = None) -> dict:
    """The old pair run's config with other `--columns`, or trained on other `data`."""
    config = copy.deepcopy(PAIR_RUN)
    settings = config["extra"]["train"]
    settings["columns"] = columns
    if data is not None:
        config["data"] = settings["data"] = data
        settings["test"] = None
    return config


def _classification_tsv(path: Path, pairs: bool) -> str:
    rows = [
        "\t".join([str(i % 2), f"text {i}", *([f"second {i}"] if pairs else [])]) for i in range(60)
    ]
    path.write_text("\n".join(rows) + "\n")
    return str(path)


def test_an_old_pair_run_reads_pairs_as_its_columns_say():
    assert "text_pairs" not in PAIR_RUN["extra"]
    served = _served(PAIR_RUN)
    assert served.reads_pairs is True
    with pytest.raises(InputError, match="trained on text pairs"):
        served.check_encoder_texts("classify", ["a warm film"])
    single = _served(_with_train(["sentence", "label"]))
    assert single.reads_pairs is False
    with pytest.raises(InputError, match="trained on single texts"):
        single.check_encoder_texts("classify", ["a warm film"], ["dull plot"])


@pytest.mark.parametrize("pairs", [True, False])
def test_an_old_run_without_columns_reads_pairs_as_its_data_holds_them(tmp_path, pairs):
    """Without --columns, the training file's rows (label, text[, text2]) tell it."""
    data = _classification_tsv(tmp_path / "train.tsv", pairs)
    config = _with_train(None, data)
    config["extra"]["train"]["test"] = str(tmp_path / "gone-test.tsv")  # the data alone tells
    served = _served(config)
    os.remove(data)  # worked out when the model loaded, not when a request asks
    assert served.reads_pairs is pairs


def test_an_old_run_on_the_builtin_task_reads_pairs():
    """builtin:dates-zh's classification task is a source and a candidate translation."""
    served = _served(_with_train(None, "builtin:dates-zh"))
    assert served.reads_pairs is True


def test_what_cannot_be_told_takes_both(tmp_path):
    """An imported checkpoint (no `extra.train`), or an old run whose data is gone."""
    imported = copy.deepcopy(PAIR_RUN)
    del imported["extra"]["train"]
    assert _served(imported).reads_pairs is None
    gone = str(tmp_path / "gone.tsv")
    assert not os.path.exists(gone)
    assert _served(_with_train(None, gone)).reads_pairs is None


# --- an export written before exports recorded their weights' digest (5c6b869, 2026-12-04)
# decoder_only_export: bf22a90's `export --format all --quantize int8 int4` of a decoder-only
# run, its config.json and its int8 copy's (the graphs, the SavedModel and the tokenizer are
# left out: nothing here reads them).
OLD_EXPORT = OLD / "decoder_only_export"


def _old_export(tmp_path: Path) -> Path:
    """The old export's config files, with stand-ins for the files they describe."""
    export = tmp_path / "export"
    shutil.copytree(OLD_EXPORT, export)
    for directory in ("int4", "saved_model"):
        (export / directory).mkdir()
        (export / directory / "stand-in").write_text("")
    for name in ("model.onnx", "genai_config.json", "tokenizer.model", "int8/model.onnx"):
        (export / name).write_text("")
    return export


def test_exporting_into_an_undigested_export_says_what_it_drops(tmp_path, caplog):
    """Its SavedModel and quantized copies cannot be known to be of the new weights: they
    go, as before, and a warning names them and why."""
    from transformer_zoo.export.staged_export import StagedExport

    export = _old_export(tmp_path)
    old = RunConfig.from_dict(json.loads((OLD_EXPORT / "config.json").read_text()))
    entry, dims = old.export["onnx"], ModelDimensions.from_dict(old.export["model"])
    old.export = {}
    with caplog.at_level("WARNING", logger="transformer_zoo.export"):
        with StagedExport(str(export), old) as staged:
            for name in ("model.onnx", "genai_config.json"):
                Path(staged.path(name)).write_text("new")
            staged.write_config("onnx", entry, dims, False, "a digest")
    assert not any((export / name).exists() for name in ("int4", "int8", "saved_model"))
    [warning] = [r.getMessage() for r in caplog.records if r.name == "transformer_zoo.export"]
    assert warning == (
        f"{export} holds an export written before 5c6b869 (2026-12-04), which records no "
        "digest of its weights, so its int4/, int8/, saved_model/ cannot be known to be of "
        "this model: they are removed, and only those that this command writes come back"
    )


@pytest.mark.parametrize("export_digested", [False, True])
def test_quantizing_over_an_undigested_copy_says_why_it_is_refused(tmp_path, export_digested):
    """The export records no digest (the old export and its copy): the export is named, and
    a copy made from it today would record none either; an export of today's with a copy
    from before: the copy is named."""
    from transformer_zoo.export.quantize import quantize_onnx

    export = _old_export(tmp_path)
    config = json.loads((export / "config.json").read_text())
    if export_digested:
        config["export"]["weights"] = "a digest"  # exported again by this version
    (export / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelDirectoryError) as refused:
        quantize_onnx(export, export / "int8", weights="int8", max_accuracy_drop=None)
    why = (
        "the copy records no digest of its weights (written before 5c6b869), so it cannot be "
        "known to be of these weights: delete it"
        if export_digested
        else f"{export} records no digest of its weights (an export written before 5c6b869), "
        "so the copy cannot be known to be of these weights: export the run again, or delete "
        "the copy"
    )
    assert str(refused.value) == (
        f"{export / 'int8'} holds an earlier int8 copy, but {why} (or choose another "
        "`out_dir`) to quantize again."
    )
