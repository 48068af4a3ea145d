"""GPT-2's byte-level BPE against transformers 5.25's `GPT2Tokenizer` on
`tokenizer_config.json`'s `add_prefix_space` (tests/data/hf_tokenizer_reference.json, on
the tests/data/hf_gpt2 checkpoint), and a run's tokenizer.json keeping it."""

import pytest

from tests.data.hf_tokenizer_cases import DEFAULTS_REFERENCE, make_case, reference
from tests.helpers import DATA_DIR, gpt2_bytes_to_unicode
from transformer_zoo.text.byte_level_bpe import ByteLevelBPETokenizer

GPT2 = reference()["gpt2"]
CASES = {case["name"]: case for case in GPT2["cases"]}
GPT2_DEFAULTS = reference(DEFAULTS_REFERENCE)["gpt2"]
# transformers 5.25 builds the pre-tokenizer from GPT2Tokenizer's default (false) where
# there is no tokenizer_config.json; ours keeps tokenizer.json's (what a run directory,
# which holds tokenizer.json alone, was saved with: the test below).
TOKENIZER_JSON_DECIDES = "no_tokenizer_config_json_true"


@pytest.mark.parametrize("name", sorted(CASES))
def test_add_prefix_space_gives_the_ids_transformers_gave(name, tmp_path):
    """transformers builds GPT-2's pre-tokenizer from tokenizer_config.json's
    `add_prefix_space` (default false), from tokenizer.json or from vocab.json +
    merges.txt alike. Before, the key was ignored: `"Hello world"` gave [40, 303, 79, 262,
    280, 342] where transformers gives [221, 40, 303, 79, 262, 280, 342]."""
    case = CASES[name]
    directory = make_case(DATA_DIR / GPT2["base"], case, tmp_path / name)
    tokenizer = ByteLevelBPETokenizer.from_directory(directory)
    assert tokenizer.add_prefix_space == (name != "prefix_space_in_tokenizer_json_only")
    ids = tokenizer.encode(case["texts"])
    assert ids == case["ids"]
    assert [tokenizer.decode(row) for row in ids] == case["decoded"]


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            case,
            marks=[pytest.mark.xfail(reason="tokenizer.json decides here", strict=True)]
            if case["name"] == TOKENIZER_JSON_DECIDES
            else [],
        )
        for case in GPT2_DEFAULTS["cases"]
    ],
    ids=lambda case: case["name"],
)
def test_a_missing_add_prefix_space_gives_the_ids_transformers_gave(case, tmp_path):
    """Without `add_prefix_space` in tokenizer_config.json, or without the file (from
    tokenizer.json or from vocab.json + merges.txt), transformers 5.25 puts no space
    before the text (tests/data/make_hf_tokenizer_defaults.py)."""
    directory = make_case(DATA_DIR / GPT2_DEFAULTS["base"], case, tmp_path / case["name"])
    tokenizer = ByteLevelBPETokenizer.from_directory(directory)
    ids = tokenizer.encode(GPT2_DEFAULTS["texts"])
    assert ids == case["ids"]
    assert [tokenizer.decode(row) for row in ids] == case["decoded"]
    assert not tokenizer.add_prefix_space


def test_the_saved_tokenizer_json_keeps_add_prefix_space(tmp_path):
    """A run directory holds tokenizer.json alone (no tokenizer_config.json): the
    pre-tokenizer it was saved with decides."""
    case = CASES["add_prefix_space_vocab_merges"]
    directory = make_case(DATA_DIR / GPT2["base"], case, tmp_path / "checkpoint")
    ByteLevelBPETokenizer.from_directory(directory).save(tmp_path)
    reloaded = ByteLevelBPETokenizer.from_directory(tmp_path)
    assert reloaded.add_prefix_space and reloaded.encode(case["texts"]) == case["ids"]


def test_a_malformed_add_prefix_space_is_refused(tmp_path):
    directory = make_case(
        DATA_DIR / GPT2["base"],
        {"patch": {"tokenizer_config.json": {"add_prefix_space": "yes"}}},
        tmp_path / "bad",
    )
    with pytest.raises(ValueError, match="add_prefix_space='yes'"):
        ByteLevelBPETokenizer.from_directory(directory)


def test_token_bytes_are_what_the_decoder_reads():
    """A token's bytes (what `detokenize` tells an incomplete character by) are its
    characters through GPT-2's table, and the decoder's text of the token alone is them
    as Python decodes UTF-8; the end-of-text token has none."""
    gpt2 = ByteLevelBPETokenizer.from_directory(DATA_DIR / GPT2["base"])
    table = {c: b for b, c in gpt2_bytes_to_unicode().items()}
    for token_id in range(gpt2.vocabulary_size):
        expected = (
            b"" if token_id == gpt2.eos_id else bytes(table[c] for c in gpt2.id_to_token(token_id))
        )
        assert gpt2.token_bytes(token_id) == expected
        assert gpt2.decode([token_id], stop_at_eos=False) == expected.decode("utf-8", "replace")
    assert gpt2.token_bytes(gpt2.vocabulary_size) == b""  # no token: no bytes, as decoded
