"""The SavedModel export's checks of its own signatures (`signature_checks`): `generate`'s
tokens against the model's greedy decoding (an export whose loop differs fails and leaves
nothing; a different token is accepted only at a tie within `atol`), and a masked LM's
`masked_lm` signature, which predicts at `mask_positions` as the Keras model does."""

import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.artifacts import SMALL, spread_embeddings
from transformer_zoo.export import ExportError, export_saved_model
from transformer_zoo.export.saved_model import export as saved_model_export
from transformer_zoo.export.saved_model.in_graph_greedy import cached_greedy
from transformer_zoo.export.saved_model.signature_checks import check_generate, check_masked_lm
from transformer_zoo.generation import generate
from transformer_zoo.models import EncoderOnlyMaskedLM, from_preset
from transformer_zoo.models.family import dimensions_of
from transformer_zoo.text import pair_ids

SPECIAL_IDS = {"pad": 0, "unk": 1, "bos": 2, "eos": 3}  # `make_config`'s without a tokenizer


def _model(family):
    keras.utils.set_random_seed(0)
    model = from_preset("tiny", family=family, vocabulary_size=40, max_length=16, **SMALL)
    spread_embeddings(model)
    return model


def _unaligned(ids, mask, xp):  # a `generate` that decodes right-padded prompts as given
    return ids, mask


def _off_by_one(*args):  # a `generate` whose tokens are each one id too high
    return cached_greedy(*args) + 1


@pytest.mark.parametrize(
    "family, name, defect",
    [
        ("decoder-only", "left_align", _unaligned),
        pytest.param("encoder-decoder", "cached_greedy", _off_by_one, marks=pytest.mark.slow),
    ],
)
def test_an_export_whose_generate_differs_from_greedy_decoding_fails_and_leaves_nothing(
    tmp_path, monkeypatch, family, name, defect
):
    """The step graphs and `serving_default` are right; only `generate` is not: the
    export compares its tokens with the Keras model's greedy decoding and fails."""
    monkeypatch.setattr(saved_model_export, name, defect)
    with pytest.raises(ExportError, match="signature 'generate': the right-padded prompt"):
        export_saved_model(_model(family), tmp_path / "export")
    assert not [p for p in (tmp_path / "export").rglob("*")]  # no SavedModel, no staging


def _runner_up(model, prompt):
    """The second most likely first token after `prompt`, and how far its logit is from
    the best one's: the Keras model's forward pass."""
    ids = np.asarray(prompt)[None]
    logits = np.asarray(model({"token_ids": ids, "padding_mask": np.ones_like(ids)}))[0, -1]
    best, second = np.argsort(logits)[::-1][:2]
    return int(second), float(logits[best] - logits[second])


def test_the_generate_check_accepts_another_token_only_at_a_tie_within_atol():
    """A signature that decodes greedily (with the cache) but picks the runner-up as row
    0's first token: accepted when the gap between the two logits is within `atol`
    (rounding may break such a tie either way), else not."""
    model = _model("decoder-only")
    dims = dimensions_of(model)
    seen = {}

    def runner_up_first(input_ids, attention_mask, max_new_tokens):
        ids, mask = input_ids.numpy(), attention_mask.numpy().astype(bool)
        prompts = [row[keep] for row, keep in zip(ids, mask, strict=True)]
        tokens = generate(model, prompts, int(max_new_tokens), eos_id=SPECIAL_IDS["eos"]).tokens
        tokens[0, 0], seen["gap"] = _runner_up(model, prompts[0])
        return {"tokens": tf.constant(tokens)}

    with pytest.raises(ExportError, match=re.escape("first difference at token 0")):
        check_generate(runner_up_first, model, "decoder-only", SPECIAL_IDS, dims, atol=1e-4)
    assert seen["gap"] > 1e-4
    # Only row 0's first token is checked past a tie: the rest may then differ.
    check_generate(runner_up_first, model, "decoder-only", SPECIAL_IDS, dims, seen["gap"] * 1.01)


@pytest.fixture(scope="module")
def masked_lm_export(tmp_path_factory):
    keras.utils.set_random_seed(0)
    backbone = from_preset(
        "tiny", family="encoder-only", vocabulary_size=40, max_length=16, **SMALL
    )
    model = EncoderOnlyMaskedLM(backbone)
    spread_embeddings(model)
    out = tmp_path_factory.mktemp("masked_lm")
    report = export_saved_model(model, out)
    return model, report, tf.saved_model.load(str(out / "saved_model"))


IDS = np.array([[2, 9, 4, 17, 30, 3], [2, 11, 4, 3, 0, 0]])  # right padded, [MASK] = 4
SEGMENTS = np.array([[0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 0, 0]])
POSITIONS = np.array([[2, 5, 2], [3, 0, 2]])  # out of order, repeated, row by row


def test_the_masked_lm_signature_predicts_at_mask_positions_as_the_keras_model(
    masked_lm_export,
):
    model, report, loaded = masked_lm_export
    assert "masked_lm" in report["signatures"] and report["max_abs_diff"] <= 1e-4
    mask = (IDS != 0).astype(np.int64)
    features = {"token_ids": IDS, "padding_mask": mask, "segment_ids": SEGMENTS}
    expected = np.asarray(model({**features, "mask_positions": POSITIONS}))  # (B, M, V)
    got = loaded.signatures["masked_lm"](
        input_ids=tf.constant(IDS),
        attention_mask=tf.constant(mask),
        token_type_ids=tf.constant(SEGMENTS),
        mask_positions=tf.constant(POSITIONS),
    )["logits"]
    assert got.shape == (2, 3, 40)
    np.testing.assert_allclose(np.asarray(got), expected, atol=1e-4)


@pytest.mark.parametrize("position", [-1, 6])
def test_the_masked_lm_signature_refuses_the_positions_the_keras_model_refuses(
    masked_lm_export, position
):
    model, _, loaded = masked_lm_export
    positions = np.array([[1, position], [1, 2]])
    with pytest.raises(ValueError, match="mask_positions"):
        model({"token_ids": IDS, "mask_positions": positions})
    feeds = {"input_ids": IDS, "attention_mask": IDS != 0, "token_type_ids": SEGMENTS}
    feeds["attention_mask"] = feeds["attention_mask"].astype(np.int64)
    feeds = {k: tf.constant(v, tf.int64) for k, v in feeds.items()}
    with pytest.raises(tf.errors.InvalidArgumentError, match="mask_positions must be"):
        loaded.signatures["masked_lm"](**feeds, mask_positions=tf.constant(positions))


def test_the_masked_lm_check_refuses_logits_that_differ_from_the_keras_models(masked_lm_export):
    model, _, loaded = masked_lm_export

    def shifted(**feeds):  # the signature, one logit off
        logits = loaded.signatures["masked_lm"](**feeds)["logits"].numpy()
        logits[0, 0, 0] += 1e-3
        return {"logits": tf.constant(logits)}

    with pytest.raises(ExportError, match="'masked_lm': 'logits' differ .* by 0.001"):
        check_masked_lm(shifted, model, dimensions_of(model), atol=1e-4)


def test_a_one_segment_encoder_exports_and_serves_as_the_keras_model(tmp_path):
    """`type_vocabulary_size=1` (RoBERTa's one segment row) trained, then every export
    failed in its own validation ("indices[0,1] = 1 is not in [0, 1)"): it fed segment 1.
    The reference is the Keras model: its `masked_lm` outputs on the export's check, and
    its embeddings against the served ONNX export's."""
    from transformer_zoo.export import export_onnx
    from transformer_zoo.serving import load_onnx
    from transformer_zoo.text import train_tokenizer

    keras.utils.set_random_seed(0)
    tokenizer = train_tokenizer(["the cat sat on the mat", "a dog sat on a log"] * 5, 40)
    backbone = from_preset(
        "tiny", family="encoder-only", vocabulary_size=40, max_length=16,
        type_vocabulary_size=1, **SMALL,
    )  # fmt: skip
    report = export_saved_model(EncoderOnlyMaskedLM(backbone), tmp_path / "sm")
    assert "masked_lm" in report["signatures"] and report["max_abs_diff"] <= 1e-4
    export_onnx(backbone, tmp_path / "onnx", tokenizer)
    texts = ["the cat sat", "a dog on a log"]
    ids = [pair_ids(tokenizer, text)[0] for text in texts]
    width = max(len(row) for row in ids)
    padded = np.array([row + [0] * (width - len(row)) for row in ids])
    expected = np.asarray(backbone.embed({"token_ids": padded}))
    np.testing.assert_allclose(load_onnx(tmp_path / "onnx").embed(texts), expected, atol=1e-5)
