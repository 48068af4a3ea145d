"""Edge cases of `quantize_onnx` and `transformer-zoo export --quantize`: each bad request
is refused in one line before anything is written."""

import json
import os
import shutil

import onnx
import pytest

from transformer_zoo.cli import main
from transformer_zoo.data import Task
from transformer_zoo.data.examples import ClassificationExample
from transformer_zoo.export import quantize_onnx
from transformer_zoo.export.run_export import export_run
from transformer_zoo.run_directory import load_run_config, save_run_config
from transformer_zoo.serving import ModelDirectoryError


def test_a_plain_export_is_not_given_int4_weights(family_artifacts, plain_export, tmp_path, capsys):
    """int4 (`MatMulNBits`, com.microsoft) was written into a `--plain` export, whose graphs
    promise standard ONNX operators only; int8 keeps to them."""
    export_dir, _ = plain_export("encoder-only")
    assert load_run_config(export_dir).export["onnx"]["graph_kind"] == "plain"
    with pytest.raises(ValueError, match="MatMulNBits.*--plain"):
        quantize_onnx(export_dir, tmp_path / "q4", max_accuracy_drop=None, weights="int4")
    assert os.listdir(tmp_path) == []
    quantize_onnx(export_dir, tmp_path / "q8", max_accuracy_drop=None, weights="int8")
    domains = {n.domain for n in onnx.load(tmp_path / "q8" / "model.onnx").graph.node}
    assert domains <= {"", "ai.onnx"}  # standard operators only

    run_dir = family_artifacts("encoder-only").run_dir
    capsys.readouterr()  # what building the fixtures printed
    argv = ["export", run_dir, "--format", "onnx", "--plain", "--out", tmp_path / "e"]
    code = main([str(a) for a in argv] + ["--quantize", "int4", "--max-accuracy-drop", "none"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and "MatMulNBits" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "e").exists()  # refused before the float32 export
    with pytest.raises(ValueError, match="MatMulNBits"):  # from Python too
        export_run(run_dir, tmp_path / "e", graphs="plain", quantize="int4")
    assert not (tmp_path / "e").exists()


@pytest.mark.parametrize("drop", [True, "0.1", float("nan"), -0.5])
def test_max_accuracy_drop_must_be_a_fraction(family_artifacts, tmp_path, drop):
    """`True` passed as 1 (accept any drop) and a string raised a bare TypeError."""
    art = family_artifacts("encoder-only")
    with pytest.raises(ValueError, match="`max_accuracy_drop` must be in"):
        quantize_onnx(art.export_dir, tmp_path / "q", max_accuracy_drop=drop)
    with pytest.raises(ValueError, match="`examples` must be"):
        quantize_onnx(art.export_dir, tmp_path / "q", max_accuracy_drop=None, examples=True)
    assert os.listdir(tmp_path) == []


def _run_on(art, tmp_path, test_file) -> str:
    """A copy of the encoder-only run whose data is a small file, its test split `test_file`."""
    run_dir = tmp_path / "run"
    shutil.copytree(art.run_dir, run_dir)
    data = tmp_path / "data.tsv"
    data.write_text("1\tthe cat sat\n0\ta dog ran\n1\tthe cat ran\n0\ta dog sat\n")
    config = load_run_config(run_dir)
    config.data, config.seed = str(data), 0
    config.extra["train"] = {"test": str(test_file)}
    save_run_config(run_dir, config)
    return str(run_dir)


def test_an_unscorable_test_split_is_refused_before_the_export(
    family_artifacts, tmp_path, capsys, monkeypatch
):
    """`export --quantize` checked only that the run names data: with a test split it
    cannot read, it wrote the float32 export, then failed (exit 2) when scoring."""
    art = family_artifacts("encoder-only")
    empty = tmp_path / "test.tsv"
    empty.write_text("")
    run_dir = _run_on(art, tmp_path, empty)
    capsys.readouterr()  # what building the fixtures printed
    argv = ["export", run_dir, "--format", "onnx", "--out", tmp_path / "e", "--quantize", "int8"]
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and "holds no examples" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "e").exists()

    # A task read with no test examples (a data set cut too small) is named as such.
    task = Task("x", "encoder-only", [ClassificationExample("1", "the cat")], [], [])
    monkeypatch.setattr("transformer_zoo.export.quantize.run_task", lambda config, test: task)
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert code == 2 and "test split of" in err and "--max-accuracy-drop none" in err
    assert not (tmp_path / "e").exists()
    export_dir = tmp_path / "export"
    shutil.copytree(art.export_dir, export_dir)
    config = load_run_config(export_dir)
    config.data = load_run_config(run_dir).data  # an export that names a task
    save_run_config(export_dir, config)
    with pytest.raises(ModelDirectoryError, match="test split of .* is empty"):
        quantize_onnx(export_dir, tmp_path / "q")
    assert not (tmp_path / "q").exists()


def test_a_refused_copy_names_the_copies_that_were_written(
    family_artifacts, tmp_path, capsys, monkeypatch
):
    """With `--quantize int8 int4`, an int4 copy refused after the int8 one was written
    said "Nothing was written" and named the float32 export alone."""
    from transformer_zoo.export import QuantizationError
    from transformer_zoo.export import run_export as module

    real = module.quantize_onnx

    def int4_refused(source, destination, **kwargs):
        if kwargs["weights"] == "int4":
            raise QuantizationError("int4 exact_match is 0.1 against 0.9: a drop of 0.8.")
        return real(source, destination, **kwargs)

    run_dir = family_artifacts("encoder-only").run_dir
    capsys.readouterr()  # what building the fixtures printed
    out_dir = tmp_path / "e"
    argv = ["export", run_dir, "--format", "onnx", "--out", out_dir, "--quantize", "int8", "int4"]
    monkeypatch.setattr(module, "quantize_onnx", int4_refused)
    code = main([str(a) for a in argv] + ["--max-accuracy-drop", "none"])
    err = capsys.readouterr().err.splitlines()[-1]
    assert code == 1 and (out_dir / "int8" / "model.onnx").is_file()
    assert not (out_dir / "int4").exists()
    assert f"the int8 copy in {out_dir / 'int8'}" in err and "int4" not in err.split(")")[-1]


def test_a_refused_int8_leaves_int4_tried_and_the_earlier_copies_of_these_weights(
    family_artifacts, tmp_path, capsys, monkeypatch
):
    """Re-exporting a run with `--quantize int8` removed both earlier copies as the new
    ONNX files moved in; int8 was then refused and the export held neither (nor did an
    interrupted re-export). A refused int8 also stopped int4 from being tried."""
    from transformer_zoo.export import QuantizationError
    from transformer_zoo.export import run_export as module

    run_dir = family_artifacts("encoder-only").run_dir
    capsys.readouterr()
    out_dir = tmp_path / "e"
    argv = ["export", run_dir, "--format", "onnx", "--out", out_dir, "--quantize", "int8", "int4"]
    argv = [str(a) for a in argv] + ["--max-accuracy-drop", "none"]
    assert main(argv) == 0
    earlier = {w: (out_dir / w / "model.onnx").read_bytes() for w in ("int8", "int4")}
    capsys.readouterr()

    real, tried = module.quantize_onnx, []

    def int8_refused(source, destination, **kwargs):
        tried.append(kwargs["weights"])
        if kwargs["weights"] == "int8":
            raise QuantizationError("int8 accuracy is 0.1 against 0.9: a drop of 0.8.")
        return real(source, destination, **kwargs)

    monkeypatch.setattr(module, "quantize_onnx", int8_refused)
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert tried == ["int8", "int4"]
    assert (out_dir / "int8" / "model.onnx").read_bytes() == earlier["int8"]  # kept
    assert (out_dir / "int4" / "quantization.json").is_file()  # written again
    last = err.splitlines()[-1]
    assert f"the int4 copy in {out_dir / 'int4'}" in last
    assert f"the earlier int8 copy of these weights in {out_dir / 'int8'} stays" in last
    assert set(json.loads(out)) == {"onnx", "int4"}  # the report of what was written

    # Only int8 asked for, and refused: int4 (not asked for) stays as it was.
    int4 = (out_dir / "int4" / "model.onnx").read_bytes()
    assert main(argv[:-4] + ["int8", "--max-accuracy-drop", "none"]) == 1
    assert (out_dir / "int4" / "model.onnx").read_bytes() == int4
    assert (out_dir / "int8" / "model.onnx").read_bytes() == earlier["int8"]


def test_copies_of_other_weights_go_when_a_new_onnx_export_moves_in(family_artifacts, tmp_path):
    """The quantized copies stay only beside an export of the same weights."""
    import dataclasses

    import keras

    from transformer_zoo.export import export_onnx
    from transformer_zoo.models.saving import load_run_model

    art = family_artifacts("encoder-only")
    out_dir = tmp_path / "e"
    export_run(art.run_dir, out_dir, ("onnx",), quantize="int8", max_accuracy_drop=None)
    assert (out_dir / "int8").is_dir()
    model = load_run_model(art.run_dir)
    model.set_weights([w + 0.01 for w in model.get_weights()])  # the same run, retrained
    config = load_run_config(out_dir)
    export_onnx(model, out_dir, config=dataclasses.replace(config, export={}))
    assert not (out_dir / "int8").exists()
    keras.backend.clear_session()


def test_flags_that_would_be_ignored_are_refused(family_artifacts, tmp_path, capsys):
    run_dir = str(family_artifacts("encoder-only").run_dir)
    out = str(tmp_path / "e")
    for extra, message in [
        (["--format", "saved_model", "--opset", "18"], "--plain and --opset apply to ONNX"),
        (["--format", "saved_model", "--plain"], "--plain and --opset apply to ONNX"),
        (["--max-accuracy-drop", "0.5"], "apply with --quantize"),
        (["--max-accuracy-drop", "none"], "apply with --quantize"),
        (["--quantize-examples", "10"], "apply with --quantize"),
    ]:
        assert main(["export", run_dir, "--out", out, *extra]) == 2
        assert message in capsys.readouterr().err
    assert not os.path.exists(out)


def test_copies_of_the_other_graph_kind_go_and_a_copy_is_no_export_target(
    family_artifacts, tmp_path, capsys
):
    """A `--plain` export over a fused one kept the fused int8 copy (com.microsoft
    operators beside a plain graph); exporting into a copy replaced its int8 graph with
    float32 files under its name, and the saved_model engine's refusal advised it."""
    from transformer_zoo.generation.runners import open_runner

    art = family_artifacts("encoder-only")
    out_dir = tmp_path / "e"
    export_run(art.run_dir, out_dir, ("onnx",), quantize="int8", max_accuracy_drop=None)
    copy = out_dir / "int8"
    kinds = {n.domain for n in onnx.load(copy / "model.onnx").graph.node}
    assert "com.microsoft" in kinds  # the fused graph's copy
    before = (copy / "model.onnx").read_bytes()
    code = main(["export", str(art.run_dir), "--format", "onnx", "--out", str(copy)])
    assert code == 2 and f"is the int8 copy of the export in {out_dir}" in capsys.readouterr().err
    assert (copy / "model.onnx").read_bytes() == before
    with pytest.raises(ModelDirectoryError, match=f"engine serves the export in {out_dir}"):
        open_runner(str(copy), load_run_config(copy), "saved_model")
    # A copy written elsewhere (`quantize_onnx`'s own out_dir) names no wrong parent.
    elsewhere = tmp_path / "copies" / "m-int8"
    quantize_onnx(out_dir, elsewhere, max_accuracy_drop=None)
    with pytest.raises(ModelDirectoryError, match="serves the export it was quantized from"):
        open_runner(str(elsewhere), load_run_config(elsewhere), "saved_model")
    export_run(art.run_dir, out_dir, ("onnx",), graphs="plain")
    assert load_run_config(out_dir).export["onnx"]["graph_kind"] == "plain"
    assert not copy.exists()  # the same weights, but fused graphs: no copy of this export
