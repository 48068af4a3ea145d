"""The exporters' arguments, checked before anything is converted or written: a path or a
preset name for the model, arguments swapped, a tokenizer file name for the tokenizer, a
tokenizer with more tokens than the model's vocabulary, label names a model cannot take,
a tokenizer directory without the files, a negative tolerance."""

import logging

import keras
import pytest

from tests.artifacts import SMALL
from transformer_zoo.export import export_onnx, export_saved_model
from transformer_zoo.models import EncoderOnlyClassifier, from_preset
from transformer_zoo.run_directory import load_run_config
from transformer_zoo.serving import load_onnx
from transformer_zoo.text import train_tokenizer

TEXTS = ["the cat sat on the mat", "a dog sat on a log"] * 5
EXPORTERS = [export_onnx, pytest.param(export_saved_model, marks=pytest.mark.slow)]


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(TEXTS, 40)  # 21 tokens: a soft limit


def _model(family, vocabulary_size, **sizes):
    keras.utils.set_random_seed(0)
    options = dict(SMALL, max_length=16)
    return from_preset("tiny", family=family, vocabulary_size=vocabulary_size, **sizes, **options)


def _refused(exporter, match, out, *args, **kwargs):
    """`exporter(*args, **kwargs)` raises a one-line ValueError and writes nothing."""
    with pytest.raises(ValueError, match=match) as error:
        exporter(*args, **kwargs)
    assert "\n" not in str(error.value)
    assert not out.exists()
    return str(error.value)


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_a_path_or_preset_name_for_the_model_says_how_to_load_it(tmp_path, exporter, tokenizer):
    """`float32_model` had read `model.weights` first: AttributeError: 'str' object has
    no attribute 'weights'."""
    out = tmp_path / "out"
    for name in (str(tmp_path / "run"), "gpt2_small", tmp_path / "run"):
        message = _refused(exporter, r"^`model` must be a model, not a path", out, name, out)
        assert "load_run_model(path)" in message and "transformer-zoo export" in message
    _refused(exporter, "Received: model of type Sequential", out, keras.Sequential(), out)


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_swapped_or_misplaced_arguments_are_named(tmp_path, exporter, tokenizer):
    """They had raised TypeError "expected str, bytes or os.PathLike object, not
    Tokenizer" (swapped), AttributeError 'special_ids' (a file name for the tokenizer),
    or gone on to a validation that no difference can pass (atol=-1)."""
    model, out = _model("decoder-only", tokenizer.vocabulary_size), tmp_path / "out"
    _refused(exporter, r"^`out_dir` must be a directory.*out_dir of type Tokenizer$", out,
             model, tokenizer, out)  # fmt: skip
    _refused(exporter, "out_dir of type NoneType", out, model, None, tokenizer)
    file_name = str(tmp_path / "tokenizer.model")
    message = _refused(exporter, r"^`tokenizer` must be a tokenizer \(Tokenizer, ", out,
                       model, out, file_name)  # fmt: skip
    assert "load_tokenizers(directory)" in message and "tokenizer_dir=" in message
    _refused(exporter, r"^`target_tokenizer` must be a tokenizer", out, model, out, tokenizer,
             target_tokenizer=["x"])  # fmt: skip
    for atol in (-1, "1e-4", None):
        _refused(exporter, rf"^`atol` must be a number ≥ 0.*atol={atol!r}$", out, model, out,
                 tokenizer, atol=atol)  # fmt: skip
    _refused(exporter, "not both", out, model, out, tokenizer, tokenizer_dir=str(tmp_path))


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_a_tokenizer_larger_than_the_models_vocabulary_is_refused(tmp_path, exporter, tokenizer):
    """Its ids past the model's have no row: the export had succeeded and serving failed
    on the first text with one ("`token_ids` must lie in [0, 10)"). The target tokenizer
    of an encoder-decoder is held to the output vocabulary."""
    out = tmp_path / "out"
    small = _model("decoder-only", 10)
    message = _refused(exporter, r"^`tokenizer` has 21 tokens, more than the model's "
                       r"vocabulary_size of 10", out, small, out, tokenizer)  # fmt: skip
    assert "vocabulary_size=21" in message
    other = train_tokenizer(["zz yy xx"] * 5, 40)
    pair = _model(
        "encoder-decoder",
        tokenizer.vocabulary_size,
        target_vocabulary_size=other.vocabulary_size - 1,
    )
    _refused(exporter, r"^`target_tokenizer` has \d+ tokens, more than the model's "
             r"target_vocabulary_size", out, pair, out, tokenizer, other)  # fmt: skip
    shared = _model("encoder-decoder", tokenizer.vocabulary_size, target_vocabulary_size=10)
    _refused(exporter, r"^`tokenizer` has 21 tokens, .*target_vocabulary_size of 10", out,
             shared, out, tokenizer)  # fmt: skip


def test_a_tokenizer_smaller_than_the_models_vocabulary_exports_with_a_warning(
    tmp_path, tokenizer, caplog
):
    """A vocabulary padded to a multiple (nanoGPT's 50304 rows for GPT-2's 50257
    tokens) leaves the model more rows than the tokenizer has tokens, as `import-hf`
    allows: it exports and serves, and a warning says the ids past the tokenizer's have
    no text. An encoder-only model only reads: no warning."""
    padded = _model("decoder-only", 32)
    with caplog.at_level(logging.WARNING, logger="transformer_zoo.export"):
        export_onnx(padded, tmp_path / "padded", tokenizer)
    assert "ids from 21 on, which it may write, have no text" in caplog.text
    served = load_onnx(tmp_path / "padded")
    assert served.dims.vocabulary_size == 32 and served.tokenizer.vocabulary_size == 21
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="transformer_zoo.export"):
        export_onnx(_model("encoder-only", 32), tmp_path / "reader", tokenizer)
    assert not caplog.text


def test_label_names_a_model_cannot_take_are_refused(tmp_path, tokenizer):
    """A str had given one label per character ("ab": 'a' and 'b'), and label names
    for a decoder-only model or beside a config had been dropped without a word."""
    out = tmp_path / "out"
    backbone = _model("encoder-only", tokenizer.vocabulary_size)
    classifier = EncoderOnlyClassifier(backbone, 2)
    _refused(export_onnx, r"^`label_names` must be a list of names, one per class\. "
             r"Received: a single str 'ab'$", out, classifier, out, tokenizer, label_names="ab")  # fmt: skip
    decoder = _model("decoder-only", tokenizer.vocabulary_size)
    _refused(export_onnx, "this model is a DecoderOnly, no classifier", out, decoder, out,
             tokenizer, label_names=["a", "b"])  # fmt: skip
    export_onnx(classifier, tmp_path / "named", tokenizer, label_names=("no", "yes"))
    config = load_run_config(tmp_path / "named")
    assert config.label_names == ["no", "yes"]
    _refused(export_onnx, "a `config` is given", out, classifier, out, tokenizer,
             config=config, label_names=["a", "b"])  # fmt: skip


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_a_tokenizer_directory_without_the_files_is_refused_before_anything_is_written(
    tmp_path, exporter
):
    """`copy_tokenizers` had skipped the missing files: config.json named
    tokenizer.model, no file was written, and `load_onnx` said only then that it
    "lacks the tokenizer file(s)"."""
    model, out = _model("decoder-only", 40), tmp_path / "out"
    _refused(exporter, r"'.*nowhere' is not a directory: .* tokenizer\.model\.$", out,
             model, out, tokenizer_dir=str(tmp_path / "nowhere"))  # fmt: skip
    (tmp_path / "run").mkdir()
    _refused(exporter, r"lacks the tokenizer file\(s\) tokenizer\.model\.$", out, model, out,
             tokenizer_dir=str(tmp_path / "run"))  # fmt: skip
