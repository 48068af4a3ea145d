"""EncoderOnly and its heads, against numpy formulas for the pooler and pooling."""

import numpy as np
import pytest
from keras import ops

from tests.helpers import np_layer_norm
from transformer_zoo.models import (
    EncoderOnly,
    EncoderOnlyClassifier,
    EncoderOnlyMaskedLM,
    mean_pool,
)

SIZE = dict(num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32, max_length=32)
IDS = np.array([[5, 6, 7, 8, 0, 0], [9, 10, 11, 12, 13, 14]])


def tiny(**overrides):
    return EncoderOnly(overrides.pop("vocabulary_size", 30), **{**SIZE, **overrides})


def test_outputs_at_real_positions_ignore_the_amount_of_padding():
    model = tiny()
    short = model({"token_ids": IDS[:1, :4]})
    long = model({"token_ids": np.pad(IDS[:1], ((0, 0), (0, 5)))})
    np.testing.assert_allclose(long["sequence_output"][:, :4], short["sequence_output"], atol=1e-5)
    np.testing.assert_allclose(long["pooled_output"], short["pooled_output"], atol=1e-5)


def test_embeddings_are_layer_normalized_sums_of_token_position_and_segment():
    model = tiny(num_layers=1)
    segments = np.array([[0, 0, 1, 1, 1, 1]] * 2)
    x = model.embeddings(IDS, segment_ids=segments)
    table = lambda layer: np.asarray(layer.embeddings)  # noqa: E731
    expected = (
        table(model.embeddings.token_embedding)[IDS]
        + np.asarray(model.embeddings.position_encoding.position_embeddings)[:6]
        + table(model.embeddings.segment_embedding)[segments]
    )
    np.testing.assert_allclose(x, expected, atol=1e-6)
    gamma, beta = (np.asarray(w) for w in model.embeddings_norm.weights)
    normed = model.embeddings_norm(x)
    np.testing.assert_allclose(normed, np_layer_norm(expected, gamma, beta, 1e-12), atol=1e-5)


def test_pooled_output_is_tanh_of_a_dense_layer_on_the_first_token():
    model = tiny()
    out = model({"token_ids": IDS})
    kernel, bias = (np.asarray(w) for w in model.pooler_dense.weights)
    expected = np.tanh(np.asarray(out["sequence_output"])[:, 0] @ kernel + bias)
    np.testing.assert_allclose(out["pooled_output"], expected, atol=1e-6)
    assert "pooled_output" not in tiny(use_pooler=False)({"token_ids": IDS})


def test_segment_ids_default_to_segment_zero():
    model = tiny()
    implicit = model({"token_ids": IDS})["sequence_output"]
    explicit = model({"token_ids": IDS, "segment_ids": np.zeros_like(IDS)})["sequence_output"]
    ones = model({"token_ids": IDS, "segment_ids": np.ones_like(IDS)})["sequence_output"]
    np.testing.assert_allclose(implicit, explicit, atol=1e-6)
    assert not np.allclose(implicit, ones)


def test_embed_is_the_masked_mean_then_l2_normalized():
    model = tiny()
    sequence = np.asarray(model({"token_ids": IDS})["sequence_output"])
    mask = (IDS != 0)[..., None]
    mean = (sequence * mask).sum(1) / mask.sum(1)
    np.testing.assert_allclose(model.embed({"token_ids": IDS}, normalize=False), mean, atol=1e-5)
    unit = mean / np.linalg.norm(mean, axis=-1, keepdims=True)
    embedded = np.asarray(model.embed({"token_ids": IDS}))
    np.testing.assert_allclose(embedded, unit, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(embedded, axis=-1), 1.0, atol=1e-5)


def test_blocks_are_post_ln_with_exact_gelu_and_bert_names():
    model = tiny()
    assert all(not b.norm_first and not b.causal and b.activation == "gelu" for b in model.blocks)
    assert model.blocks[0].layer_norm_epsilon == 1e-12
    names = {w.path.split("/")[0] for w in model.weights}
    assert names == {"embeddings", "embeddings_norm", "block_0", "block_1", "pooler_dense"}


def test_classifier_reads_the_pooled_output_or_the_first_token():
    backbone = tiny()
    classifier = EncoderOnlyClassifier(backbone, num_classes=3, dropout=0.0)
    kernel, bias = (np.asarray(w) for w in classifier.classifier.weights)
    pooled = np.asarray(backbone({"token_ids": IDS})["pooled_output"])
    np.testing.assert_allclose(classifier({"token_ids": IDS}), pooled @ kernel + bias, atol=1e-5)
    no_pooler = EncoderOnlyClassifier(tiny(use_pooler=False), num_classes=2)
    assert no_pooler({"token_ids": IDS}).shape == (2, 2)


def test_masked_lm_predicts_at_mask_positions_with_the_tied_embedding():
    backbone = tiny()
    mlm = EncoderOnlyMaskedLM(backbone)
    assert mlm.lm_head.embedding is backbone.embeddings and mlm.lm_head.use_bias
    full = np.asarray(mlm({"token_ids": IDS}))  # (B, T, V)
    positions = np.array([[1, 3], [0, 5]])
    picked = mlm({"token_ids": IDS, "mask_positions": positions})
    np.testing.assert_allclose(picked, np.take_along_axis(full, positions[..., None], 1), atol=1e-5)
    # Only the transform and the bias are new: the output matrix is the embedding.
    assert mlm.count_params() - backbone.count_params() == 16 * 16 + 16 + 2 * 16 + 30


def test_heads_need_an_encoder_only_backbone():
    with pytest.raises(ValueError, match="backbone"):
        EncoderOnlyClassifier("not a model", num_classes=2)
    with pytest.raises(ValueError, match="num_classes"):
        EncoderOnlyClassifier(tiny(), num_classes=0)


@pytest.mark.parametrize("dropout", [1.0, 1.5, -0.1])
def test_the_classifier_refuses_a_dropout_outside_0_1_naming_it(dropout):
    with pytest.raises(ValueError, match=r"`dropout` must be in \[0, 1\)\. Received: dropout="):
        EncoderOnlyClassifier(tiny(), num_classes=2, dropout=dropout)


def test_mean_pool_in_float16_gives_zeros_for_a_fully_padded_row_and_float32_values():
    """The numpy masked mean (sentence-transformers' clamps, float64) of float16 values."""
    sequence = (np.random.default_rng(4).normal(size=(2, 4, 16)) * 50).astype("float16")
    mask = np.array([[1, 1, 1, 0], [0, 0, 0, 0]], bool)
    count = np.maximum(mask.sum(1, keepdims=True), 1e-9)
    mean = (sequence.astype("float64") * mask[..., None]).sum(1) / count
    unit = mean / np.maximum(np.linalg.norm(mean, axis=-1, keepdims=True), 1e-12)
    for normalize, expected in ((False, mean), (True, unit)):
        pooled = mean_pool(ops.convert_to_tensor(sequence), mask, normalize)
        assert pooled.dtype == "float32"
        np.testing.assert_allclose(np.asarray(pooled), expected, rtol=1e-5, atol=1e-6)


def test_embed_under_mixed_float16_matches_float32_and_a_padded_row_is_zeros():
    mixed = tiny(dtype="mixed_float16")
    reference = tiny()
    reference.set_weights(mixed.get_weights())
    ids = np.concatenate([IDS, np.zeros((1, 6), IDS.dtype)])  # the last row all padding
    embedded = np.asarray(mixed.embed({"token_ids": ids}))
    assert not np.isnan(embedded).any()
    np.testing.assert_array_equal(embedded[2], 0.0)
    np.testing.assert_allclose(embedded, np.asarray(reference.embed({"token_ids": ids})), atol=1e-2)


@pytest.mark.parametrize("position", [6, 99, -1])
def test_masked_lm_refuses_mask_positions_outside_the_sequence_by_name(position):
    mlm = EncoderOnlyMaskedLM(tiny())
    positions = np.array([[1, position], [0, 2]])
    with pytest.raises(ValueError, match=rf"`mask_positions` must lie in \[0, 6\).*{position}"):
        mlm({"token_ids": IDS, "mask_positions": positions})


def test_token_type_ids_are_refused_naming_segment_ids():
    """Hugging Face's `token_type_ids` were dropped without a word: every token read as
    segment 0, which gives other outputs than the segments meant."""
    model = tiny()
    ones = np.ones_like(IDS)
    meant = np.asarray(model({"token_ids": IDS, "segment_ids": ones})["sequence_output"])
    assert not np.allclose(meant, np.asarray(model({"token_ids": IDS})["sequence_output"]))
    with pytest.raises(ValueError, match="`token_type_ids` .*ours is `segment_ids`"):
        model({"token_ids": IDS, "token_type_ids": ones})
    with pytest.raises(ValueError, match="does not read the input `segment_ids`"):
        tiny(type_vocabulary_size=0)({"token_ids": IDS, "segment_ids": ones})


def test_the_masked_lm_takes_mask_positions_and_refuses_other_keys():
    mlm = EncoderOnlyMaskedLM(tiny())
    with pytest.raises(ValueError, match="`labels`.*it reads `mask_positions`, `padding_mask`"):
        mlm({"token_ids": IDS, "labels": IDS})
    with pytest.raises(ValueError, match="`mask_positions` must hold integer positions"):
        mlm({"token_ids": IDS, "mask_positions": np.array([[1.5], [0.2]])})


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: tiny(use_pooler="no"), "`use_pooler` must be True or False"),
        (lambda: tiny(type_vocabulary_size=True), "type_vocabulary_size=True"),
        (lambda: tiny(layer_norm_epsilon=None), "layer_norm_epsilon=None"),
        (lambda: EncoderOnlyClassifier(tiny(), num_classes=True), "num_classes=True"),
        (lambda: EncoderOnlyClassifier(tiny(), 2, dropout="0.1"), "dropout='0.1'"),
    ],
)
def test_strings_bools_and_none_are_refused_by_name(make, message):
    """`use_pooler="no"` added a pooler; `num_classes=True` built one class."""
    with pytest.raises(ValueError, match=message):
        make()


def test_a_max_length_without_room_for_cls_and_sep_is_refused():
    """`max_length=1` built and exported, then every served text was cut to 1 token and
    refused by text/formats.py's `max_length` ≥ 2, an argument the user never passed."""
    with pytest.raises(ValueError, match=r"^`max_length` must be an integer ≥ 2, .*max_length=1$"):
        tiny(max_length=1)
    assert tiny(max_length=2)(IDS[:, :2])["sequence_output"].shape == (2, 2, 16)
