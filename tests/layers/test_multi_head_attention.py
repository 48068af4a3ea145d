import re

import keras
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import mha_weights, np_attention
from transformer_zoo.layers import KeyValue, MultiHeadAttention

B, T, S, D, H = 2, 5, 7, 16, 4
rng = np.random.default_rng(0)


def _inputs(batch=B, t=T, s=S, d=D):
    return (
        rng.normal(size=(batch, t, d)).astype("float32"),
        rng.normal(size=(batch, s, d)).astype("float32"),
    )


def _built(layer, query, context=None):
    layer(query, context)
    # Non-zero biases so that the reference checks them too.
    for w in layer.weights:
        if "bias" in w.path:
            w.assign(rng.normal(size=w.shape).astype("float32") * 0.1)
    return layer


def _keras_mha_with_our_weights(ours, d=D, h=H):
    dh = d // h
    ref = keras.layers.MultiHeadAttention(num_heads=h, key_dim=dh)
    q, c = _inputs()
    ref(q, c, c)
    wq, bq, wk, bk, wv, bv, wo, bo = mha_weights(ours)
    ref.set_weights(
        [
            wq.reshape(d, h, dh), bq.reshape(h, dh),
            wk.reshape(d, h, dh), bk.reshape(h, dh),
            wv.reshape(d, h, dh), bv.reshape(h, dh),
            wo.reshape(h, dh, d), bo,
        ]
    )  # fmt: skip
    return ref


def test_self_attention_equals_the_formula_in_numpy():
    q, _ = _inputs()
    layer = _built(MultiHeadAttention(num_heads=H), q)
    out, scores = layer.attend(q, layer.compute_key_value(q))
    expected, expected_scores = np_attention(q, q, *mha_weights(layer), num_heads=H)
    np.testing.assert_allclose(np.asarray(out), expected, atol=1e-5)
    np.testing.assert_allclose(np.asarray(scores), expected_scores, atol=1e-6)


def test_cross_attention_equals_the_formula_in_numpy():
    q, c = _inputs()
    layer = _built(MultiHeadAttention(num_heads=H), q, c)
    expected, _ = np_attention(q, c, *mha_weights(layer), num_heads=H)
    np.testing.assert_allclose(np.asarray(layer(q, c)), expected, atol=1e-5)


def _random_masks():
    padding = np.ones((B, S), bool)
    padding[0, -3:] = False
    attention = rng.random((B, T, S)) > 0.3
    attention[:, :, 0] = True  # every query keeps at least one key
    return padding, attention


@pytest.mark.parametrize("masking", ["none", "padding", "attention", "both"])
def test_matches_keras_multi_head_attention_with_copied_weights(masking):
    q, c = _inputs()
    ours = _built(MultiHeadAttention(num_heads=H), q, c)
    ref = _keras_mha_with_our_weights(ours)
    padding, attention = _random_masks()
    kwargs, keras_mask = {}, None
    if masking in ("padding", "both"):
        kwargs["padding_mask"] = padding
        keras_mask = np.broadcast_to(padding[:, None, :], (B, T, S))
    if masking in ("attention", "both"):
        kwargs["attention_mask"] = attention
        keras_mask = attention if keras_mask is None else keras_mask & attention
    expected = ref(q, c, c, attention_mask=keras_mask)
    np.testing.assert_allclose(np.asarray(ours(q, c, **kwargs)), np.asarray(expected), atol=1e-5)


def test_causal_flag_matches_keras_causal_mask():
    q, _ = _inputs()
    ours = _built(MultiHeadAttention(num_heads=H), q)
    ref = _keras_mha_with_our_weights(ours)
    expected = ref(q, q, q, use_causal_mask=True)
    np.testing.assert_allclose(np.asarray(ours(q, causal=True)), np.asarray(expected), atol=1e-5)


def test_causal_flag_equals_an_explicit_lower_triangular_mask():
    q, _ = _inputs()
    layer = _built(MultiHeadAttention(num_heads=H), q)
    tril = np.broadcast_to(np.tril(np.ones((T, T), bool)), (B, T, T))
    np.testing.assert_allclose(
        np.asarray(layer(q, causal=True)), np.asarray(layer(q, attention_mask=tril)), atol=1e-6
    )


def test_cached_decoding_token_by_token_matches_one_full_causal_pass():
    q, _ = _inputs()
    layer = _built(MultiHeadAttention(num_heads=H), q)
    full = np.asarray(layer(q, causal=True))
    dh = D // H
    cache = KeyValue(np.zeros((B, H, 0, dh), "float32"), np.zeros((B, H, 0, dh), "float32"))
    steps = []
    for t in range(T):
        out, cache = layer.call_with_cache(q[:, t : t + 1], cache, causal=True)
        steps.append(np.asarray(out))
    assert cache.key.shape == (B, H, T, dh)
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=1e-5)


def test_cache_with_a_multi_token_step_offsets_the_causal_mask():
    q, _ = _inputs()
    layer = _built(MultiHeadAttention(num_heads=H), q)
    full = np.asarray(layer(q, causal=True))
    empty = KeyValue(np.zeros((B, H, 0, D // H), "float32"), np.zeros((B, H, 0, D // H), "float32"))
    _, cache = layer.call_with_cache(q[:, :2], empty, causal=True)
    out, present = layer.call_with_cache(q[:, 2:], cache, causal=True)
    np.testing.assert_allclose(np.asarray(out), full[:, 2:], atol=1e-5)
    assert present.key.shape == (B, H, T, D // H)


def test_cross_attention_cache_is_reused_without_reprojecting_the_context():
    q, c = _inputs()
    layer = _built(MultiHeadAttention(num_heads=H), q, c)
    out = layer(q, c)
    kv = layer.compute_key_value(c)
    # Keys and values computed once give the same output without the context.
    again, _ = layer.attend(q, kv)
    np.testing.assert_allclose(np.asarray(again), np.asarray(out), atol=1e-6)


def test_attention_scores_are_probabilities_with_zeros_at_masked_keys():
    q, c = _inputs()
    layer = _built(MultiHeadAttention(num_heads=H), q, c)
    padding, _ = _random_masks()
    _, scores = layer.attend(q, layer.compute_key_value(c), padding_mask=padding)
    scores = np.asarray(scores)
    assert scores.shape == (B, H, T, S)
    np.testing.assert_allclose(scores.sum(-1), 1.0, atol=1e-5)
    assert np.all(scores[0, :, :, -3:] == 0.0)


@settings(max_examples=12, deadline=None)
@given(
    batch=st.integers(1, 3),
    length=st.integers(2, 8),
    heads=st.sampled_from([1, 2, 4]),
    t=st.integers(0, 7),
    seed=st.integers(0, 2**16),
)
def test_causal_outputs_up_to_t_ignore_changes_after_t(batch, length, heads, t, seed):
    t = t % length
    local = np.random.default_rng(seed)
    x = local.normal(size=(batch, length, 8)).astype("float32")
    layer = MultiHeadAttention(num_heads=heads)
    before = np.asarray(layer(x, causal=True))
    x2 = x.copy()
    x2[:, t + 1 :] = local.normal(size=x2[:, t + 1 :].shape)
    after = np.asarray(layer(x2, causal=True))
    np.testing.assert_allclose(after[:, : t + 1], before[:, : t + 1], atol=1e-5)


@settings(max_examples=8, deadline=None)
@given(real=st.integers(1, 6), extra=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_more_right_padding_never_changes_outputs_at_real_positions(real, extra, seed):
    local = np.random.default_rng(seed)
    x = local.normal(size=(1, real, 8)).astype("float32")
    layer = MultiHeadAttention(num_heads=2)
    base = np.asarray(layer(x, padding_mask=np.ones((1, real), bool)))
    padded = np.concatenate([x, local.normal(size=(1, extra, 8)).astype("float32")], axis=1)
    mask = np.arange(real + extra)[None] < real
    out = np.asarray(layer(padded, padding_mask=mask))
    np.testing.assert_allclose(out[:, :real], base, atol=1e-5)


def test_bad_arguments_name_the_argument():
    with pytest.raises(ValueError, match="num_heads=0"):
        MultiHeadAttention(num_heads=0)
    with pytest.raises(ValueError, match="dropout=1.0"):
        MultiHeadAttention(num_heads=2, dropout=1.0)
    with pytest.raises(ValueError, match="d_model=10, num_heads=4"):
        MultiHeadAttention(num_heads=4)(np.zeros((1, 2, 10), "float32"))


def test_projections_start_from_different_random_kernels():
    layer = MultiHeadAttention(num_heads=2)
    layer(np.zeros((1, 3, 8), "float32"))
    wq, _, wk, _, wv, _, wo, _ = mha_weights(layer)
    assert not np.allclose(wq, wo) and not np.allclose(wk, wv)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"padding_mask": np.ones((3, S), bool)}, r"`padding_mask`.* B=2 .*shape=\(3, 7\)"),
        ({"attention_mask": np.ones((B, 4, S), bool)}, r"`attention_mask`.* T=5 .*\(2, 4, 7\)"),
        ({"attention_mask": np.ones((3, T, S), bool)}, r"`attention_mask`.* B=2 .*\(3, 5, 7\)"),
    ],
)
def test_masks_of_another_batch_size_or_query_length_are_refused_by_name(kwargs, message):
    q, c = _inputs()
    layer = _built(MultiHeadAttention(num_heads=H), q, c)
    with pytest.raises(ValueError, match=message):
        layer(q, c, **kwargs)


def test_a_context_of_another_batch_size_is_refused_by_name():
    q, c = _inputs()
    layer = _built(MultiHeadAttention(num_heads=H), q, c)
    with pytest.raises(ValueError, match=r"`query` and `context`.*context.shape=\(3, 7, 16\)"):
        layer(q, np.concatenate([c, c[:1]]))


def test_masks_of_batch_size_one_broadcast_as_their_tiled_copies():
    q, c = _inputs()
    layer = _built(MultiHeadAttention(num_heads=H), q, c)
    padding, attention = _random_masks()
    for name, mask in (("padding_mask", padding[:1]), ("attention_mask", attention[:1])):
        tiled = np.repeat(mask, B, axis=0)
        np.testing.assert_allclose(
            np.asarray(layer(q, c, **{name: mask})),
            np.asarray(layer(q, c, **{name: tiled})),
            atol=1e-6,
        )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_heads": True}, "num_heads=True"),
        ({"num_heads": 2.0}, "num_heads=2.0"),
        ({"num_heads": "2"}, "num_heads='2'"),
        ({"num_heads": 2, "head_dim": False}, "head_dim=False"),
        ({"num_heads": 2, "dropout": "0.1"}, "dropout='0.1'"),
        ({"num_heads": 2, "dropout": None}, "dropout=None"),
        ({"num_heads": 2, "use_bias": "no"}, "`use_bias` must be True or False.*use_bias='no'"),
    ],
)
def test_strings_bools_and_none_are_refused_by_name_before_they_build_a_layer(kwargs, message):
    """`num_heads=True` built one head, `use_bias="no"` biases (a non-empty string is
    truthy), and `dropout=None` failed in a comparison naming no argument."""
    with pytest.raises(ValueError, match=message):
        MultiHeadAttention(**kwargs)


def test_numpy_integer_sizes_are_accepted_and_kept_as_python_ints():
    layer = MultiHeadAttention(np.int64(2), head_dim=np.int32(4), output_dim=np.int64(6))
    assert (layer.num_heads, layer.head_dim, layer.output_dim) == (2, 4, 6)
    assert all(type(v) is int for v in (layer.num_heads, layer.head_dim, layer.output_dim))
    assert tuple(layer(np.zeros((1, 3, 8), "float32")).shape) == (1, 3, 6)


@pytest.mark.parametrize(
    "where, argument, ours",
    [
        ("constructor", {"key_dim": 4}, "`head_dim`"),
        ("constructor", {"value_dim": 4}, "`head_dim`"),
        ("call", {"use_causal_mask": True}, "`causal=True`"),
        ("call", {"return_attention_scores": True}, r"`attend\(query"),
        ("call", {"value": np.zeros((1, 3, 8), "float32")}, "`context`"),
        ("call", {"value_mask": np.ones((1, 3), bool)}, r"`padding_mask` \(B, S\)"),
        ("call", {"key_mask": np.ones((1, 3), bool)}, r"`padding_mask` \(B, S\)"),
        ("call", {"query_mask": np.ones((1, 3), bool)}, r"`attention_mask` \(B, T, S\)"),
        ("constructor", {"attention_axes": (1,)}, "not supported.*sequence axis"),
        ("constructor", {"kernel_regularizer": "l2"}, "not supported.*`weight_decay`"),
        ("constructor", {"seed": 1}, "not supported.*set_random_seed"),
    ],
)
def test_keras_multi_head_attention_arguments_are_refused_naming_ours(where, argument, ours):
    """Keras' "Unrecognized keyword arguments" (constructor) and Python's "unexpected
    keyword argument" (call; a bare TypeError for Keras' `query_mask`, `value_mask` and
    `key_mask`) named neither the layer's own argument nor the difference."""
    name = next(iter(argument))
    with pytest.raises(ValueError, match=rf"^`{name}` is an argument of Keras' .*{ours}") as error:
        if where == "constructor":
            MultiHeadAttention(2, **argument)
        else:
            MultiHeadAttention(2)(np.zeros((1, 3, 8), "float32"), **argument)
    assert "\n" not in str(error.value)


def test_a_float_mask_is_refused_since_an_additive_mask_would_be_read_inverted():
    """Cast to bool, the additive mask `where(real, 0, -1e9)` read as `~real`: the old
    output equalled that of the inverted boolean mask, not that of `real`."""
    q, _ = _inputs()
    layer = _built(MultiHeadAttention(num_heads=H), q)
    real = np.arange(T)[None] < np.array([[3], [5]])  # (B, S)
    additive = np.where(real, 0.0, -1e9).astype("float32")
    assert not np.allclose(np.asarray(layer(q, padding_mask=~real)), layer(q, padding_mask=real))
    with pytest.raises(ValueError, match="`padding_mask` must be boolean.*float32.*additive"):
        layer(q, padding_mask=additive)
    causal_additive = np.where(np.tril(np.ones((T, T))) > 0, 0.0, -1e9).astype("float32")
    with pytest.raises(ValueError, match="`attention_mask` must be boolean.*additive"):
        layer(q, attention_mask=np.repeat(causal_additive[None], B, axis=0))
    # 0/1 integers are read as the boolean mask they spell.
    np.testing.assert_allclose(
        np.asarray(layer(q, padding_mask=real.astype("int32"))),
        np.asarray(layer(q, padding_mask=real)),
        atol=1e-6,
    )


def test_causal_takes_a_bool_only():
    """`causal="no"` is truthy: it masked the future as `causal=True` does."""
    q, _ = _inputs()
    layer = _built(MultiHeadAttention(num_heads=H), q)
    with pytest.raises(ValueError, match="`causal` must be True or False. Received: causal='no'"):
        layer(q, causal="no")


def _keras_attention(ref, query, context, **kwargs):
    """Keras' `(output, scores)` as numpy arrays."""
    out, scores = ref(query, context, context, return_attention_scores=True, **kwargs)
    return np.asarray(out), np.asarray(scores)


def test_attend_compute_key_value_and_the_cache_build_a_layer_never_called():
    """Each failed with AttributeError ('query_dense', 'key_value_dense') until the layer
    had been called once, though the `return_attention_scores` refusal points to them."""
    q, c = _inputs()
    layer = MultiHeadAttention(num_heads=H)
    out, scores = layer.attend(q, layer.compute_key_value(c))
    ref = _keras_mha_with_our_weights(layer)
    expected_out, expected_scores = _keras_attention(ref, q, c)
    np.testing.assert_allclose(np.asarray(out), expected_out, atol=1e-5)
    np.testing.assert_allclose(np.asarray(scores), expected_scores, atol=1e-6)

    layer = MultiHeadAttention(num_heads=H)
    key_value = KeyValue(*rng.normal(size=(2, B, H, S, D // H)).astype("float32"))
    _, scores = layer.attend(q, key_value)
    assert layer.built and tuple(scores.shape) == (B, H, T, S)

    layer = MultiHeadAttention(num_heads=H)
    empty = KeyValue(np.zeros((B, H, 0, D // H), "float32"), np.zeros((B, H, 0, D // H), "float32"))
    out, present = layer.call_with_cache(q, empty, causal=True)
    expected, _ = _keras_attention(_keras_mha_with_our_weights(layer), q, q, use_causal_mask=True)
    np.testing.assert_allclose(np.asarray(out), expected, atol=1e-5)
    assert tuple(present.key.shape) == (B, H, T, D // H)


def test_a_layer_built_by_compute_key_value_refuses_queries_of_another_width_by_name():
    """Built from the context alone, the layer expects queries of the context's width."""
    q, _ = _inputs()
    wide = rng.normal(size=(B, S, 2 * D)).astype("float32")
    layer = MultiHeadAttention(num_heads=H)
    key_value = layer.compute_key_value(wide)
    with pytest.raises(ValueError, match=r"width D=32 .*`build\(query_shape, context_shape\)`"):
        layer.attend(q, key_value)
    layer = MultiHeadAttention(num_heads=H)
    layer.build(q.shape, wide.shape)
    out, _ = layer.attend(q, layer.compute_key_value(wide))
    np.testing.assert_allclose(np.asarray(out), np.asarray(layer(q, wide)), atol=1e-6)


@pytest.mark.parametrize("length", [None, T])
@pytest.mark.parametrize("causal", [False, True])
def test_attend_on_keras_inputs_makes_a_functional_model_equal_to_keras_attention(
    length, causal, tmp_path
):
    """The README's `attend(query, compute_key_value(context))` on `keras.Input`s: the
    causal mask failed on lengths of None, and a reshape stored the unknown B (and L)
    as None for the model's runs."""
    q, _ = _inputs()
    real = np.arange(T)[None] < np.array([[3], [5]])  # (B, S): right padding
    layer = _built(MultiHeadAttention(num_heads=H), q)
    query = keras.Input((length, D))
    padding = keras.Input((length,), dtype="bool")
    outputs = layer.attend(query, layer.compute_key_value(query), padding, causal=causal)
    model = keras.Model([query, padding], list(outputs))
    mask = np.broadcast_to(real[:, None, :], (B, T, T))
    if causal:
        mask = mask & np.tril(np.ones((T, T), bool))
    expected = _keras_attention(_keras_mha_with_our_weights(layer), q, q, attention_mask=mask)
    model.save(tmp_path / "attend.keras")
    loaded = keras.models.load_model(tmp_path / "attend.keras")
    for outputs in (model([q, real]), loaded([q, real])):
        for got, want in zip(outputs, expected, strict=True):
            np.testing.assert_allclose(np.asarray(got), want, atol=1e-5)


def _causal_reference(t, s):
    """Query i sees keys up to i + s - t: the last query is aligned with the last key."""
    return np.arange(s)[None, :] <= np.arange(t)[:, None] + (s - t)


def test_causal_with_fewer_queries_than_keys_aligns_the_last_query_with_the_last_key():
    q, c = _inputs()  # T=5 < S=7
    layer = _built(MultiHeadAttention(num_heads=H), q, c)
    _, scores = layer.attend(q, layer.compute_key_value(c), causal=True)
    mask = np.broadcast_to(_causal_reference(T, S), (B, T, S))
    _, expected = _keras_attention(_keras_mha_with_our_weights(layer), q, c, attention_mask=mask)
    np.testing.assert_allclose(np.asarray(scores), expected, atol=1e-6)


def test_causal_with_more_queries_than_keys_is_refused():
    """The first T - S queries saw no key and spread evenly over all keys, later ones
    included, without a word."""
    q, c = _inputs(t=S, s=T)
    layer = _built(MultiHeadAttention(num_heads=H), q, c)
    with pytest.raises(ValueError, match="at least as many keys as queries.*first 2 queries"):
        layer(q, c, causal=True)
    with pytest.raises(ValueError, match="query_length=7, key_length=5"):
        layer.attend(q, layer.compute_key_value(c), causal=True)


def test_the_use_causal_mask_refusal_gives_the_mask_that_reproduces_keras():
    """It named `causal=True` alone, which for T < S aligns the queries with the last keys
    where Keras' `use_causal_mask` aligns them with the first."""
    with pytest.raises(ValueError) as error:
        MultiHeadAttention(2)(np.zeros((1, 3, 8), "float32"), use_causal_mask=True)
    message = str(error.value)
    assert "last query with the last key" in message
    assert "`attention_mask=np.tril(np.ones((T, S), bool))`" in message
    q, c = _inputs()
    layer = _built(MultiHeadAttention(num_heads=H), q, c)
    tril = np.tril(np.ones((T, S), bool))  # what the message says to pass, as it is
    ref = _keras_mha_with_our_weights(layer)
    expected, _ = _keras_attention(ref, q, c, use_causal_mask=True)
    np.testing.assert_allclose(np.asarray(layer(q, c, attention_mask=tril)), expected, atol=1e-5)
    # A (T, S) mask applies to every sequence of the batch, as in Keras (refused as not
    # (B, T, S) before), and combines with a padding mask.
    band = np.abs(np.arange(T)[:, None] - np.arange(S)[None, :]) <= 2  # (T, S)
    real = np.arange(S)[None] < np.array([[4], [7]])  # (B, S)
    expected, _ = _keras_attention(ref, q, c, attention_mask=band[None] & real[:, None, :])
    got = layer(q, c, padding_mask=real, attention_mask=band)
    np.testing.assert_allclose(np.asarray(got), expected, atol=1e-5)


def test_a_float64_layer_computes_its_softmax_in_float64():
    """The softmax was cast to float32 in every layer: probabilities off by 4e-8."""
    q, c = (x.astype("float64") for x in _inputs())
    layer = MultiHeadAttention(num_heads=H, dtype="float64")
    layer(q, c)
    out, scores = layer.attend(q, layer.compute_key_value(c))
    expected, expected_scores = np_attention(q, c, *mha_weights(layer), num_heads=H)
    assert scores.dtype == "float64"
    np.testing.assert_allclose(np.asarray(scores), expected_scores, rtol=0, atol=1e-13)
    np.testing.assert_allclose(np.asarray(out), expected, rtol=0, atol=1e-12)


def test_a_float16_layer_still_computes_its_softmax_in_float32():
    q, c = _inputs()
    layer = MultiHeadAttention(num_heads=H, dtype="mixed_float16")
    layer(q, c)
    _, scores = layer.attend(q, layer.compute_key_value(c))
    assert scores.dtype == "float32"


def test_two_layers_attend_on_keras_inputs_in_one_model_that_reloads_unchanged(tmp_path):
    """Called directly on `keras.Input`s, `compute_key_value` and `attend` made each
    layer's projections (`query`, `key_value`, `attention_output`) the model's operations:
    Keras refused a second layer ("The name "key_value" is used 2 times in the model")."""
    q, _ = _inputs()
    first = _built(MultiHeadAttention(num_heads=H), q)
    second = _built(MultiHeadAttention(num_heads=H), q)
    query = keras.Input((None, D))
    h, first_scores = first.attend(query, first.compute_key_value(query), causal=True)
    h, second_scores = second.attend(h, second.compute_key_value(h))
    model = keras.Model(query, [h, first_scores, second_scores])
    assert model.layers[1:] == [first, second]  # after the InputLayer
    ref = _keras_attention(_keras_mha_with_our_weights(first), q, q, use_causal_mask=True)
    h_ref = ref[0]
    second_ref = _keras_attention(_keras_mha_with_our_weights(second), h_ref, h_ref)
    expected = [second_ref[0], ref[1], second_ref[1]]
    model.save(tmp_path / "two.keras")
    loaded = keras.models.load_model(tmp_path / "two.keras")
    for outputs in (model(q), loaded(q)):
        for got, want in zip(outputs, expected, strict=True):
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-5)


def test_attend_reads_the_keras_mask_of_the_context_as_a_call_does():
    """`compute_key_value` of a context from `Embedding(mask_zero=True)`: `attend` ignored
    its mask (a third of row 0's attention on padding keys) where a call reads it."""
    ids = np.array([[3, 4, 5, 0, 0, 0, 0], [5, 6, 7, 8, 9, 1, 2]])
    context = keras.layers.Embedding(10, D, mask_zero=True)(ids)
    q, _ = _inputs()
    layer = _built(MultiHeadAttention(num_heads=H), q, context)
    out, scores = layer.attend(q, layer.compute_key_value(context))
    called = layer(q, context)
    mask = np.broadcast_to((ids != 0)[:, None, :], (B, T, S))
    # Keras' layer drops the Keras mask of its inputs: it runs last, on an explicit mask.
    expected = _keras_attention(_keras_mha_with_our_weights(layer), q, context, attention_mask=mask)
    np.testing.assert_allclose(np.asarray(out), expected[0], atol=1e-5)
    np.testing.assert_allclose(np.asarray(scores), expected[1], atol=1e-6)
    np.testing.assert_allclose(np.asarray(called), expected[0], atol=1e-5)


@pytest.mark.parametrize(
    "shape, field",
    [((3, H, 2, D // H), "B=2"), ((B, H + 1, 2, D // H), "H=4"), ((B, H, 2, 3), "Dh=4")],
)
def test_a_cache_of_another_batch_size_heads_or_head_width_is_refused_by_name(shape, field):
    """It failed inside TensorFlow's ConcatV2 ("Dimension 1 in both shapes must be
    equal"), naming neither the cache nor the size."""
    q, _ = _inputs()
    layer = _built(MultiHeadAttention(num_heads=H), q)
    past = np.zeros(shape, "float32")
    with pytest.raises(
        ValueError, match=rf"`cache.key` must be .*{field}.*{re.escape(str(shape))}"
    ):
        layer.call_with_cache(q, KeyValue(past, past))


def test_a_cache_given_as_a_plain_pair_is_read_as_a_key_value():
    """A `(key, value)` tuple passed the check and then failed on `cache.key`."""
    q, _ = _inputs()
    layer = _built(MultiHeadAttention(num_heads=H), q)
    key, value = rng.normal(size=(2, B, H, 3, D // H)).astype("float32")
    plain, _ = layer.call_with_cache(q, (key, value), causal=True)
    named, _ = layer.call_with_cache(q, KeyValue(key, value), causal=True)
    np.testing.assert_array_equal(np.asarray(plain), np.asarray(named))
    with pytest.raises(ValueError, match="must be a `KeyValue"):
        layer.call_with_cache(q, [key, value])


def _message(fn):
    with pytest.raises(ValueError) as error:
        fn()
    return str(error.value)


@pytest.mark.parametrize(
    "t, s, kwargs",
    [
        (T, S, {"attention_mask": np.ones((B, T, S - 1), bool)}),
        (T, S, {"padding_mask": np.ones((B + 1, S), bool)}),
        (T, S, {"attention_mask": np.full((T, S), -1e9, "float32")}),
        (T, 3, {"causal": True}),
        (T, S, {"causal": "yes"}),
    ],
)
def test_attend_on_keras_inputs_refuses_bad_masks_as_on_arrays(t, s, kwargs):
    """On `keras.Input`s `attend` goes through `__call__`, where Keras wrapped the error
    in its "Could not automatically infer the output shape" text, with the private
    `_entry` and `_key_value` among the "Arguments received"."""
    q, c = _inputs(t=t, s=s)
    layer = _built(MultiHeadAttention(num_heads=H), q)
    eager = _message(lambda: layer.attend(q, layer.compute_key_value(c), **kwargs))
    query, context = keras.Input((t, D), batch_size=B), keras.Input((s, D), batch_size=B)
    symbolic = _message(lambda: layer.attend(query, layer.compute_key_value(context), **kwargs))
    assert symbolic == eager
    assert "_entry" not in symbolic


class _ScaledWithoutPrivateKeywords(MultiHeadAttention):
    def call(
        self, query, context=None, padding_mask=None, attention_mask=None, causal=False,
        training=None,
    ):  # fmt: skip
        return 2.0 * super().call(query, context, padding_mask, attention_mask, causal, training)


class _ScaledWithPrivateKeywords(MultiHeadAttention):
    """As the class docstring says: the private keywords passed on, and the entry
    points' results returned as they are."""

    def call(
        self, query, context=None, padding_mask=None, attention_mask=None, causal=False,
        training=None, _entry=None, _key_value=None,
    ):  # fmt: skip
        output = super().call(
            query, context, padding_mask, attention_mask, causal, training, _entry, _key_value
        )
        return output if _entry else 2.0 * output


def test_an_overridden_call_without_the_private_keywords_is_refused_by_name_on_keras_inputs():
    """Keras raised a TypeError ("got an unexpected keyword argument '_entry'") from
    deep inside its `__call__`; eager calls did not go through `call` at all."""
    layer = _ScaledWithoutPrivateKeywords(num_heads=H)
    q, c = _inputs()
    layer.attend(q, layer.compute_key_value(c))  # eager: fine
    with pytest.raises(
        ValueError, match=r"`_ScaledWithoutPrivateKeywords.call` .* without all of its keywords"
    ):
        layer.compute_key_value(keras.Input((S, D)))
    with pytest.raises(ValueError, match=r"Missing: _entry, _key_value"):
        layer.attend(keras.Input((T, D)), layer.compute_key_value(c))


def test_an_overridden_call_with_the_private_keywords_attends_on_keras_inputs_as_on_arrays():
    layer = _ScaledWithPrivateKeywords(num_heads=H)
    q, c = _inputs()
    layer(q, c)
    query, context = keras.Input((T, D)), keras.Input((S, D))
    model = keras.Model([query, context], layer.attend(query, layer.compute_key_value(context)))
    expected = layer.attend(q, layer.compute_key_value(c))
    for got, want in zip(model([q, c]), expected, strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-6)
    np.testing.assert_allclose(np.asarray(layer(q, c)), 2.0 * np.asarray(expected[0]), atol=1e-5)
