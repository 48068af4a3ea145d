import keras
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import mha_weights, np_attention, np_gelu, np_layer_norm
from transformer_zoo.layers import BlockCache, KeyValue, TransformerBlock

B, T, S, D, H, F = 2, 6, 5, 16, 4, 32
rng = np.random.default_rng(1)


def _randomize(layer):
    for w in layer.weights:
        w.assign(rng.normal(size=w.shape).astype("float32") * (0.3 if len(w.shape) > 1 else 0.1))
    return layer


def _np_block(block, x, context=None, causal=False, padding=None, context_padding=None):
    """The block written from the paper's equations, with the block's own weights."""
    eps = block.layer_norm_epsilon
    t = x.shape[1]

    def ln(layer, h):
        gamma, beta = (np.asarray(w) for w in layer.weights)
        return np_layer_norm(h, gamma, beta, eps)

    def ffn(h):
        w1, b1 = (np.asarray(w) for w in block.feed_forward.intermediate_dense.weights)
        w2, b2 = (np.asarray(w) for w in block.feed_forward.output_dense.weights)
        act = {"relu": lambda z: np.maximum(z, 0), "gelu": np_gelu}[block.activation]
        return act(h @ w1 + b1) @ w2 + b2

    def self_att(h):
        mask = np.ones((h.shape[0], t, t), bool)
        if causal:
            mask &= np.tril(np.ones((t, t), bool))
        if padding is not None:
            mask &= padding[:, None, :]
        return np_attention(h, h, *mha_weights(block.self_attention), num_heads=H, mask=mask)[0]

    def cross_att(h):
        mask = None
        if context_padding is not None:
            mask = np.broadcast_to(context_padding[:, None, :], (h.shape[0], t, context.shape[1]))
        layer = block.cross_attention_layer
        return np_attention(h, context, *mha_weights(layer), num_heads=H, mask=mask)[0]

    sublayers = [(block.self_attention_norm, self_att)]
    if context is not None:
        sublayers.append((block.cross_attention_norm, cross_att))
    sublayers.append((block.feed_forward_norm, ffn))
    for norm, fn in sublayers:
        x = x + fn(ln(norm, x)) if block.norm_first else ln(norm, x + fn(x))
    return x


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_ln", "pre_ln"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_block_matches_numpy_block(norm_first, activation):
    x = rng.normal(size=(B, T, D)).astype("float32")
    padding = np.ones((B, T), bool)
    padding[1, -2:] = False
    block = TransformerBlock(H, F, activation=activation, norm_first=norm_first)
    block(x)
    _randomize(block)
    out = np.asarray(block(x, padding_mask=padding))
    expected = _np_block(block, x, padding=padding)
    np.testing.assert_allclose(out, expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_ln", "pre_ln"])
def test_decoder_block_with_cross_attention_matches_numpy_block(norm_first):
    x = rng.normal(size=(B, T, D)).astype("float32")
    context = rng.normal(size=(B, S, D)).astype("float32")
    context_padding = np.ones((B, S), bool)
    context_padding[0, -2:] = False
    block = TransformerBlock(H, F, norm_first=norm_first, causal=True, cross_attention=True)
    block(x, context=context)
    _randomize(block)
    out = np.asarray(block(x, context=context, context_padding_mask=context_padding))
    expected = _np_block(block, x, context, causal=True, context_padding=context_padding)
    np.testing.assert_allclose(out, expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("cross", [False, True], ids=["self_only", "with_cross"])
@pytest.mark.parametrize("norm_first", [False, True], ids=["post_ln", "pre_ln"])
def test_cached_decoding_matches_full_causal_pass(cross, norm_first):
    x = rng.normal(size=(B, T, D)).astype("float32")
    context = rng.normal(size=(B, S, D)).astype("float32") if cross else None
    block = TransformerBlock(H, F, norm_first=norm_first, causal=True, cross_attention=cross)
    full = np.asarray(block(x, context=context))
    cache = block.initial_cache(B, context)
    steps = []
    for t in range(T):
        out, cache = block.call_with_cache(x[:, t : t + 1], cache)
        steps.append(np.asarray(out))
    assert (cache.cross_attention is not None) == cross
    assert cache.self_attention.key.shape == (B, H, T, D // H)
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=1e-5)


def test_the_cached_step_reads_the_cross_attention_keys_from_the_cache():
    x = rng.normal(size=(B, T, D)).astype("float32")
    context = rng.normal(size=(B, S, D)).astype("float32")
    block = TransformerBlock(H, F, causal=True, cross_attention=True)
    block.build((B, T, D), (B, S, D))
    cache = block.initial_cache(B, context)
    out, _ = block.call_with_cache(x, cache)
    np.testing.assert_allclose(np.asarray(out), np.asarray(block(x, context=context)), atol=1e-5)
    zeroed = cache._replace(
        cross_attention=KeyValue(*(np.zeros_like(t) for t in cache.cross_attention))
    )
    other, _ = block.call_with_cache(x, zeroed)
    assert not np.allclose(np.asarray(other), np.asarray(out), atol=1e-3)


def test_attention_scores_are_returned_per_sublayer():
    x = rng.normal(size=(B, T, D)).astype("float32")
    context = rng.normal(size=(B, S, D)).astype("float32")
    block = TransformerBlock(H, F, causal=True, cross_attention=True)
    expected = np.asarray(block(x, context=context))
    out, scores = block.call_with_attention_scores(x, context=context)
    np.testing.assert_allclose(np.asarray(out), expected, atol=1e-6)
    assert scores.self_attention.shape == (B, H, T, T)
    assert scores.cross_attention.shape == (B, H, T, S)
    assert np.all(np.triu(np.asarray(scores.self_attention)[0, 0], k=1) == 0)


@settings(max_examples=10, deadline=None)
@given(
    length=st.integers(2, 7),
    t=st.integers(0, 6),
    norm_first=st.booleans(),
    seed=st.integers(0, 999),
)
def test_causal_block_outputs_up_to_t_ignore_changes_after_t(length, t, norm_first, seed):
    t = t % length
    local = np.random.default_rng(seed)
    x = local.normal(size=(2, length, 8)).astype("float32")
    block = TransformerBlock(2, 16, norm_first=norm_first, causal=True)
    before = np.asarray(block(x))
    x2 = x.copy()
    x2[:, t + 1 :] += 1.0
    np.testing.assert_allclose(np.asarray(block(x2))[:, : t + 1], before[:, : t + 1], atol=1e-5)


@settings(max_examples=8, deadline=None)
@given(real=st.integers(1, 6), extra=st.integers(1, 4), seed=st.integers(0, 999))
def test_more_right_padding_never_changes_block_outputs_at_real_positions(real, extra, seed):
    local = np.random.default_rng(seed)
    x = local.normal(size=(1, real + extra, 8)).astype("float32")
    block = TransformerBlock(2, 16)
    base = np.asarray(block(x[:, :real], padding_mask=np.ones((1, real), bool)))
    mask = np.arange(real + extra)[None] < real
    out = np.asarray(block(x, padding_mask=mask))
    np.testing.assert_allclose(out[:, :real], base, atol=1e-5)


def test_bad_arguments_name_the_argument():
    with pytest.raises(ValueError, match="dropout=-0.1"):
        TransformerBlock(2, 8, dropout=-0.1)
    with pytest.raises(ValueError, match="attention_dropout=1"):
        TransformerBlock(2, 8, attention_dropout=1)
    with pytest.raises(ValueError, match="activation='tanh'"):
        TransformerBlock(2, 8, activation="tanh")
    with pytest.raises(ValueError, match="layer_norm_epsilon=0"):
        TransformerBlock(2, 8, layer_norm_epsilon=0)
    with pytest.raises(ValueError, match="d_model=6, num_heads=4"):
        TransformerBlock(4, 8)(np.zeros((1, 2, 6), "float32"))
    block = TransformerBlock(2, 8, cross_attention=True)
    with pytest.raises(ValueError, match="context"):
        block(np.zeros((1, 2, 8), "float32"))


def test_the_scored_call_reads_the_keras_masks_as_the_plain_call_does():
    """Inputs carrying Keras masks (`Embedding(mask_zero=True)`): the scored call's outputs
    are the plain call's, which equal the call with the masks passed explicitly, and padded
    keys get probability 0."""
    ids = np.array([[3, 4, 5, 0, 0, 0], [6, 7, 8, 9, 1, 0]])
    source_ids = np.array([[2, 3, 0, 0, 0], [4, 5, 6, 7, 8]])
    x = keras.layers.Embedding(12, D, mask_zero=True)(ids)
    context = keras.layers.Embedding(12, D, mask_zero=True)(source_ids)
    block = TransformerBlock(H, F, cross_attention=True)
    explicit = np.asarray(
        block(
            np.asarray(x),
            context=np.asarray(context),
            padding_mask=ids != 0,
            context_padding_mask=source_ids != 0,
        )
    )
    plain = np.asarray(block(x, context=context))
    out, scores = block.call_with_attention_scores(x, context=context)
    np.testing.assert_allclose(plain, explicit, atol=1e-6)
    np.testing.assert_allclose(np.asarray(out), explicit, atol=1e-6)
    self_scores, cross_scores = (
        np.asarray(scores.self_attention),
        np.asarray(scores.cross_attention),
    )
    assert np.all(np.moveaxis(self_scores, 3, 1)[ids == 0] == 0.0)  # (B, S) padded keys
    assert np.all(np.moveaxis(cross_scores, 3, 1)[source_ids == 0] == 0.0)


def test_a_context_of_another_batch_size_is_refused_by_name():
    block = TransformerBlock(H, F, cross_attention=True)
    with pytest.raises(ValueError, match=r"`inputs` and `context`.*context.shape=\(3, 5, 16\)"):
        block(np.zeros((B, T, D), "float32"), context=np.zeros((3, S, D), "float32"))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"norm_first": "post"}, "`norm_first` must be True or False. Received: norm_first='post'"),
        ({"causal": "no"}, "causal='no'"),
        ({"cross_attention": 1}, "cross_attention=1"),
        ({"num_heads": True}, "num_heads=True"),
        ({"attention_dropout": None}, "attention_dropout=None"),
        ({"layer_norm_epsilon": "1e-5"}, "layer_norm_epsilon='1e-5'"),
    ],
)
def test_strings_bools_and_none_are_refused_by_name(kwargs, message):
    """`norm_first="post"` built a Pre-LN block (a non-empty string is truthy), and
    `attention_dropout=None` failed in a comparison naming no argument."""
    with pytest.raises(ValueError, match=message):
        TransformerBlock(**{"num_heads": 2, "intermediate_dim": 8, **kwargs})


def test_initial_cache_refuses_a_fractional_batch_size_by_name():
    block = TransformerBlock(2, 8, causal=True)
    block.build((None, None, 8))
    with pytest.raises(ValueError, match="`batch_size` must be a non-negative integer.*2.0"):
        block.initial_cache(2.0)
    assert tuple(block.initial_cache(np.int64(2)).self_attention.key.shape) == (2, 2, 0, 4)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_ln", "pre_ln"])
def test_cached_steps_read_the_contexts_keras_mask_as_the_plain_call_does(norm_first):
    """A context carrying a Keras mask (`Embedding(mask_zero=True)`): the steps from
    `initial_cache(B, context)` without a `context_padding_mask` equal the paper's block
    with that mask, as the plain call does. They attended to the encoder's padding (off by
    1.2)."""
    source_ids = np.array([[2, 3, 0, 0, 0], [4, 5, 6, 7, 8]])
    context = keras.layers.Embedding(12, D, mask_zero=True)(source_ids)
    x = rng.normal(size=(B, T, D)).astype("float32")
    block = TransformerBlock(H, F, norm_first=norm_first, causal=True, cross_attention=True)
    block(x, context=context)
    _randomize(block)
    expected = _np_block(
        block, x, np.asarray(context), causal=True, context_padding=source_ids != 0
    )
    cache = block.initial_cache(B, context)
    steps = []
    for t in range(T):
        out, cache = block.call_with_cache(x[:, t : t + 1], cache)
        steps.append(np.asarray(out))
    np.testing.assert_allclose(np.concatenate(steps, axis=1), expected, atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(np.asarray(block(x, context=context)), expected, atol=1e-4)
    np.testing.assert_array_equal(np.asarray(cache.context_padding_mask), source_ids != 0)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
@pytest.mark.parametrize("norm_first", [False, True], ids=["post_ln", "pre_ln"])
def test_the_scored_and_cached_calls_cast_float32_inputs_as_a_call_does(policy, norm_first):
    """Under a mixed policy `__call__` casts float32 inputs to the compute dtype, keeping
    their Keras masks; the other entry points failed in the first residual sum (AddV2 of
    float32 and float16)."""
    ids = np.array([[3, 4, 5, 0, 0, 0], [6, 7, 8, 9, 1, 0]])
    masked = keras.layers.Embedding(12, D, mask_zero=True)(ids)  # float32, with its mask
    x = rng.normal(size=(B, T, D)).astype("float32")
    context = rng.normal(size=(B, S, D)).astype("float32")
    block = TransformerBlock(
        H, F, norm_first=norm_first, causal=True, cross_attention=True, dtype=policy
    )
    cases = [  # (the entry point's output, Keras' own cast of the same inputs)
        (block.call_with_attention_scores(masked, context=context)[0], block(masked, context)),
        (block.call_with_cache(x, block.initial_cache(B, context))[0], block(x, context)),
    ]
    for out, expected in cases:
        assert keras.backend.standardize_dtype(out.dtype) == block.compute_dtype
        np.testing.assert_allclose(
            np.asarray(keras.ops.cast(out, "float32")),
            np.asarray(keras.ops.cast(expected, "float32")),
            atol=1e-2,
        )


def test_the_scored_and_cached_calls_build_an_unbuilt_block_as_a_call_does():
    """Reached first, they built the attention sublayers but not the block, whose first
    call then rebuilt them: Keras refused ("cannot add new elements of state")."""
    x = rng.normal(size=(B, T, D)).astype("float32")
    context = rng.normal(size=(B, S, 12)).astype("float32")  # Dc ≠ D
    scored = TransformerBlock(H, F, causal=True, cross_attention=True)
    out, _ = scored.call_with_attention_scores(x, context=context)
    assert scored.built
    np.testing.assert_allclose(np.asarray(scored(x, context=context)), np.asarray(out), atol=1e-6)
    cached = TransformerBlock(H, F, causal=True)
    empty = KeyValue(np.zeros((B, H, 0, D // H), "float32"), np.zeros((B, H, 0, D // H), "float32"))
    out, _ = cached.call_with_cache(x, BlockCache(empty))
    np.testing.assert_allclose(np.asarray(cached(x)), np.asarray(out), atol=1e-5)


def test_initial_cache_refuses_a_batch_size_that_is_no_number_by_name():
    """`initial_cache("2")` failed in TensorFlow ("Can't convert Python sequence with
    mixed types to Tensor")."""
    block = TransformerBlock(2, 8, causal=True)
    block.build((None, None, 8))
    with pytest.raises(
        ValueError, match="`batch_size` must be an integer.*Received: batch_size='2'"
    ):
        block.initial_cache("2")


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_ln", "pre_ln"])
def test_cached_steps_read_the_inputs_keras_mask_as_the_plain_call_does(norm_first):
    """A left-padded prompt embedded with `Embedding(mask_zero=True)`, then two tokens:
    without a `padding_mask`, the steps attended to the prompt's padding (off by 1.6),
    though the docstring said the Keras masks are read as in a call."""
    ids = np.array([[0, 0, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6]])
    embedding = keras.layers.Embedding(12, D, mask_zero=True)
    block = TransformerBlock(H, F, norm_first=norm_first, causal=True)
    block.build((None, None, D))
    _randomize(block)
    x = np.asarray(embedding(ids))
    with np.errstate(invalid="ignore"):  # the padding queries' rows: no key, NaN
        expected = _np_block(block, x, causal=True, padding=ids != 0)
    cache = block.initial_cache(B)
    steps = []
    for start, stop in ((0, 4), (4, 5), (5, 6)):
        out, cache = block.call_with_cache(embedding(ids[:, start:stop]), cache)
        steps.append(np.asarray(out))
    real = ids != 0  # a padding query sees no key: its row is not compared
    got = np.concatenate(steps, axis=1)
    np.testing.assert_allclose(got[real], expected[real], atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(got[real], np.asarray(block(embedding(ids)))[real], atol=1e-5)
    np.testing.assert_array_equal(np.asarray(cache.padding_mask), real)


def _two_scored_blocks():
    """Two blocks' `call_with_attention_scores` on one `keras.Input`: `(model, blocks)`."""
    blocks = TransformerBlock(H, F, causal=True), TransformerBlock(H, F, norm_first=True)
    inputs = keras.Input((None, D))
    h, outputs = inputs, []
    for block in blocks:
        block.build((None, None, D))
        _randomize(block)
        h, scores = block.call_with_attention_scores(h)
        outputs.append(scores.self_attention)
    return keras.Model(inputs, [h, *outputs]), blocks


def test_two_blocks_scored_on_keras_inputs_make_one_model_of_their_calls():
    """Called directly on `keras.Input`s, `call_with_attention_scores` made each block's
    sublayers (`self_attention`'s `key_value`, the norms, `feed_forward`) the model's
    operations: Keras refused a second block ("The name "key_value" is used 2 times")."""
    model, (first, second) = _two_scored_blocks()
    assert model.layers[1:] == [first, second]  # after the InputLayer
    x = rng.normal(size=(B, T, D)).astype("float32")
    h, first_scores = first.call_with_attention_scores(x)
    _, second_scores = second.call_with_attention_scores(h)
    expected = [second(first(x)), first_scores.self_attention, second_scores.self_attention]
    for got, want in zip(model(x), expected, strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-5)


def test_a_model_of_two_scored_blocks_reloads_from_a_keras_file_unchanged(tmp_path):
    model, _ = _two_scored_blocks()
    model.save(tmp_path / "blocks.keras")
    loaded = keras.models.load_model(tmp_path / "blocks.keras")
    x = rng.normal(size=(B, T, D)).astype("float32")
    for got, want in zip(loaded(x), model(x), strict=True):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_two_blocks_step_on_keras_inputs_in_one_model_as_their_eager_steps():
    """`call_with_cache` on `keras.Input`s (the new tokens and a past cache) in a model of
    two blocks: Keras refused it as it did the scored call ("The name "self_attention"
    is used 2 times in the model")."""
    blocks = [TransformerBlock(H, F, causal=True), TransformerBlock(H, F, norm_first=True)]
    past = rng.normal(size=(4, B, H, 3, D // H)).astype("float32")  # P = 3
    x = rng.normal(size=(B, 2, D)).astype("float32")
    inputs = keras.Input((None, D))
    cache_inputs = [keras.Input((H, None, D // H)) for _ in range(4)]
    h, expected_h, outputs, expected = inputs, x, [], []
    for i, block in enumerate(blocks):
        block.build((None, None, D))
        _randomize(block)
        pair = slice(2 * i, 2 * i + 2)
        h, cache = block.call_with_cache(h, BlockCache(KeyValue(*cache_inputs[pair])))
        expected_h, expected_cache = block.call_with_cache(
            expected_h, BlockCache(KeyValue(*past[pair]))
        )
        outputs += cache.self_attention
        expected += expected_cache.self_attention
    model = keras.Model([inputs, *cache_inputs], [h, *outputs])
    assert [layer for layer in model.layers if isinstance(layer, TransformerBlock)] == blocks
    for got, want in zip(model([x, *past]), [expected_h, *expected], strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-5)


def _message(fn):
    with pytest.raises(ValueError) as error:
        fn()
    return str(error.value)


@pytest.mark.parametrize(
    "past_shape, kwargs",
    [
        ((B, H + 1, 3, D // H), {}),
        ((B, H, 3, D // H), {"padding_mask": np.ones((B, 3), bool)}),
        ((B, H, 3, D // H), {"padding_mask": np.full((B, 5), -1e9, "float32")}),
    ],
)
def test_a_step_on_keras_inputs_refuses_a_bad_cache_or_mask_as_on_arrays(past_shape, kwargs):
    """On `keras.Input`s `call_with_cache` goes through `__call__`, where Keras wrapped
    the error in its "Could not automatically infer the output shape" text, with the
    private `_entry`, `_cache` and `_keeps` among the "Arguments received"."""
    block = TransformerBlock(H, F, causal=True)
    block.build((None, None, D))
    x, past = np.ones((B, 2, D), "float32"), np.zeros(past_shape, "float32")
    eager = _message(lambda: block.call_with_cache(x, BlockCache(KeyValue(past, past)), **kwargs))
    inputs, cache = keras.Input((2, D), batch_size=B), keras.Input(past_shape[1:], batch_size=B)
    symbolic = _message(
        lambda: block.call_with_cache(inputs, BlockCache(KeyValue(cache, cache)), **kwargs)
    )
    assert symbolic == eager
    assert "_cache" not in symbolic


@pytest.mark.parametrize(
    "cross, context_length, kwargs",
    [
        (False, None, {"attention_mask": np.ones((B, T, T + 1), bool)}),
        (False, T, {}),
        (True, 3, {"context_padding_mask": np.ones((B, 4), bool)}),
        (True, 3, {"padding_mask": np.ones((B + 1, T), bool)}),
    ],
)
def test_the_scored_call_on_keras_inputs_refuses_bad_arguments_as_on_arrays(
    cross, context_length, kwargs
):
    block = TransformerBlock(H, F, cross_attention=cross)
    block.build((None, None, D), None if context_length is None else (None, None, D))
    x = np.ones((B, T, D), "float32")
    context = None if context_length is None else np.ones((B, context_length, D), "float32")
    eager = _message(lambda: block.call_with_attention_scores(x, context, **kwargs))
    inputs = keras.Input((T, D), batch_size=B)
    symbolic_context = None if context is None else keras.Input(context.shape[1:], batch_size=B)
    symbolic = _message(
        lambda: block.call_with_attention_scores(inputs, symbolic_context, **kwargs)
    )
    assert symbolic == eager
    assert "_entry" not in symbolic


class _DoubledWithoutPrivateKeywords(TransformerBlock):
    def call(self, inputs, context=None, padding_mask=None, **kwargs):
        return 2.0 * super().call(inputs, context, padding_mask, **kwargs)


def test_an_overridden_call_without_the_private_keywords_is_refused_by_name_on_keras_inputs():
    """Keras raised a TypeError, or refused the tensors mixed with other values in
    `**kwargs`, from deep inside its `__call__`."""
    block = _DoubledWithoutPrivateKeywords(H, F, causal=True)
    block.build((None, None, D))
    x = np.ones((B, 2, D), "float32")
    block.call_with_cache(x, block.initial_cache(B))  # eager: fine
    inputs, past = keras.Input((None, D)), keras.Input((H, None, D // H))
    with pytest.raises(ValueError, match=r"Missing: attention_mask, .*_entry, _cache, _keeps"):
        block.call_with_cache(inputs, BlockCache(KeyValue(past, past)))
    with pytest.raises(ValueError, match=r"`_DoubledWithoutPrivateKeywords.call` overrides"):
        block.call_with_attention_scores(inputs)
