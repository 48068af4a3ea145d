"""The text and `logprobs` of `/v1/completions` with the `openai` client against a real
server: a completion continues its prompt (the space of a first `▁word` kept), each
token is the text it adds, so the tokens join to the text and `text_offset` indexes it,
and every log-probability is the model's. The references decode whole sequences
(`tests.serving.references`) and score them in one full pass of the graph, apart from
the server's token-by-token detokenizer and cached decoding."""

from __future__ import annotations

import numpy as np
import openai
import pytest

from tests.serving.live_server import LiveServer
from tests.serving.references import (
    completions,
    continuation,
    decode,
    decoder_log_probs,
    generated,
    token_texts,
)
from transformer_zoo.generation import Sampling

PROMPTS = ["the cat", "a quick brown fox", "dogs", "on the fifth of March", "March", "a"]


def _sampled(served, ids, max_tokens, temperature=1.0, seed=None) -> list[int]:
    search = Sampling(temperature=temperature, seed=seed)
    return generated(served, served.generate_ids([ids], max_tokens, search=search).tokens[0])


def _in_order(answer):
    return sorted(answer.choices, key=lambda c: c.index)


def _check_tokens_index_the_text(text: str, logprobs) -> None:
    assert "".join(logprobs.tokens) == text
    for token, offset in zip(logprobs.tokens, logprobs.text_offset, strict=True):
        assert text[offset : offset + len(token)] == token
    assert logprobs.text_offset == sorted(logprobs.text_offset)


def test_a_completion_continues_its_prompt_with_the_space_between(client, local):
    gpt = local["gpt"]
    spaced = 0
    for seed in range(3):
        answer = client.completions.create(
            model="gpt", prompt=PROMPTS, max_tokens=4, temperature=1.0, seed=seed
        )
        echoed = client.completions.create(
            model="gpt", prompt=PROMPTS, max_tokens=4, temperature=1.0, seed=seed, echo=True
        )
        for prompt, ids, choice, echo in zip(
            PROMPTS, gpt.prompt_ids(PROMPTS), _in_order(answer), _in_order(echoed), strict=True
        ):
            tokens = _sampled(gpt, ids, 4, seed=seed)
            assert choice.text == continuation(gpt, ids, tokens)
            # Prompt and completion read as the whole sequence does: no words glued.
            assert prompt + choice.text == decode(gpt, ids + tokens)
            assert echo.text == decode(gpt, ids + tokens)
            spaced += choice.text.startswith(" ")
    assert spaced  # some completions start a word: their space is there


def test_logprob_tokens_join_to_the_text_and_are_what_each_token_adds(client, local):
    gpt = local["gpt"]
    for echo in (False, True):
        answer = client.completions.create(
            model="gpt", prompt=PROMPTS, max_tokens=6, temperature=1.0, seed=3, logprobs=2,
            echo=echo,
        )  # fmt: skip
        for ids, choice in zip(gpt.prompt_ids(PROMPTS), _in_order(answer), strict=True):
            tokens = _sampled(gpt, ids, 6, seed=3)
            _check_tokens_index_the_text(choice.text, choice.logprobs)
            expected = token_texts(gpt, ids, tokens)
            if echo:  # a text prompt's begin token is the server's: not echoed
                expected = token_texts(gpt, ids[:1], ids[1:]) + expected
            assert choice.logprobs.tokens == expected


def test_logprobs_are_the_models_and_top_holds_the_sampled_token(client, local):
    gpt = local["gpt"]
    ids = gpt.prompt_ids("the cat")[0]
    unlikely = 0
    for seed in range(4):
        answer = client.completions.create(
            model="gpt", prompt="the cat", max_tokens=8, temperature=3.0, seed=seed, logprobs=1
        ).choices[0]
        tokens = _sampled(gpt, ids, 8, temperature=3.0, seed=seed)
        scores = decoder_log_probs(gpt, ids + tokens)[len(ids) - 1 :]  # row i predicts token i
        logprobs = answer.logprobs
        for i, token in enumerate(tokens):
            assert np.isclose(logprobs.token_logprobs[i], scores[i, token], atol=1e-4)
            # The likeliest token, then the sampled one unless a likelier one has its text.
            expected = {}
            for choice in (int(scores[i].argmax()), token):
                expected.setdefault(
                    token_texts(gpt, ids + tokens[:i], [choice])[0], scores[i, choice]
                )
            top = logprobs.top_logprobs[i]
            assert top.keys() == expected.keys()
            np.testing.assert_allclose(list(top.values()), list(expected.values()), atol=1e-4)
            unlikely += len(top) == 2
        # logprobs 0: each token's own log-probability, under its own text.
        zero = client.completions.create(
            model="gpt", prompt="the cat", max_tokens=8, temperature=3.0, seed=seed, logprobs=0
        ).choices[0]
        assert zero.logprobs.top_logprobs == [
            {text: lp} for text, lp in zip(logprobs.tokens, logprobs.token_logprobs, strict=True)
        ]
    assert unlikely  # a sampled token outside the top 1 was listed beside it


def test_echo_with_logprobs_scores_the_prompt_as_decoding_scored_it(client, local):
    # The prompt "the cat" + the first 4 greedy tokens, as ids, echoed with logprobs: the
    # scores of those 4 tokens must equal what decoding gave them (the cached step graph,
    # one token at a time), and every prompt position the graph's log-softmax over the
    # whole prompt at once. Then one more greedy token: the decoding's fifth.
    gpt = local["gpt"]
    decoded = client.completions.create(
        model="gpt", prompt="the cat", max_tokens=5, temperature=0, logprobs=2
    ).choices[0]
    prompt = gpt.prompt_ids("the cat")[0]
    greedy = generated(gpt, gpt.generate_ids([prompt], 5).tokens[0])
    ids = prompt + greedy[:4]
    answer = client.completions.create(
        model="gpt", prompt=ids, max_tokens=1, temperature=0, echo=True, logprobs=2
    ).choices[0]
    scored = answer.logprobs
    # Every id the client sent is echoed, its begin token too: the first without a score.
    assert scored.tokens == token_texts(gpt, [], ids + greedy[4:5])
    assert answer.text == decode(gpt, ids + greedy[4:5]) and scored.token_logprobs[0] is None
    _check_tokens_index_the_text(answer.text, scored)
    np.testing.assert_allclose(
        scored.token_logprobs[-5:], decoded.logprobs.token_logprobs, atol=1e-4
    )
    for got, expected in zip(scored.top_logprobs[-5:], decoded.logprobs.top_logprobs, strict=True):
        assert got.keys() == expected.keys()
        np.testing.assert_allclose(list(got.values()), list(expected.values()), atol=1e-4)
    scores = decoder_log_probs(gpt, ids)
    np.testing.assert_allclose(
        scored.token_logprobs[1 : len(ids)], scores[np.arange(len(ids) - 1), ids[1:]], atol=1e-4
    )
    # Streamed: the same tokens and scores, the prompt's in the first chunk.
    chunks = [c.choices[0] for c in client.completions.create(
        model="gpt", prompt=ids, max_tokens=1, temperature=0, echo=True, logprobs=2, stream=True
    ) if c.choices]  # fmt: skip
    assert len(chunks[0].logprobs.tokens) == len(ids)
    streamed = [lp for c in chunks if c.logprobs for lp in c.logprobs.token_logprobs]
    assert streamed[0] is None
    np.testing.assert_allclose(streamed[1:], scored.token_logprobs[1:], atol=1e-6)
    assert "".join(c.text for c in chunks) == answer.text


def test_echo_with_logprobs_of_ids_without_the_begin_token(client, local):
    # A prompt of ids that does not start with the begin token: its first token has no
    # context, so no log-probability (OpenAI's and vLLM's `None`).
    gpt = local["gpt"]
    ids = gpt.prompt_ids("the cat sat")[0][1:]
    answer = client.completions.create(
        model="gpt", prompt=ids, max_tokens=2, temperature=0, echo=True, logprobs=1
    ).choices[0]
    assert answer.logprobs.token_logprobs[0] is None and answer.logprobs.top_logprobs[0] is None
    assert all(isinstance(lp, float) for lp in answer.logprobs.token_logprobs[1:])
    assert len(answer.logprobs.tokens) == len(ids) + 2 and answer.logprobs.text_offset[0] == 0
    _check_tokens_index_the_text(answer.text, answer.logprobs)
    # Several prompts, n of each: every choice carries its own prompt's scores first.
    prompts = [ids, gpt.prompt_ids("dogs")[0]]
    answer = client.completions.create(
        model="gpt", prompt=prompts, n=2, max_tokens=2, temperature=0, echo=True, logprobs=1
    )
    for choice in answer.choices:
        prompt = prompts[choice.index // 2]
        assert choice.logprobs.tokens[: len(prompt)] == token_texts(gpt, [], prompt)
        assert len(choice.logprobs.tokens) == len(prompt) + 2


def test_echo_with_no_tokens_scores_the_prompt_alone(client, local):
    # lm-evaluation-harness's loglikelihood: echo, logprobs, max_tokens 0.
    gpt = local["gpt"]
    prompts = ["the cat sat on the mat", "dogs"]
    for stream in (False, True):
        answer = client.completions.create(
            model="gpt", prompt=prompts, max_tokens=0, echo=True, logprobs=1, stream=stream,
            n=2, temperature=1.0,
        )  # fmt: skip
        if stream:
            chunks = [c.choices[0] for c in answer]
            choices = []
            for index in range(4):
                mine = [c for c in chunks if c.index == index]
                assert mine[-1].finish_reason == "length"
                tokens = [t for c in mine if c.logprobs for t in c.logprobs.tokens]
                lps = [lp for c in mine if c.logprobs for lp in c.logprobs.token_logprobs]
                choices.append(("".join(c.text for c in mine), tokens, lps))
        else:
            assert answer.usage.completion_tokens == 0
            assert {c.finish_reason for c in answer.choices} == {"length"}
            choices = [(c.text, c.logprobs.tokens, c.logprobs.token_logprobs)
                       for c in _in_order(answer)]  # fmt: skip
        for (text, tokens, lps), ids in zip(
            choices, [ids for ids in gpt.prompt_ids(prompts) for _ in range(2)], strict=True
        ):
            assert text == decode(gpt, ids) and tokens == token_texts(gpt, ids[:1], ids[1:])
            scores = decoder_log_probs(gpt, ids)
            np.testing.assert_allclose(lps, scores[np.arange(len(ids) - 1), ids[1:]], atol=1e-4)
    plain = client.completions.create(model="gpt", prompt="dogs", max_tokens=0, echo=True)
    assert plain.choices[0].text == "dogs" and plain.choices[0].logprobs is None
    with pytest.raises(openai.UnprocessableEntityError, match="max_tokens 0"):
        client.completions.create(model="gpt", prompt="dogs", max_tokens=0)


def test_an_empty_prompt_is_continued_from_the_begin_token(client, local):
    answer = client.completions.create(
        model="gpt", prompt=["", "dogs"], max_tokens=6, temperature=1.0, seed=5
    )
    expected = completions(local["gpt"], ["", "dogs"], 6, Sampling(seed=5))
    assert [c.text for c in _in_order(answer)] == expected
    assert answer.usage.prompt_tokens == 1 + len(local["gpt"].prompt_ids("dogs")[0])


@pytest.fixture(scope="module")
def hf_live(hf_exports):
    live = LiveServer(hf_exports).start()
    yield live
    live.stop()


@pytest.fixture(scope="module")
def hf_client(hf_live):
    return openai.OpenAI(base_url=hf_live.url + "/v1", api_key="unused", max_retries=0)


def test_token_id_prompts_may_hold_id_0(hf_client, hf_exports):
    """GPT-2's id 0 is `!` and Marian's is `</s>`, which ends a source: a prompt of ids
    is masked by its length, so 0 is a token there as in `generate_ids` and
    `translate_ids` (it was refused as "outside [1, V)")."""
    from transformer_zoo.serving import load_onnx

    gpt2, marian = load_onnx(hf_exports["gpt2"]), load_onnx(hf_exports["marian"])
    for name, served, ids in (
        ("gpt2", gpt2, [*gpt2.prompt_ids("Hello world")[0], 0, 0]),
        ("marian", marian, marian.prompt_ids("Speak, speak.")[0]),
    ):
        assert 0 in ids
        answer = hf_client.completions.create(model=name, prompt=ids, max_tokens=6, temperature=0)
        run = served.generate_ids if name == "gpt2" else served.translate_ids
        tokens = generated(served, run([ids], 6).tokens[0])
        context = ids if name == "gpt2" else []
        assert answer.choices[0].text == continuation(served, context, tokens)


def test_logprobs_of_gpt2_and_marian_tokenizers(hf_client, hf_exports):
    """Byte-level BPE (GPT-2) and Marian's SentencePiece-to-vocabulary tokenizers have no
    `id_to_piece`: their tokens are the text each adds all the same."""
    from transformer_zoo.serving import load_onnx

    gpt2, marian = load_onnx(hf_exports["gpt2"]), load_onnx(hf_exports["marian"])
    prompts, sources = ["Hello world", "We know't, we"], ["Speak, speak.", "Let us kill him"]
    for name, served, texts, context in (
        ("gpt2", gpt2, prompts, lambda ids: ids),
        ("marian", marian, sources, lambda ids: []),
    ):
        answer = hf_client.completions.create(
            model=name, prompt=texts, max_tokens=8, temperature=0, logprobs=2
        )
        for ids, choice in zip(served.prompt_ids(texts), _in_order(answer), strict=True):
            run = served.generate_ids if name == "gpt2" else served.translate_ids
            tokens = generated(served, run([ids], 8).tokens[0])
            assert choice.text == continuation(served, context(ids), tokens)
            assert choice.logprobs.tokens == token_texts(served, context(ids), tokens)
            _check_tokens_index_the_text(choice.text, choice.logprobs)
            # The library's greedy scores of the first k tokens, k = 1, 2, ...
            prefixes = [run([ids], k).scores[0] for k in range(1, len(tokens) + 1)]
            np.testing.assert_allclose(
                np.cumsum(choice.logprobs.token_logprobs), prefixes, atol=1e-4
            )
        streamed = list(
            hf_client.completions.create(
                model=name, prompt=texts[0], max_tokens=8, temperature=0, logprobs=1, stream=True
            )
        )
        assert "".join(c.choices[0].text for c in streamed) == _in_order(answer)[0].text
    echoed = hf_client.completions.create(
        model="gpt2", prompt=prompts, max_tokens=1, temperature=0, logprobs=1, echo=True
    )
    for ids, choice in zip(gpt2.prompt_ids(prompts), _in_order(echoed), strict=True):
        _check_tokens_index_the_text(choice.text, choice.logprobs)
        assert choice.text.startswith(decode(gpt2, ids))


def test_echoed_ids_that_end_mid_character_show_its_u_fffd_in_the_last_token(hf_client, hf_exports):
    """A GPT-2 prompt of ids whose last id is the byte E2 alone (the first of "€"'s
    three): the text is transformers' decoding of all the ids, U+FFFD where the
    character never completes, and the `logprobs` tokens account for all of it, as a
    generated row's last token does. With `max_tokens` 0 the U+FFFD was in the text but
    in no token (whole answers), and a stream ended with a 500 error event."""
    from transformer_zoo.serving import load_onnx

    gpt2 = load_onnx(hf_exports["gpt2"])
    tokenizer = gpt2.target_tokenizer
    lead = next(i for i in range(tokenizer.vocabulary_size) if tokenizer.token_bytes(i) == b"\xe2")
    prompt = [*gpt2.prompt_ids("Hello world")[0], lead]
    scores = decoder_log_probs(gpt2, prompt)[np.arange(len(prompt) - 1), prompt[1:]]
    for max_tokens in (0, 1, 4):
        tokens = (
            generated(gpt2, gpt2.generate_ids([prompt], max_tokens).tokens[0]) if max_tokens else []
        )
        expected = decode(gpt2, prompt + tokens)
        if not max_tokens:
            assert expected == b"Hello world\xe2".decode("utf-8", "replace")
        options = dict(model="gpt2", prompt=prompt, max_tokens=max_tokens, temperature=0,
                       echo=True, logprobs=1, n=2)  # fmt: skip
        answer = hf_client.completions.create(**options)
        for choice in answer.choices:
            text, logprobs = choice.text, choice.logprobs
            assert text == expected
            assert logprobs.tokens == token_texts(gpt2, [], prompt + tokens)
            assert (
                len(logprobs.tokens) == len(logprobs.token_logprobs) == len(logprobs.text_offset)
                == len(prompt) + len(tokens)
            )  # fmt: skip
            _check_tokens_index_the_text(text, logprobs)
            np.testing.assert_allclose(logprobs.token_logprobs[1 : len(prompt)], scores, atol=1e-4)
            last = logprobs.tokens[len(prompt) - 1]  # the prompt's: "\ufffd" when it ended
            assert last in logprobs.top_logprobs[len(prompt) - 1]
        chunks = [c.choices[0] for c in hf_client.completions.create(**options, stream=True)]
        for index, choice in enumerate(_in_order(answer)):
            mine = [c for c in chunks if c.index == index and c.logprobs]
            assert "".join(c.text for c in chunks if c.index == index) == expected
            assert [t for c in mine for t in c.logprobs.tokens] == choice.logprobs.tokens
            assert [o for c in mine for o in c.logprobs.text_offset] == (
                choice.logprobs.text_offset
            )


def _mid_character_prompt(gpt2) -> list[int]:
    """GPT-2 ids of "Hello world", then the byte E2 alone (the first of "€"'s three)."""
    tokenizer = gpt2.target_tokenizer
    lead = next(i for i in range(tokenizer.vocabulary_size) if tokenizer.token_bytes(i) == b"\xe2")
    return [*gpt2.prompt_ids("Hello world")[0], lead]


def test_a_row_that_generates_no_token_has_no_text_without_echo(hf_live, hf_client, hf_exports):
    """A prompt of ids ending mid-character whose first drawn token is EOS (made so:
    the scheduler's EOS is set to greedy search's first token) generates nothing: its
    text is transformers' decoding of the generated ids, "", whole and streamed (it was
    the prompt's U+FFFD, in no `logprobs` token). With `echo` the U+FFFD stays the
    echoed prompt's, as decoding all the ids shows it."""
    from transformer_zoo.serving import load_onnx

    gpt2 = load_onnx(hf_exports["gpt2"])
    prompt = _mid_character_prompt(gpt2)
    (first,) = generated(gpt2, gpt2.generate_ids([prompt], 1).tokens[0])
    worker = hf_live.entry("gpt2").worker
    eos, worker.eos_id = worker.eos_id, first
    try:
        options = dict(model="gpt2", prompt=prompt, max_tokens=4, temperature=0, logprobs=1)
        answer = hf_client.completions.create(**options)
        (choice,) = answer.choices
        assert (choice.text, choice.finish_reason) == (decode(gpt2, []), "stop") == ("", "stop")
        assert choice.logprobs.tokens == []
        assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (len(prompt), 0)
        chunks = list(hf_client.completions.create(**options, stream=True))
        assert "".join(c.choices[0].text for c in chunks if c.choices) == ""
        assert chunks[-1].choices[0].finish_reason == "stop"
        echoed = hf_client.completions.create(**options, echo=True)
        assert echoed.choices[0].text == decode(gpt2, prompt)
        assert echoed.choices[0].text.endswith("\ufffd")
        assert "".join(echoed.choices[0].logprobs.tokens) == echoed.choices[0].text
    finally:
        worker.eos_id = eos


def test_a_stop_string_the_ended_rows_u_fffd_completes_is_a_stop(hf_client, hf_exports):
    """`stop` ["\ufffd"] with `echo` and `max_tokens` 0 of a prompt ending mid-character:
    the U+FFFD that ending the row adds completes the stop string, so the text ends
    before it and the row ended at a stop string ("stop", as `generate_completions`
    says of a text its stop string cut), whole and streamed; it said "length"."""
    from transformer_zoo.serving import load_onnx

    gpt2 = load_onnx(hf_exports["gpt2"])
    prompt = _mid_character_prompt(gpt2)
    options = dict(model="gpt2", prompt=prompt, max_tokens=0, echo=True, stop=["\ufffd"])
    expected = decode(gpt2, prompt).removesuffix("\ufffd")
    (choice,) = hf_client.completions.create(**options).choices
    assert (choice.text, choice.finish_reason) == (expected, "stop")
    chunks = [c.choices[0] for c in hf_client.completions.create(**options, stream=True)]
    assert "".join(c.text for c in chunks) == expected
    assert chunks[-1].finish_reason == "stop"
    # Without the stop string the same row was cut by its budget.
    del options["stop"]
    assert hf_client.completions.create(**options).choices[0].finish_reason == "length"
