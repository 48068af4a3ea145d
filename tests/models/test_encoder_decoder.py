"""EncoderDecoder: padding, causality, the cross-attention cache, and weight tying."""

import numpy as np
import pytest

from transformer_zoo.layers import KeyValue
from transformer_zoo.models import EncoderDecoder

SIZE = dict(num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32, max_length=32)


def tiny(**overrides):
    return EncoderDecoder(overrides.pop("vocabulary_size", 30), **{**SIZE, **overrides})


def inputs(source, target):
    return {"encoder_token_ids": np.asarray(source), "decoder_token_ids": np.asarray(target)}


def test_encoder_outputs_at_real_positions_ignore_the_amount_of_padding():
    model = tiny()
    source = np.array([[4, 5, 6, 7]])
    reference = np.asarray(model.encode(source))
    for extra in (1, 3, 9):
        padded = np.pad(source, ((0, 0), (0, extra)))
        np.testing.assert_allclose(model.encode(padded)[:, :4], reference, atol=1e-5)


def test_decoder_logits_ignore_source_padding_and_later_target_tokens():
    model = tiny()
    target = np.random.default_rng(0).integers(1, 30, size=(1, 8))
    logits = np.asarray(model(inputs([[4, 5, 6]], target)))
    padded = np.asarray(model(inputs([[4, 5, 6, 0, 0]], target)))
    np.testing.assert_allclose(padded, logits, atol=1e-5)
    changed = target.copy()
    changed[:, 5:] = (changed[:, 5:] % 29) + 1
    other = np.asarray(model(inputs([[4, 5, 6]], changed)))
    np.testing.assert_allclose(other[:, :5], logits[:, :5], atol=1e-6)
    assert not np.allclose(other[:, 5:], logits[:, 5:])


def test_steps_on_the_cache_equal_the_full_forward_pass():
    model = tiny(target_vocabulary_size=25)
    source = np.array([[4, 5, 6, 0], [7, 8, 9, 10]])
    target = np.random.default_rng(0).integers(1, 25, size=(2, 6))
    full = np.asarray(model(inputs(source, target)))
    cache = model.initial_cache(model.encode(source), source != 0)
    steps = []
    for t in range(6):
        logits, cache = model.step(target[:, t : t + 1], cache)
        steps.append(np.asarray(logits)[:, 0])
    np.testing.assert_allclose(np.stack(steps, axis=1), full, atol=1e-5)
    first = cache.blocks[0]
    assert tuple(first.self_attention.key.shape) == (2, 2, 6, 8)
    assert tuple(first.cross_attention.key.shape) == (2, 2, 4, 8)


def test_the_step_reads_cross_attention_keys_from_the_cache_instead_of_recomputing():
    model = tiny()
    source, target = np.array([[4, 5, 6]]), np.array([[2]])
    cache = model.initial_cache(model.encode(source), source != 0)
    logits, _ = model.step(target, cache)
    zeroed = cache._replace(
        blocks=tuple(
            block._replace(cross_attention=KeyValue(*(t * 0 for t in block.cross_attention)))
            for block in cache.blocks
        )
    )
    other, _ = model.step(target, zeroed)
    assert not np.allclose(logits, other)


def test_three_way_tying_shares_one_embedding_for_source_target_and_head():
    model = tiny(tie_weights="all")
    assert model.decoder_embeddings is model.encoder_embeddings
    assert model.lm_head.embedding is model.encoder_embeddings
    untied = tiny(tie_weights="none")
    two_way = tiny(tie_weights="decoder")
    table = 30 * 16
    assert two_way.count_params() - model.count_params() == table
    assert untied.count_params() - two_way.count_params() == table


def test_separate_vocabularies_size_the_embeddings_and_the_logits():
    model = tiny(vocabulary_size=500, target_vocabulary_size=700)
    assert model.encoder_embeddings.vocabulary_size == 500
    assert model.decoder_embeddings.vocabulary_size == 700
    assert model(inputs([[499]], [[699]])).shape == (1, 1, 700)
    with pytest.raises(ValueError, match="token_ids"):
        model(inputs([[500]], [[1]]))


def test_blocks_follow_the_paper():
    model = tiny()
    assert not any(b.norm_first or b.causal or b.cross_attention for b in model.encoder_blocks)
    assert all(b.causal and b.cross_attention and not b.norm_first for b in model.decoder_blocks)
    assert model.encoder_embeddings.scale_embeddings
    assert model.encoder_embeddings.position_mode == "sinusoidal"


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"tie_weights": "all", "target_vocabulary_size": 40}, "tie_weights"),
        ({"tie_weights": "both"}, "tie_weights"),
        ({"num_layers": 0}, "num_layers"),
        ({"target_vocabulary_size": 0}, "target_vocabulary_size=0"),  # not "shared"
        ({"target_vocabulary_size": -5}, "target_vocabulary_size=-5"),
    ],
)
def test_bad_arguments_are_rejected_by_name(kwargs, name):
    with pytest.raises(ValueError, match=name):
        tiny(**kwargs)


def test_encoder_token_ids_that_are_not_b_by_t_are_refused_by_name():
    with pytest.raises(ValueError, match=r"`encoder_token_ids` must be \(B, T\)"):
        tiny()(inputs(np.ones((2, 3, 4), "int32"), np.ones((2, 3), "int32")))


def test_one_id_tensor_is_refused_rather_than_read_as_both_source_and_target():
    """`model(ids)` used the ids as both the encoder's and the decoder's:
    `model(ids) == model({"encoder_token_ids": ids, "decoder_token_ids": ids})`."""
    ids = np.array([[4, 5, 6]])
    with pytest.raises(
        ValueError, match="must be a dict of .*`encoder_token_ids`.* not one tensor"
    ):
        tiny()(ids)


def test_hugging_face_keys_are_refused_naming_ours():
    ids = np.array([[4, 5, 6]])
    with pytest.raises(
        ValueError,
        match="`decoder_input_ids` .*ours is `decoder_token_ids`.*`input_ids` .*ours is `encoder_token_ids`",
    ):
        tiny()({"input_ids": ids, "decoder_input_ids": ids})


def test_float_decoder_ids_are_refused_by_their_name():
    with pytest.raises(ValueError, match="`decoder_token_ids` must hold integer token ids"):
        tiny()(inputs([[4, 5]], np.array([[1.5, 2.0]])))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"hidden_dim": 129, "num_heads": 3}, "must be even. Received: hidden_dim=129"),
        ({"hidden_dim": 130, "num_heads": 4}, "Received: hidden_dim=130, num_heads=4"),
        ({"scale_embeddings": "no"}, "scale_embeddings='no'"),
        ({"output_bias": 1}, "output_bias=1"),
        ({"dropout": None}, "dropout=None"),
    ],
)
def test_widths_flags_and_rates_are_refused_naming_the_users_argument(kwargs, message):
    """An odd `hidden_dim` failed naming the sinusoidal layer's `inputs_shape`, a width
    the heads do not divide named `d_model`; `scale_embeddings="no"` scaled by √D."""
    with pytest.raises(ValueError, match=message):
        tiny(**kwargs)


def test_a_max_length_without_room_for_a_source_and_its_eos_is_refused():
    """`--set max_length=1` passed train's early check, then the translation pipeline
    refused `max_source_length=1` after the data was read and `--out` written."""
    with pytest.raises(ValueError, match=r"^`max_length` must be an integer ≥ 2, .*max_length=1$"):
        tiny(max_length=1)
