"""The attention pictures of a run are those of `ServedModel.translate`'s own decoding:
the same source mask, the same budget, the same tokens."""

import numpy as np
import pytest

import transformer_zoo.visualize.attention as attention
from tests.models.test_hf_checkpoints import CHECKPOINTS
from transformer_zoo.models.attention_weights import attention_weights
from transformer_zoo.models.hf.run import import_hf_run
from transformer_zoo.serving import load_served_model


@pytest.mark.slow  # an import and three decodes of Marian: 11 s
def test_an_imported_marian_run_is_drawn_as_translate_decodes_it(tmp_path, monkeypatch):
    """Marian's `</s>` is id 0: an `ids != 0` mask hid it from the picture and the
    picture's own translation; and the picture stopped at 48 tokens where `translate`
    goes on to the model's target length."""
    run = tmp_path / "marian"
    import_hf_run(CHECKPOINTS["marian"], run)
    served = load_served_model(run, "keras")
    drawn = {}
    draw_heads = attention.plot_attention_heads

    def keep(weights, source_tokens, target_tokens, path, **kwargs):
        drawn.update(weights=weights, source=source_tokens, target=target_tokens)
        return draw_heads(weights, source_tokens, target_tokens, path, **kwargs)

    monkeypatch.setattr(attention, "plot_attention_heads", keep)
    text = "Speak, speak."
    result = attention.draw_run_attention(
        str(run), text, str(tmp_path / "pictures"), model=served.runner.model
    )
    assert result["translation"] == served.translate([text])[0]

    special = served.config.special_ids
    source = served.prompt_ids([text])
    assert source[0][-1] == special["eos"] == 0 and drawn["source"][-1] == "<eos>"
    tokens = [int(t) for t in served.translate_ids(source).tokens[0]]
    if special["eos"] in tokens:
        tokens = tokens[: tokens.index(special["eos"]) + 1]
    mask = served.start_inputs(source)["encoder_padding_mask"]
    expected = attention_weights(
        served.runner.model, np.array(source), [[special["bos"]] + tokens[:-1]], mask
    )["cross"][-1][0]
    assert len(drawn["target"]) == len(tokens)
    np.testing.assert_allclose(drawn["weights"], expected, atol=1e-5)
    assert drawn["weights"][:, :, -1].min() > 0  # every head looks at `</s>` a little
    with pytest.raises(ValueError, match="is a file"):
        attention.draw_run_attention(str(run), text, str(tmp_path / "pictures" / "attention.png"))


def test_an_export_given_for_its_run_directory_is_named_so(family_artifacts, tmp_path):
    """It said only "lacks model.keras"."""
    from transformer_zoo.errors import ModelDirectoryError

    export_dir = family_artifacts("encoder-decoder").export_dir
    with pytest.raises(ModelDirectoryError, match="it is an export .* needs its run directory"):
        attention.draw_run_attention(str(export_dir), "the cat", str(tmp_path / "pictures"))


def test_a_source_longer_than_the_model_is_said_as_translate_says_it(
    family_artifacts, tmp_path, capsys
):
    """It named an internal argument: "`encoder_token_ids` holds a sequence of 811 tokens"."""
    from transformer_zoo.cli import main

    art = family_artifacts("encoder-decoder")
    text = " ".join(["cat"] * 400)
    argv = ["attention", str(art.run_dir), "--text", text, "--out", str(tmp_path / "p")]
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert "the source is" in error and "longer than the model's" in error, error
    assert "encoder_token_ids" not in error


@pytest.mark.parametrize("text", ["  ", "\u200b", "\x01\t"])
def test_a_blank_source_is_refused_as_translate_refuses_it(family_artifacts, tmp_path, text):
    """A source of zero-width or control characters drew the model writing on `[</s>]`
    alone ("vvvv…"), where `translate` refuses it (`is_blank`, the one rule)."""
    from transformer_zoo.serving import InputError
    from transformer_zoo.text import is_blank

    art = family_artifacts("encoder-decoder")
    assert is_blank(text)
    with pytest.raises(InputError, match="the source is empty"):
        load_served_model(art.export_dir).translate([text])
    with pytest.raises(ValueError, match="`text` is empty"):
        attention.draw_run_attention(str(art.run_dir), text, str(tmp_path / "p"))
