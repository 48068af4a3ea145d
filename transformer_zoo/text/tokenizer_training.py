"""Training a SentencePiece `Tokenizer` with the zoo's special ids (`train_tokenizer`)."""

from __future__ import annotations

import functools
import io
import logging
import os
import re
import sys
import tempfile
import unicodedata
from collections.abc import Iterable, Iterator
from functools import partial

import sentencepiece as spm

from transformer_zoo.errors import first_line, is_integer
from transformer_zoo.text.formats import is_blank
from transformer_zoo.text.tokenizer import BOS_ID, EOS_ID, MASK_PIECE, PAD_ID, UNK_ID, Tokenizer

log = logging.getLogger(__name__)  # a word vocabulary's cut; the command line shows it

MODEL_TYPES = ("unigram", "bpe", "char", "word")
# Han characters (CJK Unified Ideographs, Extension A, compatibility, Extensions B-G).
HAN = re.compile("([\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f])")
# Training-only boundary (SentencePiece's `pretokenization_delimiter`); it never reaches
# the model, so encoding needs no pre-processing.
_DELIMITER = "\u2063"
# SentencePiece skips a training sentence longer than its `max_sentence_length` (4,192
# bytes by default), so characters found only in long lines became <unk>, and a text of
# long lines only failed to train at all: long texts train as chunks of at most this many
# characters (4 bytes each at most in UTF-8), cut at a space where there is one.
_CHUNK = 4096
# SentencePiece's options for each `normalization` of `train_tokenizer`; its default rule,
# nmt_nfkc, is NFKC with a few NMT clean-ups.
_NORMALIZATION_OPTIONS = {
    "nfkc": {},
    "identity": dict(normalization_rule_name="identity"),
    "verbatim": dict(
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        add_dummy_prefix=False,
        user_defined_symbols=["\n"],
    ),
}
NORMALIZATIONS = tuple(_NORMALIZATION_OPTIONS)


def train_tokenizer(
    texts: Iterable[str],
    vocabulary_size: int,
    model_type: str = "unigram",
    character_coverage: float = 1.0,
    split_digits: bool = True,
    split_han: bool = True,
    normalization: str = "nfkc",
) -> Tokenizer:
    """Trains a SentencePiece model on `texts` with the zoo's special ids.

    Args:
        texts: training sentences: a list (or other iterable) of strings, one each.
        vocabulary_size: the target number of pieces, special ones included. It is a
            soft limit: a small corpus yields fewer pieces instead of an error, and with
            full coverage it grows to hold every character of the text. A `"word"`
            vocabulary keeps the most frequent words that fit; the rest read as `<unk>`,
            which a warning says.
        model_type: `"unigram"` (default), `"bpe"`, `"char"` or `"word"`: a word is what
            `str.split()` separates (any Unicode whitespace splits, as a space). A word
            model has no newline piece, so it takes no `"verbatim"` normalization.
        character_coverage: share of characters covered; 1.0 keeps every character
            of the training text, which Chinese needs.
        split_digits: make every digit its own piece, so numbers and dates are copied
            digit by digit instead of through thousands of year-sized pieces.
        split_han: make every Han character its own piece, as BERT does for CJK text.
            Chinese marks no word boundaries, so a unigram model would otherwise spend
            the vocabulary on phrases such as 晚上九点四十, each a rare class of its own.
        normalization: what the tokenizer does to text before splitting it, and so which
            text `decode` can give back:
            - `"nfkc"` (default, SentencePiece's nmt_nfkc): NFKC, which makes full-width
              forms, ligatures and other compatibility characters plain (`，` → `,`,
              `２` → `2`, `ﬁ` → `fi`), and spaces collapsed (leading, trailing and
              repeated ones dropped). For input text only: a model whose output it
              decodes can never write those characters, even where they are the right
              text (Chinese punctuation).
            - `"identity"`: every character kept, spaces still collapsed, so that
              `decode(encode(text))` is `text` but for its spaces, for text of known
              characters: for the text a model writes (targets, completions).
            - `"verbatim"`: text as it is, for a token stream: spaces not collapsed, no
              "▁" before the text, and a piece for the newline, so that
              `decode(encode(text)) == text` for text of known characters.

    Returns:
        The trained `Tokenizer`; `save` writes `tokenizer.model`.
    """
    if isinstance(texts, (str, bytes)):
        raise ValueError(
            "`texts` must be a list of strings, one sentence each (`[text]` for one text). "
            f"Received: a single {type(texts).__name__}"
        )
    if is_integer(vocabulary_size):
        vocabulary_size = int(vocabulary_size)  # a numpy integer, say
    if not isinstance(vocabulary_size, int) or vocabulary_size < 6:
        raise ValueError(
            f"`vocabulary_size` must be an integer ≥ 6. Received: vocabulary_size={vocabulary_size}"
        )
    if model_type not in MODEL_TYPES:
        raise ValueError(f"`model_type` must be one of {MODEL_TYPES}. Received: {model_type!r}")
    if normalization not in NORMALIZATIONS:
        raise ValueError(
            f"`normalization` must be one of {NORMALIZATIONS}. Received: {normalization!r}"
        )
    if model_type == "word" and normalization == "verbatim":
        # SentencePiece's word model ignores the newline piece: a word and the line end
        # after it would read as one unknown word.
        raise ValueError(
            'A "word" tokenizer has no newline piece, so it takes no `normalization="verbatim"` '
            '(a token stream): use "identity" on lines, or a "unigram", "bpe" or "char" model.'
        )
    if not 0.0 < character_coverage <= 1.0:
        raise ValueError(f"`character_coverage` must be in (0, 1]. Received: {character_coverage}")
    texts = list(texts)
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise ValueError(
                f"`texts` must be strings. Received: texts[{index}] of type {type(text).__name__}"
            )
    if all(map(is_blank, texts)):
        raise ValueError("`texts` holds no non-empty sentence to train the tokenizer on.")
    texts = [t for t in texts if t.strip()]
    options = _NORMALIZATION_OPTIONS[normalization]
    # A word model splits at spaces only: under the identity normalization, its words
    # split where `str.split()` splits them (a tab, U+00A0, U+3000 are spaces), by a
    # rule of SentencePiece's that maps those characters to a space and keeps the rest.
    word_spaces = _word_spaces() if model_type == "word" and normalization == "identity" else ""
    if character_coverage == 1.0:
        # SentencePiece refuses a vocabulary smaller than the characters it must keep
        # (counted after its normalization), plus the special pieces, "▁" and, verbatim,
        # the newline. NFKC makes a tab a space ("▁"); the identity normalization keeps it.
        nfkc = normalization == "nfkc"
        normalize = partial(unicodedata.normalize, "NFKC") if nfkc else (lambda t: t)
        characters = set("".join(normalize(t) for t in texts))
        spaces = {" ", "\t", *word_spaces} if nfkc else {" ", *word_spaces}
        pieces = len(characters - spaces) + 6 + (normalization == "verbatim")
        vocabulary_size = max(vocabulary_size, pieces)
    # Only unigram and BPE merge characters (and take SentencePiece's delimiter).
    split_han = split_han and model_type in ("unigram", "bpe")
    if split_han:
        texts = [HAN.sub(f"{_DELIMITER}\\1{_DELIMITER}", t) for t in texts]
    texts = [chunk for t in texts for chunk in _chunks(t)]
    model = io.BytesIO()
    with tempfile.TemporaryDirectory() as directory:
        if word_spaces:
            options = dict(normalization_rule_tsv=_write_rule(directory, word_spaces))
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter(texts),
                model_writer=model,
                vocab_size=vocabulary_size,
                model_type=model_type,
                character_coverage=character_coverage,
                split_digits=split_digits,
                pad_id=PAD_ID,
                unk_id=UNK_ID,
                bos_id=BOS_ID,
                eos_id=EOS_ID,
                control_symbols=[MASK_PIECE],
                **options,
                pretokenization_delimiter=_DELIMITER if split_han else "",
                hard_vocab_limit=False,
                max_sentence_length=4 * _CHUNK,  # bytes
                # Long corpora are sampled, not read whole; one thread keeps training
                # deterministic.
                input_sentence_size=1_000_000,
                shuffle_input_sentence=True,
                num_threads=1,
                minloglevel=2,
            )
        except RuntimeError as error:  # SentencePiece's own checks, a C++ message
            raise ValueError(
                f"SentencePiece cannot train a tokenizer on this text: {first_line(error)}"
            ) from None
    proto = model.getvalue()
    if word_spaces:
        proto = _without_rule_path(proto)
    tokenizer = Tokenizer(proto)
    if model_type == "word":
        _warn_words_cut(texts, tokenizer)
    return tokenizer


@functools.cache
def _word_spaces() -> str:
    """The characters `str.split()` splits at, but the space itself."""
    return "".join(c for c in map(chr, range(sys.maxunicode + 1)) if c.isspace() and c != " ")


def _write_rule(directory: str, spaces: str) -> str:
    """Writes SentencePiece's normalization rule (a TSV of source code points, target
    code points, in hex) that makes each of `spaces` a space; returns its path."""
    path = os.path.join(directory, "word_spaces.tsv")
    with open(path, "w", encoding="ascii") as file:
        file.writelines(f"{ord(c):X}\t20\n" for c in spaces)
    return path


def _without_rule_path(proto: bytes) -> bytes:
    """The model `proto` without the path of its rule's TSV file (a temporary one, which
    would make the same text train models of other bytes); the rule itself is compiled
    into the model."""
    from sentencepiece import sentencepiece_model_pb2

    model = sentencepiece_model_pb2.ModelProto.FromString(proto)
    model.normalizer_spec.ClearField("normalization_rule_tsv")
    return model.SerializeToString()


def _warn_words_cut(texts: list[str], tokenizer: Tokenizer) -> None:
    """One warning when a word vocabulary is smaller than the words of its text: the
    others become `<unk>`, in the inputs a model reads and the targets it learns alike.
    The words are counted as the tokenizer splits them, after its own normalization."""
    words = {w for text in texts for w in tokenizer.normalize(text).split("▁") if w}
    kept = sum(map(tokenizer.is_word_piece, range(tokenizer.vocabulary_size)))
    if len(words) > kept:
        log.warning(
            "the word tokenizer keeps the %d most frequent of the text's %d distinct words; "
            "the other %d read as <unk> (a larger vocabulary size keeps them)",
            kept,
            len(words),
            len(words) - kept,
        )


def _chunks(text: str) -> Iterator[str]:
    """`text` in pieces of at most `_CHUNK` characters, each cut before a space where
    one lies in its second half (so that no word is cut), else where the size says."""
    while len(text) > _CHUNK:
        cut = text.rfind(" ", _CHUNK // 2, _CHUNK)
        cut = cut if cut > 0 else _CHUNK
        yield text[:cut]
        text = text[cut:]
    yield text
