"""Generation with the Keras model through the one engine: the cache changes speed,
never results (the uncached reference recomputes everything)."""

import numpy as np
import pytest

from transformer_zoo.generation import BeamSearch, Greedy, Sampling, UncachedEngine, generate
from transformer_zoo.generation.decoding import keras_engine
from transformer_zoo.models import DecoderOnly, EncoderDecoder

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
