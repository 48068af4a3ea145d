"""`transformer-zoo export|generate|translate|embed|classify`: inputs from arguments, a
file or stdin; text or JSONL out; one-line errors with exit code 2."""

import io
import json
import shutil

import numpy as np
import pytest

from tests.helpers import cli_error
from transformer_zoo.cli import main
from transformer_zoo.generation import BeamSearch, Greedy
from transformer_zoo.run_directory import load_run_config
from transformer_zoo.serving import InputError, load_onnx
from transformer_zoo.text import is_blank


def _run(capsys, *argv, stdin=None, monkeypatch=None):
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_export_command_writes_both_formats_from_a_run_directory(
    family_artifacts, tmp_path, capsys
):
    """`--plain` here; the fused default is what every other test serves."""
    art = family_artifacts("encoder-only")
    argv = ["export", art.run_dir, "--format", "all", "--out", tmp_path, "--plain"]
    code, out, err = _run(capsys, *argv)
    assert code == 0
    # The stages on stderr, the report alone on stdout.
    assert "transformer-zoo export: model.onnx: converting with tf2onnx" in err
    assert "saved_model: largest difference from the model" in err
    report = json.loads(out)
    assert report["onnx"]["model.onnx"]["max_abs_diff"] <= 1e-4
    assert (tmp_path / "saved_model" / "saved_model.pb").is_file()
    config = load_run_config(tmp_path)
    assert config.label_names == art.config.label_names and config.seed == 0
    assert {"onnx", "saved_model", "model"} <= set(config.export)
    assert config.export["onnx"]["graph_kind"] == "plain"
    texts = ["dogs", "the cat"]
    np.testing.assert_allclose(  # plain (here) and fused (the artifacts' export)
        load_onnx(tmp_path).embed(texts), load_onnx(art.export_dir).embed(texts), atol=1e-5
    )


def test_output_is_utf8_whatever_the_locale_says(family_artifacts, monkeypatch):
    """Under `PYTHONIOENCODING=ascii` or a Latin-1 locale, an input's é in JSONL (or a
    Chinese translation) was a UnicodeEncodeError traceback with nothing written."""
    art = family_artifacts("decoder-only")
    written = io.BytesIO()
    stdout = io.TextIOWrapper(written, encoding="ascii")
    monkeypatch.setattr("sys.stdout", stdout)
    argv = ["generate", "café", "--model", art.export_dir, "--max-new-tokens", 2]
    assert main([str(a) for a in [*argv, "--format", "jsonl"]]) == 0
    stdout.flush()
    assert json.loads(written.getvalue().decode("utf-8"))["input"] == "café"


@pytest.mark.parametrize("engine", ["onnx", "saved_model", "keras"])
def test_generate_prints_the_same_text_on_every_engine(family_artifacts, capsys, engine):
    art = family_artifacts("decoder-only")
    directory = art.run_dir if engine == "keras" else art.export_dir
    argv = ["generate", "the cat", "dogs", "--model", directory, "--engine", engine]
    code, out, _ = _run(capsys, *argv, "--max-new-tokens", 6)
    assert code == 0
    assert out.splitlines() == load_onnx(art.export_dir).generate(["the cat", "dogs"], 6)


def test_translate_reads_a_file_and_writes_jsonl(family_artifacts, tmp_path, capsys):
    art = family_artifacts("encoder-decoder")
    sources = ["March 5, 2021", "on the fifth of March"]
    (tmp_path / "in.txt").write_text("\n".join(sources) + "\n", encoding="utf-8")
    argv = ["translate", "--model", art.export_dir, "--input", tmp_path / "in.txt"]
    code, out, _ = _run(capsys, *argv, "--format", "jsonl", "--strategy", "beam", "--num-beams", 2)
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    expected = load_onnx(art.export_dir).translate(sources, search=BeamSearch(num_beams=2))
    assert [r["input"] for r in rows] == sources
    assert [r["translation"] for r in rows] == expected


def test_translate_jsonl_says_why_each_output_ended_and_skips_blank_lines(
    family_artifacts, tmp_path, capsys
):
    """`--format jsonl` wrote `{"input", "translation"}` only: a translation cut at
    --max-new-tokens read as a finished one. And a line of a zero-width space went to the
    model (its source `[</s>]` alone), where a line of spaces is answered with an empty
    line: both are blank (`is_blank`) now."""
    art = family_artifacts("encoder-decoder")
    lines = ["March 5, 2021", "\u200b", "dogs", "  ", "on the fifth of March"]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    argv = ["translate", "--model", art.export_dir, "--input", tmp_path / "in.txt"]
    served = load_onnx(art.export_dir)
    eos = served.config.special_ids["eos"]
    for budget in (3, None):
        extra = [] if budget is None else ["--max-new-tokens", budget]
        code, out, _ = _run(capsys, *argv, "--format", "jsonl", *extra)
        assert code == 0
        rows = [json.loads(line) for line in out.splitlines()]
        assert [r["input"] for r in rows] == lines
        for line, row in zip(lines, rows, strict=True):
            if is_blank(line):
                assert row == {"input": line, "translation": "", "finish_reason": "stop"}
                continue
            tokens = served.translate_ids(served.prompt_ids(line), budget).tokens[0]
            assert row["translation"] == served.output_text(tokens)
            assert row["finish_reason"] == ("stop" if eos in tokens.tolist() else "length")


@pytest.mark.parametrize(
    "flags, search",
    [
        (["--strategy", "beam", "--num-beams", 2, "--early-stopping", "never", "--forced-eos"],
         BeamSearch(num_beams=2, early_stopping="never", forced_eos=True)),
        (["--forced-eos"], Greedy(forced_eos=True)),
    ],
)  # fmt: skip
def test_translate_takes_the_search_options_of_transformers_generate(
    family_artifacts, capsys, flags, search
):
    art = family_artifacts("encoder-decoder")
    sources = ["March 5, 2021", "on the fifth of March"]
    argv = ["translate", *sources, "--model", art.export_dir, "--max-new-tokens", 3, *flags]
    code, out, _ = _run(capsys, *argv)
    assert code == 0
    assert out.splitlines() == load_onnx(art.export_dir).translate(sources, 3, search=search)


def test_embed_reads_stdin_and_writes_an_npy_file(family_artifacts, tmp_path, capsys, monkeypatch):
    art = family_artifacts("encoder-only")
    texts = ["dogs", "the cat sat", "", "a quick brown fox"]
    out_file = tmp_path / "vectors.npy"
    argv = ["embed", "--model", art.export_dir, "--output", out_file, "--batch-size", 3]
    code, _, _ = _run(capsys, *argv, stdin="\n".join(texts) + "\n", monkeypatch=monkeypatch)
    assert code == 0
    vectors = np.load(out_file)
    assert vectors.dtype == np.float32 and vectors.shape == (4, 32)
    np.testing.assert_allclose(vectors, load_onnx(art.export_dir).embed(texts), atol=1e-6)
    # A directory as --output is refused before the model runs, by its own name.
    code, _, err = _run(capsys, "embed", "dogs", "--model", art.export_dir, "--output", tmp_path)
    assert code == 2 and f"--output {tmp_path} is a directory" in err


def test_embed_keras_engine_on_a_wordpiece_run_directory(wordpiece_artifacts, tmp_path, capsys):
    art = wordpiece_artifacts
    (tmp_path / "in.txt").write_text("The cat sat.\ndogs\n", encoding="utf-8")
    for engine, directory in (("keras", art.run_dir), ("onnx", art.export_dir)):
        argv = ["embed", "--model", directory, "--input", tmp_path / "in.txt"]
        code, _, _ = _run(capsys, *argv, "--output", tmp_path / f"{engine}.npy", "--engine", engine)
        assert code == 0
    np.testing.assert_allclose(
        np.load(tmp_path / "keras.npy"), np.load(tmp_path / "onnx.npy"), atol=1e-5
    )


def test_classify_prints_labels_and_jsonl_probabilities(family_artifacts, capsys):
    art = family_artifacts("encoder-only")
    code, out, _ = _run(capsys, "classify", "dogs", "the cat", "--model", art.export_dir)
    assert code == 0
    labels = [line.split("\t")[0] for line in out.splitlines()]
    assert len(labels) == 2 and set(labels) <= {"negative", "positive"}
    code, out, _ = _run(capsys, "classify", "dogs", "--model", art.export_dir, "--format", "jsonl")
    row = json.loads(out)
    assert row["label"] == labels[0] and sum(row["probabilities"].values()) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["generate", "x", "--model", "{missing}"], "no such directory"),
        (["translate", "x", "--model", "{decoder}"], "needs an encoder-decoder model"),
        (["generate", "x", "--model", "{decoder}", "--max-new-tokens", "500"], "context"),
        (["generate", "--model", "{decoder}", "--input", "{missing}"], "cannot read the input"),
        (["generate", "x", "--model", "{decoder}", "--engine", "keras"], "lacks model.keras"),
        (["embed", "x", "--model", "{decoder}", "--batch-size", "0"], "embed"),
        (["export", "{missing}", "--out", "{missing}"], "no such directory"),
        (["export", "{decoder}", "--out", "{missing}", "--no-simplify"], "apply to --plain"),
    ],
)
def test_bad_input_is_one_line_with_exit_code_2(family_artifacts, tmp_path, capsys, argv, message):
    names = {
        "missing": tmp_path / "missing",
        "decoder": family_artifacts("decoder-only").export_dir,
    }
    assert message in cli_error(capsys, [a.format(**names) for a in argv])


def test_generate_warns_when_a_prompt_holds_text_the_tokenizer_does_not_know(
    family_artifacts, capsys
):
    """A char tokenizer read "ΩΩΩ" as `<bos><unk>`, silently."""
    art = family_artifacts("decoder-only")
    argv = ["generate", "the cat", "ΩΩΩ", "--model", art.export_dir, "--max-new-tokens", "2"]
    code, _, err = _run(capsys, *argv)
    assert code == 0
    assert "1 of 2 inputs hold text the tokenizer does not know" in err
    code, _, err = _run(capsys, "generate", "the cat", "--model", art.export_dir, "--max-new-tokens", "2")  # fmt: skip
    assert code == 0 and "does not know" not in err


@pytest.mark.parametrize("reads_pairs", [True, False])
def test_classify_takes_pairs_exactly_where_the_run_was_trained_on_them(
    family_artifacts, tmp_path, capsys, monkeypatch, reads_pairs
):
    """A run records whether it was trained on text pairs (`extra.text_pairs`); a pair
    model scored a lone text, and a single-text model a pair, with exit 0 and no word
    (the server refuses both). The same weights whose config says nothing take both, and
    the refusals name what to send; an encoder call on another family names the command."""
    art = family_artifacts("encoder-only")
    directory = tmp_path / "export"
    shutil.copytree(art.export_dir, directory)
    config = json.loads((directory / "config.json").read_text())
    config["extra"] = {**(config.get("extra") or {}), "text_pairs": reads_pairs}
    (directory / "config.json").write_text(json.dumps(config))
    recorded, unsaid = load_onnx(directory), load_onnx(art.export_dir)
    texts, pairs = ["the cat", "dogs"], ["a fox", "it is late"]
    if reads_pairs:
        assert recorded.classify(texts, pairs) == unsaid.classify(texts, pairs)
        with pytest.raises(InputError, match="trained on text pairs: give each text its second"):
            recorded.classify(texts)
        code, _, err = _run(capsys, "classify", *texts, "--model", directory)
        assert code == 2 and "--pairs" in err
    else:
        assert recorded.classify(texts) == unsaid.classify(texts)
        with pytest.raises(InputError, match="trained on single texts: it takes no"):
            recorded.classify(texts, pairs)
        stdin = "".join(f"{a}\t{b}\n" for a, b in zip(texts, pairs, strict=True))
        code, _, err = _run(
            capsys,
            "classify",
            "--pairs",
            "--model",
            directory,
            stdin=stdin,
            monkeypatch=monkeypatch,
        )
        assert code == 2 and "takes no `text_pairs`" in err
    code, _, err = _run(
        capsys, "embed", "dogs", "--model", family_artifacts("decoder-only").export_dir
    )
    assert code == 2 and "`embed` needs an encoder-only model" in err
