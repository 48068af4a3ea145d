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
    ],
)
def test_keras_multi_head_attention_arguments_are_refused_naming_ours(where, argument, ours):
    """Keras' "Unrecognized keyword arguments" (constructor) and Python's "unexpected
    keyword argument" (call) named neither the layer's own argument nor the difference."""
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
