"""DecoderOnly: causality, the cache path, weight tying, and training that generation
then reproduces."""

import keras
import numpy as np
import pytest

from transformer_zoo.generation import generate
from transformer_zoo.models import DecoderOnly


def tiny(**overrides):
    config = dict(num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32, max_length=32)
    return DecoderOnly(overrides.pop("vocabulary_size", 30), **{**config, **overrides})


def test_logits_at_position_t_do_not_depend_on_later_tokens():
    model = tiny()
    ids = np.random.default_rng(0).integers(1, 30, size=(2, 10))
    changed = ids.copy()
    changed[:, 6:] = np.random.default_rng(1).integers(1, 30, size=(2, 4))
    a, b = np.asarray(model(ids)), np.asarray(model(changed))
    np.testing.assert_allclose(a[:, :6], b[:, :6], atol=1e-6)
    assert not np.allclose(a[:, 6:], b[:, 6:])


def test_step_from_the_initial_cache_equals_the_plain_call_and_grows_the_cache():
    model = tiny()
    ids = np.random.default_rng(0).integers(1, 30, size=(2, 7))
    logits, present = model.step(ids[:, :4], model.initial_cache(2))
    np.testing.assert_allclose(logits, model(ids[:, :4]), atol=1e-5)
    logits, present = model.step(ids[:, 4:], present)
    np.testing.assert_allclose(logits, np.asarray(model(ids))[:, 4:], atol=1e-5)
    assert len(present.blocks) == 2
    assert all(
        tuple(t.shape) == (2, 2, 7, 8) for block in present.blocks for t in block.self_attention
    )


def test_left_padding_with_explicit_positions_matches_the_unpadded_prompt():
    model = tiny()
    prompt = np.array([[7, 8, 9]])
    padded = np.array([[0, 0, 7, 8, 9]])
    mask = padded != 0
    positions = np.maximum(np.cumsum(mask, axis=1) - 1, 0)
    logits, _ = model.step(padded, model.initial_cache(1), mask, positions)
    np.testing.assert_allclose(np.asarray(logits)[:, 2:], model(prompt), atol=1e-5)


def test_the_lm_head_is_the_transposed_token_embedding():
    model = tiny()
    assert not hasattr(model.lm_head, "kernel")
    hidden = np.random.default_rng(0).normal(size=(1, 3, 16)).astype("float32")
    expected = hidden @ np.asarray(model.embeddings.embeddings).T
    np.testing.assert_allclose(model.lm_head(hidden), expected, atol=1e-5)


def test_blocks_are_pre_ln_causal_and_use_gpt2_defaults():
    model = tiny()
    assert all(b.norm_first and b.causal and b.activation == "gelu_tanh" for b in model.blocks)
    assert [b.name for b in model.blocks] == ["block_0", "block_1"]
    assert model.final_norm.epsilon == 1e-5


@pytest.mark.parametrize("arg", ["num_layers", "hidden_dim"])
def test_bad_sizes_are_rejected_by_name(arg):
    with pytest.raises(ValueError, match=arg):
        tiny(**{arg: 0})


@pytest.mark.slow  # 30 s of training; test_real_data_options trains a decoder in the default set
def test_fit_on_a_repeating_pattern_then_greedy_generation_continues_it():
    """The training path (model.fit on `call`) and the generation path (the cached
    engine) agree: what the model learned is what greedy decoding produces."""
    keras.utils.set_random_seed(0)
    period = [1, 2, 3, 4, 5, 6, 7]
    stream = np.array(period * 10)
    windows = np.stack([stream[i : i + 17] for i in range(len(period))] * 8)
    model = tiny(vocabulary_size=10, hidden_dim=32, intermediate_dim=64)
    model.compile(
        keras.optimizers.Adam(1e-2),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    model.fit(
        {"token_ids": windows[:, :-1], "padding_mask": np.ones((len(windows), 16), bool)},
        windows[:, 1:],
        epochs=6,
        batch_size=16,
        verbose=0,
    )
    prompts = np.array([[3, 4, 5, 6, 0], [6, 7, 1, 2, 3]])  # unequal lengths
    tokens = generate(model, prompts, 10).tokens
    np.testing.assert_array_equal(tokens[0], [7, 1, 2, 3, 4, 5, 6, 7, 1, 2])
    np.testing.assert_array_equal(tokens[1], [4, 5, 6, 7, 1, 2, 3, 4, 5, 6])


def test_the_tied_head_owns_no_weights_so_the_layers_counts_add_up_to_the_models():
    """`summary()` lists one row per layer: the embedding's table is counted once, in the
    embedding's row, and freezing the head leaves it trainable."""
    model = tiny()
    unique = {id(w): int(np.prod(w.shape)) for w in model.weights}
    assert model.lm_head.count_params() == 0
    assert sum(layer.count_params() for layer in model.layers) == sum(unique.values())
    model.lm_head.trainable = False
    assert model.embeddings.trainable
    assert len(model.trainable_weights) == len(model.weights)


@pytest.mark.parametrize("shape", [(3,), (2, 3, 4)])
def test_token_ids_that_are_not_b_by_t_are_refused_naming_token_ids(shape):
    with pytest.raises(ValueError, match=r"`token_ids` must be \(B, T\)") as error:
        tiny()(np.ones(shape, "int32"))
    assert f"token_ids.shape={shape}" in str(error.value)


def test_a_mask_under_another_key_is_refused_naming_ours():
    """`attention_mask` (Hugging Face's name) and `paddingmask` were dropped without a
    word and the mask rebuilt as ids != 0: where id 0 is a real token, the logits of the
    mask the caller meant differ from those of the rebuilt one."""
    model = tiny()
    ids = np.array([[5, 0, 7, 9]])  # id 0 a real token
    meant = np.asarray(model({"token_ids": ids, "padding_mask": np.ones_like(ids)}))
    assert not np.allclose(meant, np.asarray(model(ids)))
    for key, hint in (
        ("attention_mask", "ours is `padding_mask`"),
        ("paddingmask", "did you mean `padding_mask`"),
    ):
        with pytest.raises(
            ValueError, match=rf"does not read the input `{key}` \(.*{hint}"
        ) as error:
            model({"token_ids": ids, key: np.ones_like(ids)})
        assert "it reads `padding_mask`, `token_ids`" in str(error.value)
    with pytest.raises(ValueError, match="`input_ids` .*ours is `token_ids`"):
        model({"input_ids": ids})


def test_float_ids_are_refused_not_truncated():
    """`model(ids + 0.9)` gave the logits of `model(ids)`."""
    ids = np.array([[5, 6, 7, 9]])
    with pytest.raises(ValueError, match="`token_ids` must hold integer token ids.*float"):
        tiny()(ids.astype("float32") + 0.9)


@pytest.mark.parametrize(
    "args, kwargs, message",
    [
        ((50, True, True, 8, 16), {}, "`num_layers` must be a positive integer.*num_layers=True"),
        ((50, 1, 2, 8, 16), {"dropout": None}, r"`dropout` must be in \[0, 1\).*dropout=None"),
        ((50, 1, 2, 8, 16), {"dropout": "0.1"}, "dropout='0.1'"),
        ((50, 1, 2, 8, 16), {"layer_norm_epsilon": "1e-5"}, "layer_norm_epsilon='1e-5'"),
        ((50, 1, 4, 130, 16), {}, "divisible .* Received: hidden_dim=130, num_heads=4"),
    ],
)
def test_bad_arguments_are_refused_naming_the_users_argument(args, kwargs, message):
    """`DecoderOnly(50, True, True, ...)` built one layer of `num_heads=True` heads; the
    heads check named `d_model`, the attention's input, not `hidden_dim`."""
    with pytest.raises(ValueError, match=message):
        DecoderOnly(*args, **kwargs)


def test_numpy_integer_sizes_are_accepted_and_stored_as_python_ints():
    model = DecoderOnly(np.int64(30), np.int64(1), np.int32(2), np.int64(8), 16, max_length=8)
    sizes = (model.vocabulary_size, model.num_layers, model.num_heads, model.hidden_dim)
    assert sizes == (30, 1, 2, 8) and all(type(size) is int for size in sizes)


def test_a_step_of_another_batch_size_than_its_cache_is_refused_by_name():
    """It failed in a ConcatV2 kernel 13 frames down."""
    model = tiny()
    ids = np.array([[1, 2, 3]])
    with pytest.raises(
        ValueError, match=r"`token_ids` and `cache` .*same batch size.*\(2, 2, 0, 8\)"
    ):
        model.step(ids, model.initial_cache(2))
    with pytest.raises(ValueError, match=r"`positions`.*positions.shape=\(2, 3\)"):
        model.step(ids, model.initial_cache(1), positions=np.array([[0, 1, 2]] * 2))
    with pytest.raises(ValueError, match="`batch_size` must be a non-negative integer"):
        model.initial_cache(2.0)
