"""Stop strings (`stop`): `ServedModel.generate` and `translate`, the command line's
`--stop` and the server's `stop` end a text before its first stop string, and greedy
search and sampling end the row at the token that completes it. The reference is
independent: the text without `stop`, cut with `str.find`."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.serving.references import generated, token_texts
from transformer_zoo.cli import main
from transformer_zoo.generation import BeamSearch, Greedy, Sampling
from transformer_zoo.generation.search import generate
from transformer_zoo.serving import InputError, load_onnx
from transformer_zoo.serving.http import openai_protocol
from transformer_zoo.serving.stops import (
    MAX_STOPS,
    StopText,
    first_stop,
    held_back,
    stop_strings,
)

PROMPTS = ["the cat", "a quick brown fox", "dogs", "on the fifth of March"]
SOURCES = ["March 5, 2021", "the cat sat on the mat", "dogs and cats"]
NEW = 16


def cut(text: str, stops) -> str:
    """The reference: `text` up to the earliest occurrence of any stop string."""
    found = [text.find(s) for s in ([stops] if isinstance(stops, str) else stops)]
    found = [at for at in found if at >= 0]
    return text[: min(found)] if found else text


@pytest.fixture(scope="module")
def models(family_artifacts, hf_exports):
    """SentencePiece models of every family's tests, and GPT-2's byte-level BPE (whose
    characters span tokens) and Marian's tokenizers."""
    return {
        "gpt": load_onnx(family_artifacts("decoder-only").export_dir),
        "translator": load_onnx(family_artifacts("encoder-decoder").export_dir),
        "gpt2": load_onnx(hf_exports["gpt2"]),
        "marian": load_onnx(hf_exports["marian"]),
    }


@pytest.fixture(scope="module")
def gpt(models):
    return models["gpt"]


@pytest.fixture(scope="module")
def marian(models):
    return models["marian"]


def _run(served, texts, max_new_tokens=NEW, search=None, **options) -> list[str]:
    if served.family == "decoder-only":
        return served.generate(texts, max_new_tokens, search, **options)
    return served.translate(texts, max_new_tokens, search, **options)


def _inputs(served) -> list[str]:
    return PROMPTS if served.family == "decoder-only" else SOURCES


def _pieces(served, text: str, max_new_tokens=NEW) -> tuple[list[int], list[int], list[str]]:
    """A row's start ids, generated ids (to EOS) and what each of them adds to its text
    (the reference's own detokenization)."""
    start = served.prompt_ids(text)[0]
    if served.family == "decoder-only":
        tokens = served.generate_ids([start], max_new_tokens).tokens[0]
    else:
        tokens = served.translate_ids([start], max_new_tokens).tokens[0]
    ids = generated(served, tokens)
    context = start if served.family == "decoder-only" else []
    return start, ids, token_texts(served, context, ids)


def _usable(stop: str) -> bool:
    return bool(stop) and "\ufffd" not in stop  # (a character whose bytes never all came)


def _stops_in(texts: list[str]) -> dict[str, str]:
    """Stop strings taken from a row's own output, so that they occur: a character and a
    whole token's text from its middle, and two characters across a token boundary."""
    text = "".join(texts)
    stops = {}
    if _usable(text[len(text) // 2 : len(text) // 2 + 1]):
        stops["character"] = text[len(text) // 2]
    middle = texts[len(texts) // 2 :] + texts[: len(texts) // 2]
    token = next((t for t in middle if _usable(t) and t.strip()), None)
    if token:
        stops["token"] = token
    ends = np.cumsum([len(t) for t in texts])
    for i in sorted(range(len(texts) - 1), key=lambda i: abs(i - len(texts) // 2)):
        if texts[i] and texts[i + 1] and _usable(text[ends[i] - 1 : ends[i] + 1]):
            stops["across tokens"] = text[ends[i] - 1 : ends[i] + 1]
            break
    return stops


# --- the text ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["gpt", "gpt2", "marian", "translator"])
def test_greedy_text_ends_before_the_stop_as_the_whole_text_cut(models, name):
    served = models[name]
    found = set()
    for text in _inputs(served):
        whole = _run(served, text)[0]
        for kind, stop in _stops_in(_pieces(served, text)[2]).items():
            assert stop in whole
            assert _run(served, text, stop=stop) == [cut(whole, stop)], (text, kind, stop)
            assert _run(served, [text], stop=[stop, "never"]) == [cut(whole, stop)]
            found.add(kind)
    assert found == {"character", "token", "across tokens"}


@pytest.mark.parametrize("name", ["gpt", "gpt2", "marian", "translator"])
def test_a_stop_that_never_occurs_changes_nothing(models, name):
    served = models[name]
    never = ["\u2603 never", "zzzzqqq"]
    assert _run(served, _inputs(served), stop=never) == _run(served, _inputs(served))


def test_the_earliest_of_several_stops_ends_the_text(gpt):
    whole = gpt.generate(PROMPTS[3], NEW)[0]
    earlier, later = whole[1:3], whole[-2:]
    assert earlier and later and 0 < whole.find(earlier) < whole.find(later)
    assert gpt.generate(PROMPTS[3], NEW, stop=[later, earlier]) == [whole[: whole.find(earlier)]]


@pytest.mark.parametrize("name", ["gpt", "gpt2"])
def test_rows_of_a_batch_stop_independently_and_as_alone(models, name):
    served = models[name]
    wholes = _run(served, PROMPTS)
    # From two rows, so that rows end at different steps (or not at all).
    stops = [_stops_in(_pieces(served, PROMPTS[i])[2])["across tokens"] for i in (2, 3)]
    expected = [cut(whole, stops) for whole in wholes]
    assert expected != wholes
    assert _run(served, PROMPTS, stop=stops) == expected
    assert [_run(served, p, stop=stops)[0] for p in PROMPTS] == expected
    assert _run(served, PROMPTS, stop=stops, batch_size=2) == expected


@pytest.mark.parametrize("name", ["gpt", "gpt2", "marian"])
def test_generation_ends_at_the_token_that_completes_the_stop(models, name):
    """The row stops stepping; its ids are the ids without `stop` up to and including
    the token whose text completes the stop string, then none."""
    served = models[name]
    text = _inputs(served)[-1] if name == "gpt" else _inputs(served)[1]
    start, tokens, texts = _pieces(served, text)
    whole = _run(served, text)[0]
    stop = _stops_in(texts)["across tokens"]
    ends = whole.find(stop) + len(stop)
    last = next(i for i in range(len(texts)) if len("".join(texts[: i + 1])) >= ends)

    context = start if served.family == "decoder-only" else []
    row = StopText(served.target_tokenizer, context, [stop])
    steps = []
    real_step = served.engine.step

    def counted(next_tokens, state):
        steps.append(1)
        return real_step(next_tokens, state)

    def stopping(t, live):
        return np.array([live[0] and row.add(int(t[0]))])

    served.engine.step = counted
    try:
        if served.family == "decoder-only":
            result = served.generate_ids([start], NEW, stopping=stopping)
        else:
            result = served.translate_ids([start], NEW, stopping=stopping)
        stopped = _run(served, text, stop=stop)
    finally:
        del served.engine.step
    assert result.tokens[0].tolist() == tokens[: last + 1]
    assert row.stopped and row.text == stopped[0] == cut(whole, stop)
    assert len(steps) == 2 * last  # `last` steps in each of the two runs


@pytest.mark.parametrize(
    "name, search",
    [
        *((n, Sampling(temperature=1.0, seed=7)) for n in ("gpt", "gpt2", "marian")),
        # Beam search decodes to the end and cuts: its beams reorder at every step.
        *((n, BeamSearch(num_beams=2)) for n in ("gpt2", "marian")),
    ],
)
def test_sampled_and_beam_text_ends_as_its_whole_text_cut(models, name, search):
    served = models[name]
    wholes = _run(served, _inputs(served), NEW, search)
    longest = max(wholes, key=len)
    stop = next(c for c in longest[len(longest) // 2 :] if _usable(c))
    expected = [cut(w, stop) for w in wholes]
    assert expected != wholes
    assert _run(served, _inputs(served), NEW, search, stop=stop) == expected


def test_stop_is_checked_as_the_server_checks_it(gpt):
    assert MAX_STOPS == openai_protocol.MAX_STOPS == 16
    assert stop_strings(None) == [] and stop_strings("a") == ["a"]
    assert stop_strings(("a", "b")) == ["a", "b"]
    for bad, words in (
        ("", "non-empty"),
        (["a", ""], "non-empty"),
        ([f"s{i}" for i in range(MAX_STOPS + 1)], f"up to {MAX_STOPS}"),
        ([5], "a string or a list of strings"),
        (b"a", "a string or a list of strings"),
        ("\udc00", "lone surrogate"),
    ):
        with pytest.raises(InputError, match=words):
            gpt.generate("dogs", 4, stop=bad)
    gpt.generate("dogs", 4, stop=[f"s{i}" for i in range(MAX_STOPS)])
    with pytest.raises(ValueError, match="Beam search takes no `stopping`"):
        generate(gpt.engine, {}, 4, BeamSearch(2), stopping=lambda t, live: live)


def test_what_a_stream_holds_back():
    assert held_back("the ca", ["cat"]) == 2 and held_back("the c", ["at", "cow"]) == 1
    assert held_back("xab", ["abc", "bz"]) == 2  # the longer of the two
    assert held_back("the", ["cat"]) == 0 and held_back("", ["cat"]) == 0
    assert first_stop("a cat sat", ["sat", "at"]) == 3
    assert first_stop("a cat sat", ["dog"]) is None


def _held_back_reference(text: str, stops) -> int:
    """The longest end of `text` that is a proper beginning of a stop: for each stop,
    every size from the longest down."""
    held = 0
    for stop in stops:
        sizes = range(min(len(stop) - 1, len(text)), 0, -1)
        held = max(held, next((n for n in sizes if text.endswith(stop[:n])), 0))
    return held


class _Letters:
    """A tokenizer whose id i is the letter `alphabet[i]`, for `StopText` without a model."""

    def __init__(self, alphabet: str):
        self.alphabet = alphabet
        self.vocabulary_size = len(alphabet)

    def decode(self, ids, stop_at_eos=False):
        return "".join(self.alphabet[i] for i in ids)


def test_held_back_is_the_longest_end_that_begins_a_stop_as_text_arrives():
    # Few letters, so that ends and stops overlap often; each stream's text is held back
    # as the reference holds back its whole text at every token.
    rng = np.random.default_rng(0)
    for _ in range(300):
        letters = "ab" if rng.random() < 0.5 else "abc"
        stops = ["".join(rng.choice(list(letters), rng.integers(1, 9))) for _ in range(3)]
        row = StopText(_Letters(letters), [], stops)
        while not row.stopped and len(row.text) < 40:
            row.add(int(rng.integers(len(letters))))
            assert row.releasable() == len(row.text) - (
                0 if row.stopped else _held_back_reference(row.text, stops)
            ), (row.text, stops)
            text = row.text + letters[int(rng.integers(len(letters)))]
            assert held_back(text, stops) == _held_back_reference(text, stops), (text, stops)


# --- the server and the command line -------------------------------------------------------
def test_the_server_gives_what_served_model_gives(client, local):
    gpt, translator = local["gpt"], local["translator"]
    prompt = PROMPTS[3]
    whole = gpt.generate(prompt, 12)[0]
    for stop in (whole[4:6], [whole[-1], whole[5], "never"]):
        answer = client.completions.create(
            model="gpt", prompt=prompt, max_tokens=12, temperature=0, stop=stop
        ).choices[0]
        assert answer.text == gpt.generate(prompt, 12, stop=stop)[0] == cut(whole, stop)
        assert answer.finish_reason == "stop"
    translation = translator.translate(SOURCES[1], 12)[0]
    stop = translation[3:5]
    answer = client.completions.create(
        model="translator", prompt=SOURCES[1], max_tokens=12, temperature=0, stop=stop
    ).choices[0]
    assert answer.text == translator.translate(SOURCES[1], 12, stop=stop)[0]


def _cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_stop_ends_each_output(family_artifacts, hf_exports, gpt, marian, capsys):
    export = family_artifacts("decoder-only").export_dir
    wholes = gpt.generate(PROMPTS[1:], NEW)
    stop = wholes[-1][6:8]
    argv = ["generate", *PROMPTS[1:], "--model", export, "--max-new-tokens", NEW]
    code, out, _ = _cli(capsys, *argv, "--stop", stop, "--stop", "never", "--format", "jsonl")
    assert code == 0
    assert [json.loads(line)["generated"] for line in out.splitlines()] == [
        cut(w, stop) for w in wholes
    ]
    export = hf_exports["marian"]
    translations = marian.translate(SOURCES, 12)
    stop = translations[0][4:6]
    argv = ["translate", *SOURCES, "--model", export, "--max-new-tokens", 12, "--stop", stop]
    code, out, _ = _cli(capsys, *argv, "--format", "jsonl")
    assert code == 0
    assert [json.loads(line)["translation"] for line in out.splitlines()] == [
        cut(t, stop) for t in translations
    ]


def test_cli_stop_works_with_the_keras_engine(family_artifacts, capsys):
    art = family_artifacts("decoder-only")
    argv = ["generate", "dogs", "the cat", "--model", art.run_dir, "--engine", "keras"]
    argv += ["--max-new-tokens", 10, "--format", "jsonl"]
    code, out, _ = _cli(capsys, *argv)
    assert code == 0
    wholes = [json.loads(line)["generated"] for line in out.splitlines()]
    stop = wholes[0][len(wholes[0]) // 2]
    code, out, _ = _cli(capsys, *argv, "--stop", stop)
    assert code == 0
    assert [json.loads(line)["generated"] for line in out.splitlines()] == [
        cut(w, stop) for w in wholes
    ]


def test_cli_refuses_a_bad_stop_in_one_line(family_artifacts, capsys):
    export = family_artifacts("decoder-only").export_dir
    for stop, words in (("", "non-empty"), ("\udcff", "lone surrogate")):
        code, _, err = _cli(capsys, "generate", "dogs", "--model", export, "--stop", stop)
        assert code == 2 and len(err.strip().splitlines()) == 1 and words in err
        assert err.startswith("transformer-zoo generate: error: `--stop`")


def test_greedy_with_stopping_steps_even_where_the_engine_decodes_in_one_call(gpt):
    assert gpt.engine.decodes_greedily
    inputs = gpt.start_inputs(gpt.prompt_ids(PROMPTS))
    eos, pad = gpt.config.special_ids.get("eos"), gpt.config.special_ids.get("pad", 0)
    whole = generate(gpt.engine, inputs, 8, Greedy(), eos, pad)
    never = generate(gpt.engine, inputs, 8, None, eos, pad, lambda t, live: np.zeros_like(live))
    np.testing.assert_array_equal(never.tokens, whole.tokens)
    first = generate(gpt.engine, inputs, 8, None, eos, pad, lambda t, live: live)
    np.testing.assert_array_equal(first.tokens, whole.tokens[:, :1])


def test_a_stop_string_completed_by_the_u_fffd_a_budget_end_adds_is_met_alike():
    """A GPT-2 row whose budget ends on the byte E2 alone (the first of "€"'s three):
    ending it adds U+FFFD, which completes the stop string "\ufffd". The HTTP server's
    `Generation` (its scheduler's events forced here: a row's tokens cannot be chosen)
    cuts the text there and says "stop", as `completions_in_batches` (what
    `ServedModel.generate_completions` runs) says of the same tokens; it said "length"."""
    import asyncio
    import types

    from transformer_zoo.generation.search_common import SearchResult
    from transformer_zoo.serving.http.completions import Choice, Generation
    from transformer_zoo.serving.http.generation_row import Finished, Token
    from transformer_zoo.serving.text_batches import Completion, completions_in_batches
    from transformer_zoo.text.byte_level_bpe import ByteLevelBPETokenizer

    tokenizer = ByteLevelBPETokenizer.from_directory("tests/data/hf_gpt2")
    lead = next(i for i in range(tokenizer.vocabulary_size) if tokenizer.token_bytes(i) == b"\xe2")
    prompt, stops = tokenizer.encode(["Hello world"])[0], ["\ufffd"]
    tokens = [*tokenizer.encode([" a"])[0], lead]
    assert len(tokens) == 2 and tokenizer.decode(tokens[:1]) == " a"
    served = types.SimpleNamespace(family="decoder-only", target_tokenizer=tokenizer)

    async def served_row() -> Choice:
        scheduler = types.SimpleNamespace(observe=lambda *args: None)
        generation = Generation(scheduler, [prompt], [2], lambda j: Greedy(), 1, stops, None, 60)
        choices = [Choice(served, stops, prompt)]
        for event in (*(Token(t, -1.0) for t in tokens), Finished("length")):
            generation.queue.put_nowait((0, event))
        while generation.open:
            await generation.next(choices, 10)
        return choices[0]

    choice = asyncio.run(served_row())
    (completion,) = completions_in_batches(
        [prompt], [2], 1, lambda *args: SearchResult(np.array([tokens]), None), tokenizer,
        True, None, stops=stops,
    )  # fmt: skip
    assert (choice.text, choice.finish_reason) == completion == Completion(" a", "stop")
