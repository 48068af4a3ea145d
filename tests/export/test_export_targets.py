"""`export --out` never damages what is there: another run, an export of another run, a
file or a directory of other files are refused before the model loads; an export of the
same run takes the new files."""

import shutil

import pytest

from tests.models.test_hf_checkpoints import CHECKPOINTS
from transformer_zoo import cli
from transformer_zoo.export.run_export import export_run
from transformer_zoo.models.hf.run import import_hf_run
from transformer_zoo.run_directory import load_run_config


def _snapshot(directory):
    return {p.relative_to(directory): p.read_bytes() for p in directory.rglob("*") if p.is_file()}


def test_an_export_refuses_to_overwrite_another_run_or_its_export(family_artifacts, tmp_path):
    decoder, translator = family_artifacts("decoder-only"), family_artifacts("encoder-decoder")
    other_run = tmp_path / "other-run"
    shutil.copytree(translator.run_dir, other_run)
    other_export = tmp_path / "other-export"
    shutil.copytree(translator.export_dir, other_export)
    a_file = tmp_path / "a-file"
    a_file.write_text("mine")
    stranger = tmp_path / "stranger"
    stranger.mkdir()
    (stranger / "notes.txt").write_text("mine")
    for out, message in (
        (other_run, "holds a run"),
        (other_export, "holds an export of another run"),
        (a_file, "is a file"),
        (stranger, "holds no export of ours"),
    ):
        before = _snapshot(out) if out.is_dir() else a_file.read_bytes()
        for formats in (("onnx",), ("hf",)):
            with pytest.raises(ValueError, match=message if formats == ("onnx",) else "directory"):
                export_run(decoder.run_dir, out, formats=formats)
        assert (_snapshot(out) if out.is_dir() else a_file.read_bytes()) == before


@pytest.mark.slow  # test_user_exports checks the same weights keep both formats
def test_an_export_of_the_same_run_is_written_again(family_artifacts, tmp_path):
    decoder = family_artifacts("decoder-only")
    out = tmp_path / "export"
    export_run(decoder.run_dir, out, formats=("onnx",))
    export_run(decoder.run_dir, out, formats=("saved_model",))  # adds a format
    assert set(load_run_config(out).export) >= {"onnx", "saved_model"}


def test_the_command_names_the_directory_in_one_line(family_artifacts, tmp_path, capsys):
    run = family_artifacts("decoder-only").run_dir
    (tmp_path / "a-file").write_text("mine")
    code = cli.main(["export", str(run), "--format", "onnx", "--out", str(tmp_path / "a-file")])
    err = capsys.readouterr().err
    assert code == 2 and f"{tmp_path / 'a-file'} is a file" in err and "Traceback" not in err


def test_evaluate_refuses_an_export_of_another_run(family_artifacts, tmp_path):
    from transformer_zoo.evaluation.evaluate import evaluate_directory

    decoder = family_artifacts("decoder-only")
    gpt2_run, gpt2_export = tmp_path / "gpt2", tmp_path / "gpt2-export"
    import_hf_run(CHECKPOINTS["gpt2"], gpt2_run)
    export_run(gpt2_run, gpt2_export, formats=("onnx",))
    with pytest.raises(ValueError, match="is an export of another run"):
        evaluate_directory(str(decoder.run_dir), engine="onnx", model=str(gpt2_export))


@pytest.mark.filterwarnings("ignore")  # layers without a quantized form (LayerNorm, ...)
@pytest.mark.parametrize("mode", ["int8", "float8"])
def test_a_model_that_keras_quantized_is_refused_before_anything_is_written(mode, tmp_path):
    """The exporters read its int8 weights as float32 ones: the ONNX validation failed by
    1.2e3 with advice to try the plain graphs."""
    from transformer_zoo.export import export_onnx, export_saved_model
    from transformer_zoo.export.hf import export_hf
    from transformer_zoo.models import DecoderOnly

    model = DecoderOnly(50, num_layers=1, num_heads=2, hidden_dim=32, intermediate_dim=64)
    model.quantize(mode)
    hf = lambda model, out: export_hf(model, out, config=None, tokenizer_dir=None)  # noqa: E731
    for export in (export_onnx, export_saved_model, hf):
        with pytest.raises(ValueError, match="export the model before quantizing it"):
            export(model, tmp_path / "out")
        assert not (tmp_path / "out").exists()
