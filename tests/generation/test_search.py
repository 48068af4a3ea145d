"""The numpy search algorithms, on hand-made engines whose probabilities we know."""

import dataclasses
import functools
import itertools

import numpy as np
import pytest

from transformer_zoo.generation import BeamSearch, Greedy, Sampling, search
from transformer_zoo.generation.beam_search import beam_search
from transformer_zoo.generation.greedy import greedy_search
from transformer_zoo.generation.sampling import filter_top_k_top_p, sample
from transformer_zoo.generation.search_common import ranked_log_probs, token_log_probs


class TableEngine:
    """A first-order Markov model: the next-token logits depend on the last token only.

    `table` is (V, V): row i holds the logits after token i. The state is the list of
    tokens so far per row, so `reorder` is plain indexing.
    """

    def __init__(self, table):
        self.table = np.asarray(table, dtype=np.float64)
        self.steps = 0

    def start(self, inputs):
        last = np.asarray(inputs["token_ids"])[:, -1]
        return self.table[last], np.asarray(inputs["token_ids"])

    def step(self, next_tokens, state):
        self.steps += 1
        state = np.concatenate([state, np.asarray(next_tokens)[:, None]], axis=1)
        return self.table[state[:, -1]], state

    def reorder(self, state, indices):
        return state[indices]


def random_engine(vocab=12, seed=0, scale=3.0):
    return TableEngine(np.random.default_rng(seed).normal(size=(vocab, vocab)) * scale)


def log_prob_of(engine, prompt, tokens):
    """Independent scorer: sum of log p(token | previous) under the table."""
    logp = np.log(np.exp(engine.table) / np.exp(engine.table).sum(-1, keepdims=True))
    previous = np.r_[prompt[-1], tokens[:-1]]
    return float(sum(logp[a, b] for a, b in zip(previous, tokens, strict=True)))


def myopic_engine():
    """Token 1 looks best now (0.6 vs 0.4), but everything after it is uncertain (at
    most 0.3), while token 2 is followed by EOS (3) with probability 0.99."""
    probs = np.full((5, 5), 1e-6)
    probs[0, [1, 2]] = 0.6, 0.4
    probs[1, :] = [0.1, 0.3, 0.3, 0.3, 1e-6]
    probs[2, 3] = 0.99
    probs[3, 3] = 1.0
    probs[4, 3] = 1.0
    return TableEngine(np.log(probs / probs.sum(-1, keepdims=True)))


PROMPT = {"token_ids": np.array([[0], [5], [7]])}


def test_greedy_picks_the_argmax_of_every_step():
    engine = random_engine()
    result = greedy_search(engine, PROMPT, 6)
    for row, prompt in enumerate(PROMPT["token_ids"]):
        last = prompt[-1]
        for token in result.tokens[row]:
            assert token == engine.table[last].argmax()
            last = token
        assert result.scores[row] == pytest.approx(log_prob_of(engine, prompt, result.tokens[row]))


def test_greedy_stops_each_row_at_eos_and_pads_after_it():
    engine = TableEngine(np.eye(4) * -5 + np.roll(np.eye(4), 1, axis=1) * 5)  # i -> i + 1
    result = greedy_search(engine, {"token_ids": np.array([[0], [1]])}, 5, eos_id=3, pad_id=0)
    np.testing.assert_array_equal(result.tokens, [[1, 2, 3], [2, 3, 0]])


def test_generation_stops_early_when_every_row_has_ended():
    engine = TableEngine(np.eye(4) * -5 + np.roll(np.eye(4), 1, axis=1) * 5)
    greedy_search(engine, {"token_ids": np.array([[1]])}, 50, eos_id=3)
    assert engine.steps == 1  # 2, then 3 = EOS: one step after the start


def test_beam_search_with_one_beam_equals_greedy():
    for seed in range(5):
        engine = random_engine(seed=seed)
        greedy = greedy_search(engine, PROMPT, 8, eos_id=4)
        beam = beam_search(engine, PROMPT, 8, BeamSearch(num_beams=1, length_penalty=1.0), eos_id=4)
        np.testing.assert_array_equal(beam.tokens, greedy.tokens)
        ends = greedy.tokens == 4
        lengths = np.where(ends.any(1), ends.argmax(1) + 1, greedy.tokens.shape[1])
        np.testing.assert_allclose(beam.scores, greedy.scores / lengths)


def test_beam_search_finds_a_sequence_greedy_misses_when_greedy_is_myopic():
    engine = myopic_engine()
    prompt = {"token_ids": np.array([[0]])}
    greedy = greedy_search(engine, prompt, 2, eos_id=3)
    beam = beam_search(engine, prompt, 2, BeamSearch(num_beams=2, length_penalty=0.0), eos_id=3)
    assert greedy.tokens[0, 0] == 1
    np.testing.assert_array_equal(beam.tokens[0], [2, 3])
    beam_logp = log_prob_of(engine, [0], beam.tokens[0])
    greedy_logp = log_prob_of(engine, [0], greedy.tokens[0])
    assert beam_logp > greedy_logp + 0.5
    assert beam.scores[0] == pytest.approx(beam_logp)


def test_beam_search_matches_exhaustive_search_on_short_outputs():
    """With K = V every prefix survives, so the best 3-token sequence must be found."""
    engine = random_engine(vocab=5, seed=3, scale=2.0)
    beam = beam_search(
        engine, {"token_ids": np.array([[1]])}, 3, BeamSearch(num_beams=25, length_penalty=0)
    )
    grid = np.stack(np.meshgrid(*[np.arange(5)] * 3, indexing="ij"), -1).reshape(-1, 3)
    best = max(grid, key=lambda seq: log_prob_of(engine, [1], seq))
    np.testing.assert_array_equal(beam.tokens[0], best)


def test_length_penalty_favours_longer_hypotheses():
    probs = np.full((5, 5), 1e-9)
    probs[0, [3, 1]] = 0.55, 0.45  # 3 = EOS at once, or the longer 1, 2, EOS
    probs[1, 2] = probs[2, 3] = 1.0
    probs[0, 4] = 1e-8  # the other beam takes 4 and loops there without ending
    probs[4, 4] = 1.0
    engine = TableEngine(np.log(probs))
    prompt = {"token_ids": np.array([[0]])}
    short = beam_search(engine, prompt, 5, BeamSearch(num_beams=2, length_penalty=0.0), eos_id=3)
    long = beam_search(engine, prompt, 5, BeamSearch(num_beams=2, length_penalty=1.0), eos_id=3)
    np.testing.assert_array_equal(short.tokens[0][:1], [3])
    np.testing.assert_array_equal(long.tokens[0], [1, 2, 3])
    assert long.scores[0] == pytest.approx(np.log(0.45) / 3, rel=1e-6)


def exhaustive_best(engine, prompt, max_new_tokens, eos_id, length_penalty):
    """Independent reference: every complete hypothesis (ended by its first EOS, or
    `max_new_tokens` long) scored by sum_logprob / length ** length_penalty; the best
    `(score, tokens)`."""
    hypotheses = []
    for length in range(1, max_new_tokens + 1):
        for tokens in itertools.product(range(len(engine.table)), repeat=length):
            if eos_id in tokens[:-1] or (length < max_new_tokens and tokens[-1] != eos_id):
                continue
            score = log_prob_of(engine, prompt, np.array(tokens)) / length**length_penalty
            hypotheses.append((score, list(tokens)))
    return max(hypotheses)


def last_step_engine():
    """EOS = 0, also the prompt. A (1) is likely first and A again after it; B (2) is
    followed by EOS. With K = 2 and 2 new tokens after the prompt 0, A and EOS rank
    first, so EOS is the first finished hypothesis and B, EOS the second, on the last
    step, while A, A (log 0.45) beats both. The other length-2 sequences are less likely
    than A, A, so K = 2 beams see every hypothesis that can win, whatever the length
    penalty."""
    probs = np.full((3, 3), 0.005)
    probs[0] = 0.3, 0.5, 0.2
    probs[1] = 0.05, 0.9, 0.05
    probs[2, 0] = 0.99
    return TableEngine(np.log(probs))


@pytest.mark.parametrize("length_penalty", [-1.0, 0.0, 0.5, 1.0, 2.0])
def test_beam_search_keeps_full_length_beams_when_the_last_step_brings_the_kth_eos(
    length_penalty,
):
    # Engines on which K = 2 beams with 2 new tokens see every complete hypothesis: the
    # table above, and two-token vocabularies (EOS or A), whose rows have at most 2
    # extensions per step. The search must return the best of all complete hypotheses:
    # the bug dropped the full-length ones when a row's K-th EOS came on the last step.
    engines = [last_step_engine()] + [random_engine(vocab=2, seed=s, scale=2.0) for s in range(8)]
    prompt = np.array([[0], [1]])
    config = BeamSearch(num_beams=2, length_penalty=length_penalty)
    for engine in engines:
        result = beam_search(engine, {"token_ids": prompt}, 2, config, eos_id=0, pad_id=0)
        for row, start in enumerate(prompt):
            score, tokens = exhaustive_best(engine, start, 2, 0, length_penalty)
            assert result.tokens[row, : len(tokens)].tolist() == tokens
            assert not result.tokens[row, len(tokens) :].any()  # padding after an EOS
            assert result.scores[row] == pytest.approx(score, rel=1e-9)


def test_top_k_of_one_equals_greedy():
    engine = random_engine()
    greedy = greedy_search(engine, PROMPT, 10)
    sampled = sample(engine, PROMPT, 10, Sampling(temperature=5.0, top_k=1, seed=123))
    np.testing.assert_array_equal(sampled.tokens, greedy.tokens)


def test_equal_seeds_give_equal_samples_and_different_seeds_differ():
    engine = random_engine(scale=0.5)  # flat distributions: samples vary a lot
    first = sample(engine, PROMPT, 20, Sampling(seed=7))
    again = sample(engine, PROMPT, 20, Sampling(seed=7))
    other = sample(engine, PROMPT, 20, Sampling(seed=8))
    np.testing.assert_array_equal(first.tokens, again.tokens)
    assert not np.array_equal(first.tokens, other.tokens)


def test_sampling_frequencies_follow_the_filtered_distribution():
    logits = np.log(np.array([0.5, 0.3, 0.15, 0.05]))
    engine = TableEngine(np.tile(logits, (4, 1)))
    prompt = {"token_ids": np.zeros((1, 1), dtype=int)}

    def draws(**settings):  # a row per seed: a seed's rows all draw alike
        return np.array([
            sample(engine, prompt, 1, Sampling(seed=seed, **settings)).tokens[0, 0]
            for seed in range(4000)
        ])  # fmt: skip

    tokens = draws(top_p=0.75)
    # The nucleus of mass 0.75 is {0, 1} (0.5 + 0.3), renormalised to 0.625 / 0.375.
    assert set(np.unique(tokens)) == {0, 1}
    assert abs((tokens == 0).mean() - 0.625) < 0.03
    tokens = draws(temperature=2.0, top_k=3)
    expected = np.sqrt([0.5, 0.3, 0.15])  # temperature 2 takes the square root
    np.testing.assert_allclose(
        np.bincount(tokens, minlength=3)[:3] / 4000, expected / expected.sum(), atol=0.03
    )


def test_a_tiny_temperature_samples_the_argmax():
    """float32 logits over 1e-38 overflowed to inf: every row drew token 0 (the padding)."""
    logits = np.array([[1.0, 4.0, 2.0, -np.inf], [3.0, -1.0, 2.5, 0.0]], dtype=np.float32)
    rng = np.random.default_rng(0)
    for temperature in (1e-3, 1e-38, 1e-300, 5e-324):
        np.testing.assert_array_equal(Sampling(temperature=temperature).draw(logits, rng), [1, 0])


def test_a_seeded_rows_text_does_not_depend_on_the_rows_beside_it():
    """One generator per row (a vLLM request's seed): the CLI's "the cat" sampled alone and
    beside "a dog" gave three different texts for one seed."""
    rng = np.random.default_rng(3)
    engine = TableEngine(np.log(rng.dirichlet(np.ones(6), size=6)))
    rows = {"token_ids": np.array([[1], [4], [2]])}
    together = sample(engine, rows, 8, Sampling(seed=11)).tokens
    for i in range(3):
        alone = sample(engine, {"token_ids": rows["token_ids"][i : i + 1]}, 8, Sampling(seed=11))  # fmt: skip
        np.testing.assert_array_equal(alone.tokens[0], together[i])
    assert len({tuple(row) for row in together}) > 1  # the rows still differ by input


def test_filter_keeps_the_nucleus_and_always_the_top_token():
    probs = np.array([[0.1, 0.6, 0.2, 0.1], [0.97, 0.01, 0.01, 0.01]])
    kept = filter_top_k_top_p(probs, top_k=None, top_p=0.7)
    np.testing.assert_array_equal(
        kept > 0, [[False, True, True, False], [True, False, False, False]]
    )
    kept = filter_top_k_top_p(probs, top_k=2, top_p=0.01)
    np.testing.assert_array_equal(
        kept > 0, [[False, True, False, False], [True, False, False, False]]
    )


def test_top_k_keeps_the_tokens_tied_with_the_kth():
    """As Hugging Face's TopKLogitsWarper (`scores < topk(scores, k)[-1]` removed) and vLLM
    keep them: no tie is broken towards the lower ids. A k past the vocabulary keeps all."""
    probs = np.array([[0.1, 0.3, 0.3, 0.3], [0.4, 0.3, 0.2, 0.1]])
    kept = filter_top_k_top_p(probs, top_k=1, top_p=None)
    np.testing.assert_array_equal(
        kept > 0, [[False, True, True, True], [True, False, False, False]]
    )
    kept = filter_top_k_top_p(probs, top_k=2, top_p=None)
    np.testing.assert_array_equal(kept > 0, [[False, True, True, True], [True, True, False, False]])
    np.testing.assert_array_equal(filter_top_k_top_p(probs, top_k=9, top_p=None), probs)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"strategy": "nucleus"}, "strategy"),
        ({"strategy": "sample", "temperature": 0.0}, "temperature"),
        ({"strategy": "sample", "top_k": -2}, "top_k"),
        ({"strategy": "sample", "top_p": 1.5}, "top_p"),
        ({"strategy": "beam", "num_beams": 0}, "num_beams"),
        ({"strategy": "beam", "num_beams": True}, "num_beams"),
        ({"strategy": "beam", "length_penalty": "x"}, "length_penalty"),
        ({"strategy": "beam", "length_penalty": float("nan")}, "length_penalty"),
        ({"strategy": "beam", "early_stopping": "sometimes"}, "early_stopping"),
        ({"strategy": "beam", "early_stopping": 1}, "early_stopping"),
        ({"strategy": "beam", "early_stopping": None}, "early_stopping"),
        ({"strategy": "greedy", "forced_eos": 1}, "forced_eos"),
        ({"strategy": "sample", "top_p": "0.5"}, "top_p"),
        ({"strategy": "sample", "top_k": True}, "top_k"),
        ({"strategy": "sample", "seed": -1}, "seed"),
        ({"strategy": "sample", "seed": "abc"}, "seed"),
    ],
)
def test_bad_search_arguments_are_rejected_by_name(kwargs, name):
    kwargs = {"max_new_tokens": 3, **kwargs}
    max_new_tokens, strategy = kwargs.pop("max_new_tokens"), kwargs.pop("strategy", "greedy")
    with pytest.raises(ValueError, match=name):
        config = search.search_config(strategy, **kwargs)
        search.generate(random_engine(), PROMPT, max_new_tokens, config)


def test_an_option_the_strategy_does_not_take_is_refused_not_ignored():
    with pytest.raises(ValueError, match="greedy strategy takes no top_k"):
        search.search_config("greedy", top_k=5)
    with pytest.raises(ValueError, match="beam strategy takes no temperature"):
        search.search_config("beam", temperature=0.5)


def test_search_and_engine_modules_import_neither_tensorflow_nor_keras():
    import subprocess
    import sys

    code = "import sys, transformer_zoo.generation.search, transformer_zoo.generation.engine, transformer_zoo.generation.onnx_runner; print(sorted(m for m in ('tensorflow', 'keras') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("offset", [0.0, 1e3, -1e3])
def test_token_log_probs_match_the_softmax_formula(offset):
    # float32 logits of an 8,000-piece vocabulary, far from 0 as well: the chosen token's
    # log-probability against log(exp(x_t) / sum exp(x)) in float64 (shifted by hand).
    rng = np.random.default_rng(0)
    logits = (rng.normal(size=(3, 8000)) * 4 + offset).astype(np.float32)
    tokens = np.array([logits[0].argmax(), 17, logits[2].argmin()])
    x = logits.astype(np.float64) - offset
    expected = x[np.arange(3), tokens] - np.log(np.exp(x).sum(-1))
    got = token_log_probs(logits, tokens)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)


def test_ranked_log_probs_are_the_softmax_formulas_best():
    # The top ids by the float64 formula (equal logits: the lower id first), their
    # log-probabilities, and the chosen token's, for rows of an 8,000-piece vocabulary.
    rng = np.random.default_rng(1)
    logits = (rng.normal(size=(5, 8000)) * 4).astype(np.float32)
    logits[1, [10, 20]] = logits[1].max() + 1  # a tie for the best
    tokens = rng.integers(0, 8000, size=5)
    x = logits.astype(np.float64)
    log_softmax = x - np.log(np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True))
    log_softmax -= x.max(-1, keepdims=True)
    chosen, ids, values = ranked_log_probs(logits, tokens, 3)
    expected_ids = np.argsort(-log_softmax, axis=-1, kind="stable")[:, :3]
    np.testing.assert_array_equal(ids, expected_ids)
    assert ids[1, :2].tolist() == [10, 20]
    np.testing.assert_allclose(values, np.take_along_axis(log_softmax, ids, -1), atol=1e-5)
    np.testing.assert_allclose(chosen, log_softmax[np.arange(5), tokens], atol=1e-5)
    np.testing.assert_array_equal(chosen, token_log_probs(logits, tokens))
    empty = ranked_log_probs(logits, tokens, 0)
    assert empty[1].shape == (5, 0) and empty[2].shape == (5, 0)


def test_numpy_numbers_are_numbers():
    config = Sampling(temperature=np.float32(0.7), top_k=np.int64(3), top_p=np.float32(0.9))
    assert config.temperature == np.float32(0.7)
    assert BeamSearch(np.int64(2), np.float32(0.5)).num_beams == 2


def test_top_k_zero_and_minus_one_mean_every_token_as_in_transformers_and_the_server():
    # transformers' and our HTTP server's top_k=0, vLLM's -1: no top-k filter (was an error).
    for off in (0, -1, np.int64(0)):
        assert Sampling(top_k=off) == Sampling()
        assert search.search_config("sample", top_k=off).top_k is None
    engine = random_engine()
    whole = sample(engine, PROMPT, 6, Sampling(seed=3))
    np.testing.assert_array_equal(
        sample(engine, PROMPT, 6, Sampling(top_k=0, seed=3)).tokens, whole.tokens
    )


def cycle_engine(vocab=6):
    """i -> i + 1 (mod vocab), almost surely; token 5 (EOS below) comes after 4."""
    return TableEngine(np.roll(np.eye(vocab), 1, axis=1) * 8.0)


@pytest.mark.parametrize(
    "strategy",
    [Greedy(forced_eos=True), Sampling(seed=5, forced_eos=True),
     BeamSearch(3, early_stopping="never", forced_eos=True)],
)  # fmt: skip
def test_forced_eos_ends_the_rows_still_running_at_the_limit_with_eos(strategy):
    # transformers' forced_eos_token_id: a row that reaches max_new_tokens ends with EOS
    # there, whose log-probability is 0; rows that ended before are as without it.
    engine = cycle_engine()
    prompt = {"token_ids": np.array([[2], [0]])}  # row 0 reaches EOS (5) at its 3rd token
    result = search.generate(engine, prompt, 4, strategy, eos_id=5, pad_id=0)
    plain = dataclasses.replace(strategy, forced_eos=False)
    before = search.generate(engine, prompt, 3, plain, eos_id=5, pad_id=0)
    assert result.tokens.tolist() == [[3, 4, 5, 0], [1, 2, 3, 5]]
    assert before.tokens.tolist() == [[3, 4, 5], [1, 2, 3]]
    # The same summed log-probabilities (beam search divides by length ** penalty).
    penalty = getattr(strategy, "length_penalty", 0.0)
    np.testing.assert_allclose(
        result.scores * np.r_[3, 4] ** penalty, before.scores * np.r_[3, 3] ** penalty, rtol=1e-12
    )


@pytest.mark.parametrize(
    "strategy", [Greedy, functools.partial(Sampling, seed=5), BeamSearch]
)  # seeded: unseeded, a draw off the cycle (p ≈ 0.2% a step) ended the row early
def test_the_forced_step_runs_no_model_step_and_needs_an_eos_id(strategy):
    engine = cycle_engine()
    prompt = {"token_ids": np.array([[0]])}
    search.generate(engine, prompt, 4, strategy(), eos_id=5)
    assert engine.steps == 3
    engine.steps = 0
    result = search.generate(engine, prompt, 4, strategy(forced_eos=True), eos_id=5)
    assert engine.steps == 2 and result.tokens[0, -1] == 5  # its logits are not needed
    result = search.generate(cycle_engine(), prompt, 1, strategy(forced_eos=True), eos_id=5)
    assert result.tokens.tolist() == [[5]] and result.scores[0] == 0.0
    with pytest.raises(ValueError, match="forced_eos"):
        search.generate(engine, prompt, 4, strategy(forced_eos=True))


def test_greedy_with_forced_eos_steps_where_the_engine_decodes_greedily_in_one_call():
    class InGraph(TableEngine):  # OnnxRunner's Loop has no forced step
        decodes_greedily = True

        def greedy(self, *args):
            raise AssertionError("called the in-graph loop")

    engine = InGraph(cycle_engine().table)
    result = search.generate(engine, {"token_ids": np.array([[0]])}, 3, Greedy(True), 5)
    assert result.tokens.tolist() == [[1, 2, 5]]


@pytest.mark.parametrize("length_penalty", [2.0, 1.0, 0.0, -0.5])
def test_never_stopping_early_finds_the_best_hypothesis_when_beams_see_them_all(length_penalty):
    # 3 tokens, EOS = 0, 3 new tokens: at most 2 + 4 live prefixes and 12 last-step
    # extensions, so 16 beams keep every hypothesis, and "never" stops a row only when
    # no running beam can win (transformers' canonical beam search). No row collects K
    # hypotheses here, so the three early_stopping meanings return the same: this checks
    # the search; test_the_three_early_stopping_meanings_stop_at_three_different_steps
    # checks when a row stops.
    config = BeamSearch(16, length_penalty, early_stopping="never")
    for seed in range(6):
        engine = random_engine(vocab=3, seed=seed, scale=2.0)
        result = beam_search(engine, {"token_ids": np.array([[1], [2]])}, 3, config, 0)
        for row, start in enumerate([[1], [2]]):
            score, tokens = exhaustive_best(engine, start, 3, 0, length_penalty)
            assert result.tokens[row, : len(tokens)].tolist() == tokens
            assert result.scores[row] == pytest.approx(score, rel=1e-9)


def early_stopping_engine():
    """EOS = 0. After the prompt 0: EOS 0.5, A (1) 0.45; after A: A 0.7, EOS 0.3. With 2
    beams, length penalty 1 and 3 new tokens: step 1 finishes [EOS] (log 0.5 = -0.69);
    step 2 finishes [A, EOS] (log 0.135 / 2 = -1.0), the second of K = 2, while [A, A]
    runs on at log 0.315 / 2 = -0.58, better than -1.0; step 3, the limit, finishes
    [A, A, A] at log 0.2205 / 3 = -0.50, the best."""
    probs = np.full((3, 3), 1e-4)
    probs[0, :2] = 0.5, 0.45
    probs[1, :2] = 0.3, 0.7
    probs[2, 0] = 0.9
    return TableEngine(np.log(probs))


def test_early_stopping_true_stops_at_k_hypotheses_and_false_runs_on_while_one_may_win():
    prompt = {"token_ids": np.array([[0]])}
    tokens = {}
    for early_stopping in (True, False, "never"):
        config = BeamSearch(2, 1.0, early_stopping)
        result = beam_search(early_stopping_engine(), prompt, 3, config, 0, 0)
        tokens[early_stopping] = result.tokens[0].tolist()
    assert tokens == {True: [0], False: [1, 1, 1], "never": [1, 1, 1]}
    assert BeamSearch().early_stopping is True  # ours; transformers' default is False
    assert BeamSearch(early_stopping=np.bool_(False)).early_stopping is False


def three_meanings_engine():
    """EOS = 0, A = 1, B = 2, C = 3, the prompt 0. After the prompt: EOS 0.5, A 0.45; after
    A: B 0.58, EOS 0.4; after B: EOS 0.5, C 0.4; after C: EOS 0.97. With 2 beams, length
    penalty 1 and 4 new tokens:
    step 1 finishes [EOS] at log 0.5 = -0.69;
    step 2 finishes [A, EOS] at log 0.18 / 2 = -0.86, the K-th: True stops there; [A, B]
    runs at log 0.261 / 2 = -0.67, better than -0.86, so False and "never" go on;
    step 3 finishes [A, B, EOS] at log 0.1305 / 3 = -0.68, which leaves [EOS] (-0.69) the
    worst of K; [A, B, C] runs at log 0.1044 = -2.26: at its length, -2.26 / 3 = -0.75 is
    no better than -0.69, so False stops; at the 4 tokens it can reach, -2.26 / 4 = -0.56
    is better, so "never" goes on;
    step 4, the limit, finishes [A, B, C, EOS] at log 0.1013 / 4 = -0.57, the best."""
    probs = np.array(
        [
            [0.5, 0.45, 0.03, 0.02],
            [0.4, 0.01, 0.58, 0.01],
            [0.5, 0.05, 0.05, 0.4],
            [0.97, 0.01, 0.01, 0.01],
        ]
    )
    return TableEngine(np.log(probs))


def test_the_three_early_stopping_meanings_stop_at_three_different_steps():
    """True stops at K finished hypotheses, False once the best running beam scored at its
    own length cannot beat them, "never" once it cannot at the longest length it can reach
    (transformers' `_check_early_stop_heuristic`): on this table each returns another
    hypothesis (hand-computed in `three_meanings_engine`), and only "never" finds the best
    of all (`exhaustive_best`)."""
    prompt = {"token_ids": np.array([[0]])}
    expected = {
        True: ([0], np.log(0.5)),
        False: ([1, 2, 0], np.log(0.45 * 0.58 * 0.5) / 3),
        "never": ([1, 2, 3, 0], np.log(0.45 * 0.58 * 0.4 * 0.97) / 4),
    }
    for early_stopping, (tokens, score) in expected.items():
        config = BeamSearch(2, 1.0, early_stopping)
        result = beam_search(three_meanings_engine(), prompt, 4, config, 0, 0)
        assert result.tokens[0, : len(tokens)].tolist() == tokens, early_stopping
        assert not result.tokens[0, len(tokens) :].any()
        assert result.scores[0] == pytest.approx(score, rel=1e-9), early_stopping
    best = exhaustive_best(three_meanings_engine(), [0], 4, 0, 1.0)
    assert best == (pytest.approx(expected["never"][1], rel=1e-9), expected["never"][0])


def test_only_an_eos_among_the_k_best_candidates_finishes_a_hypothesis():
    """Of the 2K extensions ranked each step, an EOS among the first K finishes a
    hypothesis and one ranked K..2K-1 is dropped (transformers' `_beam_search`: only the
    top `num_beams` candidates may finish). EOS = 0, A = 1, B = 2, C = 3, D = 4, prompt 0;
    K = 2, length penalty 1, 4 new tokens. Step 1 runs A (0.5) and B (0.45). Step 2 ranks
    [A, EOS] 0.25, [A, C] 0.2, [B, EOS] 0.189, [B, D] 0.135: [A, EOS] finishes (log 0.25 / 2
    = -0.69), [B, EOS] ranks third and must not. Step 3 finishes [A, C, EOS] (log 0.192 / 3
    = -0.55) and [B, D, EOS] (-0.68): two, so the row stops with [A, C, EOS], the best of
    all. Had [B, EOS] (-0.83) finished, step 2 would have held K hypotheses, and True would
    have stopped there with [A, EOS]."""
    probs = np.array(
        [
            [0.01, 0.5, 0.45, 0.02, 0.02],
            [0.5, 0.04, 0.03, 0.4, 0.03],
            [0.42, 0.1, 0.1, 0.08, 0.3],
            [0.96, 0.01, 0.01, 0.01, 0.01],
            [0.96, 0.01, 0.01, 0.01, 0.01],
        ]
    )
    engine = TableEngine(np.log(probs))
    result = beam_search(engine, {"token_ids": np.array([[0]])}, 4, BeamSearch(2, 1.0), 0, 0)
    assert result.tokens[0, :3].tolist() == [1, 3, 0] and not result.tokens[0, 3:].any()
    assert result.scores[0] == pytest.approx(np.log(0.5 * 0.4 * 0.96) / 3, rel=1e-9)
    score, tokens = exhaustive_best(engine, [0], 4, 0, 1.0)
    assert tokens == [1, 3, 0] and score == pytest.approx(result.scores[0], rel=1e-9)
