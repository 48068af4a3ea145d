"""Generation with the Keras model through the one engine: the cache changes speed,
never results (the uncached reference recomputes everything)."""

import numpy as np
import pytest

from transformer_zoo.errors import InputError
from transformer_zoo.generation import BeamSearch, Greedy, Sampling, UncachedEngine, generate
from transformer_zoo.generation.decoding import keras_engine
from transformer_zoo.models import DecoderOnly, EncoderDecoder
from transformer_zoo.serving import load_onnx

SIZE = dict(num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32, max_length=64)


@pytest.fixture(scope="module")
def decoder_only():
    return DecoderOnly(40, **SIZE)


@pytest.fixture(scope="module")
def encoder_decoder():
    return EncoderDecoder(30, target_vocabulary_size=40, **SIZE)


# Unequal prompt lengths: right-padded, left-padded and full rows in one batch.
PROMPTS = {
    "token_ids": np.array([[5, 6, 7, 8, 9, 10], [11, 12, 0, 0, 0, 0], [0, 0, 0, 13, 14, 15]]),
}
SOURCES = {
    "encoder_token_ids": np.array([[3, 4, 5, 6, 7], [8, 9, 0, 0, 0], [10, 11, 12, 0, 0]]),
    "decoder_token_ids": np.array([[2, 0], [2, 7], [2, 0]]),  # start tokens, one row longer
}


def stepwise_logits(engine, inputs, feed):
    """(B, 1 + N, V) next-token logits while feeding the tokens `feed` (B, N)."""
    logits, state = engine.start(inputs)
    out = [logits]
    for column in feed.T:
        logits, state = engine.step(column, state)
        out.append(logits)
    return np.stack(out, axis=1)


@pytest.mark.parametrize("family", ["decoder_only", "encoder_decoder"])
def test_cached_logits_equal_full_recomputation_at_every_step(family, request):
    model = request.getfixturevalue(family)
    inputs = PROMPTS if family == "decoder_only" else SOURCES
    feed = np.random.default_rng(0).integers(1, 40, size=(3, 12))
    cached = stepwise_logits(keras_engine(model), inputs, feed)
    full = stepwise_logits(UncachedEngine(model), inputs, feed)
    np.testing.assert_allclose(cached, full, atol=1e-5)


def test_batched_prompts_of_different_lengths_match_each_prompt_alone(decoder_only):
    batch = generate(decoder_only, PROMPTS, 8).tokens
    for row, ids in enumerate(PROMPTS["token_ids"]):
        alone = generate(decoder_only, ids[ids != 0][None], 8).tokens
        np.testing.assert_array_equal(batch[row], alone[0])


def test_id_lists_are_masked_by_their_lengths_as_serving_reads_them(decoder_only):
    """Prompts as id lists of their own lengths (ragged), id 0 a token, not padding: as
    `ServedModel.generate_ids` and the server read them."""
    ragged = [[5, 6, 7], [8, 9], [0, 5, 6]]
    batch = generate(decoder_only, ragged, 4)
    for row, ids in enumerate(ragged):
        array = np.array([ids])
        alone = generate(decoder_only, {"token_ids": array, "padding_mask": array >= 0}, 4)
        np.testing.assert_array_equal(batch.tokens[row], alone.tokens[0])
        np.testing.assert_allclose(batch.scores[row], alone.scores[0], atol=1e-5)
    masked_zero = generate(decoder_only, [[5, 6]], 4)  # what id 0 as padding would give
    assert not np.allclose(batch.scores[2], masked_zero.scores[0], atol=1e-5)


@pytest.mark.parametrize("family", ["decoder_only", "encoder_decoder"])
@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_cached_and_uncached_decoding_give_identical_tokens(family, strategy, request):
    model = request.getfixturevalue(family)
    inputs = PROMPTS if family == "decoder_only" else SOURCES
    config = BeamSearch(num_beams=3) if strategy == "beam" else Greedy()
    cached = generate(model, inputs, 10, config, eos_id=3)
    full = generate(model, inputs, 10, config, eos_id=3, use_cache=False)
    np.testing.assert_array_equal(cached.tokens, full.tokens)
    np.testing.assert_allclose(cached.scores, full.scores, rtol=1e-5)


@pytest.mark.parametrize("family", ["decoder_only", "encoder_decoder"])
def test_one_beam_and_top_k_one_reproduce_greedy_on_a_model(family, request):
    model = request.getfixturevalue(family)
    inputs = PROMPTS if family == "decoder_only" else SOURCES
    greedy = generate(model, inputs, 8).tokens
    np.testing.assert_array_equal(
        generate(model, inputs, 8, BeamSearch(num_beams=1)).tokens, greedy
    )
    top1 = generate(model, inputs, 8, Sampling(temperature=3.0, top_k=1, seed=5))
    np.testing.assert_array_equal(top1.tokens, greedy)


def test_seeded_sampling_repeats_and_seeds_differ(decoder_only):
    def draw(seed):
        return generate(decoder_only, PROMPTS, 16, Sampling(temperature=2.0, seed=seed)).tokens

    np.testing.assert_array_equal(draw(1), draw(1))
    assert not np.array_equal(draw(1), draw(2))


def test_encoder_decoder_starts_from_decoder_start_id(encoder_decoder):
    sources = {"encoder_token_ids": SOURCES["encoder_token_ids"]}
    with_id = generate(encoder_decoder, sources, 5, decoder_start_id=2).tokens
    explicit = {**sources, "decoder_token_ids": np.full((3, 1), 2)}
    np.testing.assert_array_equal(with_id, generate(encoder_decoder, explicit, 5).tokens)


@pytest.mark.parametrize(
    "inputs, kwargs, message",
    [
        (np.array([[1, 2, 3]]), {"max_new_tokens": 62}, "max_length"),
        (np.array([[1, 2, 40]]), {}, "token_ids"),
        (np.array([[1, 2, 3], [0, 0, 0]]), {}, "empty"),
        ({"tokens": np.array([[1]])}, {}, "token_ids"),
    ],
)
def test_bad_prompts_fail_before_reaching_the_model(decoder_only, inputs, kwargs, message):
    with pytest.raises(ValueError, match=message):
        generate(decoder_only, inputs, **{"max_new_tokens": 4, **kwargs})


def test_encoder_decoder_without_start_token_is_rejected(encoder_decoder):
    with pytest.raises(ValueError, match="decoder_start_id"):
        generate(encoder_decoder, {"encoder_token_ids": np.array([[3, 4]])}, 4)
    with pytest.raises(ValueError, match="max_length"):
        generate(
            encoder_decoder, {"encoder_token_ids": np.ones((1, 65), int)}, 4, decoder_start_id=2
        )


def test_generate_rejects_other_models():
    with pytest.raises(ValueError, match="model"):
        generate(object(), np.array([[1]]), 2)


@pytest.mark.parametrize(
    "inputs, received",
    [
        (SOURCES["encoder_token_ids"], "Received: inputs of type ndarray"),
        (
            {"decoder_token_ids": SOURCES["decoder_token_ids"]},
            "Received: keys ['decoder_token_ids']",
        ),
    ],
)
def test_encoder_decoder_inputs_without_the_source_name_the_keys_it_takes(
    encoder_decoder, inputs, received
):
    """A bare array, or a dict without `encoder_token_ids`, raised
    "KeyError: 'encoder_token_ids'"."""
    with pytest.raises(ValueError) as error:
        generate(encoder_decoder, inputs, 4, decoder_start_id=2)
    assert str(error.value) == (
        "The inputs of an encoder-decoder model are a dict of `encoder_token_ids` and "
        "optionally `encoder_padding_mask`, `decoder_token_ids`, `decoder_padding_mask`. "
        + received
    )


def test_an_input_key_the_model_does_not_read_is_refused_as_the_model_refuses_it(
    encoder_decoder,
):
    with pytest.raises(ValueError, match="does not read the input `source_ids`; it reads"):
        generate(encoder_decoder, {"source_ids": SOURCES["encoder_token_ids"]}, 4)


def test_an_input_key_of_another_name_is_refused_not_ignored(decoder_only):
    """`{"token_ids", "attention_mask"}` decoded as if no mask were given (ids != 0): the
    mask given as `padding_mask` changes the tokens, so ignoring it was a wrong result."""
    ids = np.array([[5, 6, 7, 8]])
    mask = np.array([[False, False, True, True]])
    masked = generate(decoder_only, {"token_ids": ids, "padding_mask": mask}, 6).tokens
    unmasked = generate(decoder_only, ids, 6).tokens
    assert not np.array_equal(masked, unmasked)
    with pytest.raises(
        ValueError, match="`attention_mask` \\(Hugging Face's name; ours is `padding_mask`"
    ):
        generate(decoder_only, {"token_ids": ids, "attention_mask": mask}, 6)


@pytest.mark.parametrize(
    "family, argument, value",
    [
        ("decoder_only", "eos_id", 40),  # V: no token is ever 40, so no row ends
        ("decoder_only", "eos_id", -1),
        ("decoder_only", "eos_id", 3.0),
        ("decoder_only", "pad_id", -5),  # written into the tokens after a row's EOS
        ("decoder_only", "pad_id", 40),
        ("encoder_decoder", "eos_id", 40),  # the target vocabulary (40), not the source's
        ("encoder_decoder", "decoder_start_id", 2.7),  # was read as 2
        ("encoder_decoder", "decoder_start_id", "2"),  # was read as 2
        ("encoder_decoder", "decoder_start_id", True),
    ],
)
def test_token_id_arguments_outside_the_output_vocabulary_are_refused(
    family, argument, value, request
):
    model = request.getfixturevalue(family)
    inputs = (
        PROMPTS if family == "decoder_only" else {"encoder_token_ids": SOURCES["encoder_token_ids"]}
    )
    options = {"decoder_start_id": 2} if family == "encoder_decoder" else {}
    with pytest.raises(ValueError) as error:
        generate(model, inputs, 4, **{**options, argument: value})
    assert str(error.value) == (
        f"`{argument}` must be a token id, an integer in [0, 40) (the model's output "
        f"vocabulary). Received: {argument}={value!r}"
    )


def test_token_id_arguments_take_numpy_integers_and_the_last_id(encoder_decoder):
    sources = {"encoder_token_ids": SOURCES["encoder_token_ids"]}
    expected = generate(encoder_decoder, sources, 4, eos_id=39, pad_id=0, decoder_start_id=2)
    got = generate(
        encoder_decoder,
        sources,
        4,
        eos_id=np.int64(39),
        pad_id=np.int32(0),
        decoder_start_id=np.int64(2),
    )
    np.testing.assert_array_equal(got.tokens, expected.tokens)
    with pytest.raises(ValueError, match="`use_cache` must be True or False"):
        generate(encoder_decoder, sources, 4, decoder_start_id=2, use_cache="no")


def test_an_encoder_decoder_names_its_target_start_as_serving_does(family_artifacts):
    """The Keras path said "The prompt (1 token) plus max_new_tokens=…" of a decoder that
    only holds its start token, where `ServedModel` says "The target start"."""
    art = family_artifacts("encoder-decoder", saved_model=False)
    served = load_onnx(art.export_dir)
    context = served.dims.max_length
    with pytest.raises(InputError) as expected:
        served.translate_ids([[27, 3]], context)
    with pytest.raises(InputError) as caught:
        generate(art.model, {"encoder_token_ids": [[27, 3]]}, context, decoder_start_id=2)
    assert str(caught.value) == str(expected.value)
    assert str(caught.value).startswith("The target start (1 token) leaves room for")
