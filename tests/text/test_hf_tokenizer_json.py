"""`text.hf_tokenizer_json`: the `tokenizer.json` that `export --format hf` writes for a
SentencePiece tokenizer of ours, read by the `tokenizers` library, held to SentencePiece
itself (our `Tokenizer`, an independent implementation) on every kind and normalization:
the ids of hard texts in each family's format, pairs, decoded text. transformers' own
reading of the same files: tests/export/test_hf_export.py."""

import functools
import logging
import random
import unicodedata

import pytest
from sentencepiece import sentencepiece_model_pb2
from tokenizers import Tokenizer as HFTokenizer

from tests.data.hf_sentencepiece_cases import (
    CASES,
    PAIRS,
    SCRIPTS,
    TEXTS,
    corpus,
    our_ids,
    train,
    write_export,
)
from tests.helpers import WORDPIECE_EDGE_CASES
from transformer_zoo.text import pair_ids, train_tokenizer
from transformer_zoo.text.hf_tokenizer_json import sentencepiece_tokenizer_json
from transformer_zoo.text.tokenizer import Tokenizer

FAMILY_NAMES = ("encoder-only", "decoder-only")


def _random_texts(count: int = 150) -> list[str]:
    """Texts of the corpus' characters (so most are pieces) with spaces, tabs and line
    ends in any number and place."""
    characters = sorted(set("".join(SCRIPTS)) | set("abcdefghij ")) + ["  ", "\t", "\n"]
    rng = random.Random(0)
    return ["".join(rng.choices(characters, k=rng.randint(0, 24))) for _ in range(count)]


HARD_TEXTS = TEXTS + WORDPIECE_EDGE_CASES + _random_texts()


trained = functools.cache(train)  # each case's tokenizer, trained once


def _exported(tokenizer, family, directory) -> HFTokenizer:
    exported = HFTokenizer.from_file(
        str(write_export(tokenizer, family, directory) / "tokenizer.json")
    )
    # What transformers does with the export's `split_special_tokens`: "<s>" in a text
    # is text, as SentencePiece reads it.
    exported.encode_special_tokens = True
    return exported


@pytest.mark.parametrize("family", FAMILY_NAMES)
@pytest.mark.parametrize(("kind", "normalization"), CASES)
def test_exported_tokenizer_json_gives_sentencepiece_ids(kind, normalization, family, tmp_path):
    tokenizer = trained(kind, normalization)
    exported = _exported(tokenizer, family, tmp_path)
    for text in HARD_TEXTS:
        ours, _ = our_ids(tokenizer, family, text)
        assert exported.encode(text).ids == ours, text
    if family == "encoder-only":  # [bos] a [eos] b [eos], segment 1 from b
        for a, b in PAIRS:
            encoding = exported.encode(a, b)
            assert (encoding.ids, encoding.type_ids) == our_ids(tokenizer, family, a, b)


@pytest.mark.parametrize(("kind", "normalization"), CASES)
def test_exported_tokenizer_json_decodes_as_sentencepiece(kind, normalization, tmp_path):
    """Special ids give no text, "▁" a space, the dummy prefix none, `<unk>` " ⁇ ". Not
    held: a text that starts with a "▁" of its own, whose "▁" pieces SentencePiece
    strips while its output is empty, and tokenizers' decoder only from the first."""
    tokenizer = trained(kind, normalization)
    exported = _exported(tokenizer, "encoder-only", tmp_path)
    for text in [t for t in HARD_TEXTS if not t.lstrip(" ").startswith("▁")]:
        ids, _ = our_ids(tokenizer, "encoder-only", text)
        assert exported.decode(ids, skip_special_tokens=True) == tokenizer.decode(ids), text


def test_decomposed_text_normalizes_as_sentencepiece_nfkc():
    """tokenizers' `Precompiled` alone, grapheme by grapheme, read NFD Vietnamese "ệ" as
    "ẹ" and left NFD Hangul and half-width "ｶﾞ" apart, where SentencePiece composes them:
    different ids for text of known characters."""
    tokenizer = trained("unigram", "nfkc")
    converted = sentencepiece_tokenizer_json(tokenizer, add_eos=False)
    for form in ("NFC", "NFD", "NFKC", "NFKD"):
        for line in [*SCRIPTS, "ｶﾞｷﾞｸﾞ ﾊﾟﾋﾟ ＡＢＣ"]:
            text = unicodedata.normalize(form, line)
            assert converted.encode(text).ids == [2, *tokenizer.encode(text)], (form, line)


@pytest.mark.parametrize("kind", ["unigram", "bpe", "char"])
def test_a_text_that_spells_a_special_piece_reads_as_its_characters(kind):
    """As transformers reads it with `split_special_tokens`. tokenizers' unigram lattice
    holds the special pieces: "<s>" read as <s> where "<" is unknown, where
    SentencePiece reads <unk> s <unk>."""
    lines = [line for line in corpus() if "<" not in line and ">" not in line]
    tokenizer = train_tokenizer(lines, 200, model_type=kind)
    assert tokenizer.piece_to_id("<") == tokenizer.unk_id
    converted = sentencepiece_tokenizer_json(tokenizer, add_eos=False)
    converted.encode_special_tokens = True
    for text in ["x<s>y </s> <pad><mask> <unk>", "<s>", "a<b", "<<s>>", "\uffff<s>\uffff"]:
        assert converted.encode(text).ids == [2, *tokenizer.encode(text)], text


def test_a_word_tokenizer_differs_only_in_unknown_words_in_a_row(caplog):
    """SentencePiece reads unknown words in a row as one <unk>, a word-level vocabulary
    as one each: the one difference, which the conversion warns of."""
    tokenizer = train_tokenizer(corpus(), 300, model_type="word", normalization="identity")
    with caplog.at_level(logging.WARNING, logger="transformer_zoo"):
        converted = sentencepiece_tokenizer_json(tokenizer, add_eos=True)
    assert "unknown words in a row as one <unk>" in caplog.text
    pieces = map(tokenizer.id_to_piece, range(tokenizer.vocabulary_size))
    first, second, third, fourth = [p[1:] for p in pieces if p.startswith("▁")][:4]
    apart = f"{first} zzzq {second}\t{third}  xyzzy {fourth}"
    assert converted.encode(apart).ids == [2, *tokenizer.encode(apart), 3]
    ours = tokenizer.encode(f"{first} zzzq xyzzy {second}")
    assert ours[1] == tokenizer.unk_id and len(ours) == 3
    assert converted.encode(f"{first} zzzq xyzzy {second}").ids == [2, ours[0], 1, 1, ours[2], 3]


def test_a_model_the_conversion_cannot_reproduce_is_refused():
    model = sentencepiece_model_pb2.ModelProto.FromString(trained("bpe", "identity").proto)
    model.trainer_spec.treat_whitespace_as_suffix = True
    with pytest.raises(ValueError, match="whitespace as a suffix"):
        sentencepiece_tokenizer_json(Tokenizer(model.SerializeToString()), add_eos=False)


@pytest.mark.parametrize("segments", [0, 1, 2])
def test_a_pair_reads_in_the_segments_the_model_has(segments):
    """A model of fewer than two segment rows reads a pair's second text in segment 0
    (`text.formats.pair_row`, as RoBERTa's tokenizer): the tokenizer.json wrote segment
    1 for it, which such a checkpoint cannot embed in transformers."""
    tokenizer = trained(*CASES[0])
    converted = sentencepiece_tokenizer_json(tokenizer, True, int(segments >= 2))
    encoding = converted.encode("the cat", "a dog")
    ids, segment_ids = pair_ids(tokenizer, "the cat", "a dog", None, segments)
    assert (encoding.ids, encoding.type_ids) == (ids, segment_ids)
