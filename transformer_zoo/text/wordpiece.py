"""BERT's WordPiece tokenizer without TensorFlow, for serving and training alike.

Built on the Rust `tokenizers` package from a vocabulary (`vocab.txt`, or a checkpoint's
`tokenizer.json`) and the options and added tokens of `tokenizer_config.json`. It reproduces
Hugging Face's `BertTokenizer(Fast)` (and so sentence-transformers): the same normaliser,
pre-tokenizer, WordPiece model, added tokens and `[CLS] … [SEP]` template; the tests hold it
to the ids recorded from the reference implementation (transformers 5.25).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
from tokenizers import (
    AddedToken,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
)

from transformer_zoo.errors import check_flag, count, is_integer
from transformer_zoo.files import write_json, write_text
from transformer_zoo.text.wordpiece_files import (
    ADDED_TOKEN_FIELDS,
    TOKENIZER_CONFIG,
    VOCAB_FILENAME,
    added_tokens_of,
    optional_json,
    read_vocabulary,
    vocabulary_of,
)

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
# transformers' `clean_up_tokenization` (`PreTrainedTokenizerBase`), applied to a decoded
# text when `clean_up_tokenization_spaces` is set.
CLEAN_UP_REPLACEMENTS = (
    (" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
    (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"),
)  # fmt: skip
# BERT's WordPiece maps a word of more characters than this to [UNK] (google-research/bert).
MAX_INPUT_CHARS_PER_WORD = 100


class WordPieceTokenizer:
    """BERT WordPiece: text → `[CLS] tokens [SEP]` ids, truncated and padded.

    Normalisation follows BERT (Devlin et al. 2019, §A.2 and google-research/bert
    `tokenization.py`): remove control characters and map whitespace to spaces, put spaces
    around CJK ideographs so each is its own word, strip accents (NFD, drop combining marks)
    and lower-case; then split on whitespace and punctuation, and split each word greedily
    into the longest vocabulary pieces (`##` marks a continuation), `[UNK]` where a word
    cannot be covered or is over 100 characters long. The special tokens and the added
    tokens are matched as whole tokens in the text first, as Hugging Face does.

    Args:
        vocabulary: the tokens in id order, or the path of a `vocab.txt`.
        max_length: the longest encoded sequence, `[CLS]` and `[SEP]` included; longer
            inputs keep their first `max_length - 2` tokens. Use the model's maximum
            (256 for all-MiniLM-L6-v2, which sentence-transformers truncates there; 512
            for BERT).
        lowercase: lower-case the text (an uncased model).
        strip_accents: remove accents; `None` follows `lowercase`, as in BERT.
        tokenize_chinese_chars: put spaces around CJK ideographs (BERT's default); without
            it a run of them is one word, `[UNK]` unless the vocabulary holds it.
        added_tokens: `tokenizers.AddedToken`s (`transformers`' `add_tokens`), taking the
            ids after the vocabulary in this order; one the vocabulary holds keeps its id.
            The five special tokens are added as special after them, unless among them.
        clean_up_tokenization_spaces: `decode` applies transformers' clean-up (`" ' "` →
            `"'"`, `" ."` → `"."`, ...; `CLEAN_UP_REPLACEMENTS`) to the whole text.

    Example:
    >>> tok = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "##s"])
    >>> tok.encode(["Hellos!"])["input_ids"].tolist()
    [[2, 5, 6, 1, 3]]
    """

    def __init__(
        self,
        vocabulary: Sequence[str] | str | os.PathLike,
        max_length: int = 512,
        lowercase: bool = True,
        strip_accents: bool | None = None,
        tokenize_chinese_chars: bool = True,
        added_tokens: Sequence[AddedToken] = (),
        clean_up_tokenization_spaces: bool = False,
    ):
        if isinstance(vocabulary, (str, os.PathLike)):
            vocabulary = read_vocabulary(vocabulary)
        vocabulary = list(vocabulary)
        missing = [t for t in SPECIAL_TOKENS if t not in vocabulary]
        if missing:
            raise ValueError(
                f"`vocabulary` lacks the special tokens {missing}. "
                f"Received: vocabulary of {count(len(vocabulary), 'token')}"
            )
        if len(set(vocabulary)) != len(vocabulary):
            raise ValueError("`vocabulary` holds a token more than once.")
        max_length = _checked_max_length(max_length)
        flags = {
            "lowercase": lowercase,
            "strip_accents": lowercase if strip_accents is None else strip_accents,
            "tokenize_chinese_chars": tokenize_chinese_chars,
            "clean_up_tokenization_spaces": clean_up_tokenization_spaces,
        }
        # a config's "false" string would read as true; np.bool_ is taken as bool
        flags = {name: check_flag(name, value) for name, value in flags.items()}
        added_tokens = list(added_tokens)
        bad = [t for t in added_tokens if not isinstance(t, AddedToken)]
        if bad:
            raise ValueError(
                f"`added_tokens` must hold tokenizers.AddedToken objects. Received: {bad[0]!r:.60}"
            )
        self.vocabulary = vocabulary
        self.max_length = max_length
        self.lowercase = flags["lowercase"]
        self.strip_accents = flags["strip_accents"]
        self.tokenize_chinese_chars = flags["tokenize_chinese_chars"]
        self.clean_up_tokenization_spaces = flags["clean_up_tokenization_spaces"]
        self.token_to_id = {token: i for i, token in enumerate(vocabulary)}
        self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (
            self.token_to_id[t] for t in SPECIAL_TOKENS
        )
        self._tokenizer = self._build(added_tokens)

    def _build(self, added_tokens: list[AddedToken]) -> Tokenizer:
        tokenizer = Tokenizer(
            models.WordPiece(
                self.token_to_id,
                unk_token="[UNK]",
                max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD,
            )
        )
        tokenizer.normalizer = normalizers.BertNormalizer(
            clean_text=True,
            handle_chinese_chars=self.tokenize_chinese_chars,
            strip_accents=self.strip_accents,
            lowercase=self.lowercase,
        )
        tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tokenizer.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]",
            special_tokens=[("[CLS]", self.cls_id), ("[SEP]", self.sep_id)],
        )
        tokenizer.decoder = decoders.WordPiece(prefix="##", cleanup=True)
        # As transformers adds them: the checkpoint's added tokens in id order (an id is
        # the next one unless the vocabulary holds the token), then the special tokens
        # not among them; a special one is matched whole in the raw text and skipped when
        # decoding.
        tokenizer.add_tokens(added_tokens)
        present = {token.content for token in added_tokens}
        tokenizer.add_special_tokens([t for t in SPECIAL_TOKENS if t not in present])
        return tokenizer

    @classmethod
    def from_directory(
        cls, directory: str | os.PathLike, max_length: int | None = None
    ) -> WordPieceTokenizer:
        """Reads a BERT checkpoint's (or a run's) tokenizer as transformers 5.25 does.

        - The vocabulary: `tokenizer.json`'s WordPiece vocabulary, else `vocab.txt`
          (transformers 5 saves no vocab.txt); a warning where both differ.
        - The options: `tokenizer_config.json`'s `do_lower_case` (default true),
          `strip_accents`, `tokenize_chinese_chars` (default true) and
          `clean_up_tokenization_spaces` (default false). transformers builds BERT's
          normaliser from these, not from `tokenizer.json`'s.
        - The added tokens: `tokenizer_config.json`'s `added_tokens_decoder` where it has
          one; else `added_tokens.json` (special if `special_tokens_map.json` or the config
          names it: `extra_special_tokens`) and `tokenizer.json`'s `added_tokens`; then
          the `extra_special_tokens` not among them.
        - The maximum length: the `max_length` argument, `sentence_bert_config.json`
          (`max_seq_length`), `config.json` (`max_position_embeddings`), else 512.

        Raises:
            ValueError: no vocabulary, an unreadable file, or an added token whose
                recorded id is not the one it takes.
        """
        directory = os.fspath(directory)
        config = optional_json(directory, TOKENIZER_CONFIG)
        vocabulary = vocabulary_of(directory)
        if max_length is None:
            max_length = optional_json(directory, "sentence_bert_config.json").get("max_seq_length")
        if max_length is None:
            max_length = optional_json(directory, "config.json").get("max_position_embeddings", 512)
        recorded = added_tokens_of(directory)
        tokenizer = cls(
            vocabulary,
            max_length,
            lowercase=config.get("do_lower_case", True),
            strip_accents=config.get("strip_accents"),
            tokenize_chinese_chars=config.get("tokenize_chinese_chars", True),
            added_tokens=[token for _, token in recorded],
            clean_up_tokenization_spaces=config.get("clean_up_tokenization_spaces", False),
        )
        for token_id, token in recorded:
            taken = tokenizer._tokenizer.token_to_id(token.content)
            if token_id is not None and taken != token_id:
                raise ValueError(
                    f"The added token {token.content!r} has the id {token_id} in {directory}, "
                    f"but takes {taken} after the {count(len(vocabulary), 'token')} of the vocabulary "
                    "(as transformers gives it)."
                )
        return tokenizer

    def save(self, directory: str | os.PathLike) -> str:
        """Writes `vocab.txt` and `tokenizer_config.json` (the options and every added
        token, in transformers' format, which `from_directory` and transformers read back)
        into `directory`; returns the path of `vocab.txt`."""
        path = os.path.join(directory, VOCAB_FILENAME)
        write_text(path, "".join(f"{token}\n" for token in self.vocabulary))
        added = self._tokenizer.get_added_tokens_decoder()
        settings = {
            "tokenizer_class": "BertTokenizer",
            "do_lower_case": self.lowercase,
            "strip_accents": self.strip_accents,
            "tokenize_chinese_chars": self.tokenize_chinese_chars,
            "clean_up_tokenization_spaces": self.clean_up_tokenization_spaces,
            "model_max_length": self.max_length,
            "added_tokens_decoder": {
                str(i): {key: getattr(added[i], key) for key in ADDED_TOKEN_FIELDS}
                for i in sorted(added)
            },
        }
        write_json(os.path.join(directory, TOKENIZER_CONFIG), settings)
        return path

    @property
    def vocabulary_size(self) -> int:
        """V, the number of token ids: the vocabulary's and the added tokens'."""
        return self._tokenizer.get_vocab_size(with_added_tokens=True)

    @property
    def special_ids(self) -> dict[str, int]:
        """Ids of `pad`, `unk`, `cls`, `sep` and `mask`."""
        return {
            "pad": self.pad_id,
            "unk": self.unk_id,
            "cls": self.cls_id,
            "sep": self.sep_id,
            "mask": self.mask_id,
        }

    def tokenize(self, text: str) -> list[str]:
        """The WordPiece tokens of one text, without `[CLS]`/`[SEP]` and untruncated."""
        _check_texts([text])
        return self._tokenizer.encode(text, add_special_tokens=False).tokens

    def encode_ids(self, texts: Sequence[str], max_length: int | None = None) -> list[list[int]]:
        """Unpadded `[CLS] … [SEP]` ids per text, each at most `max_length` long."""
        _check_texts(texts)
        max_length = self._check_max_length(max_length)
        ids = [e.ids for e in self._tokenizer.encode_batch(list(texts))]
        # Truncation keeps [CLS], the first max_length - 2 pieces and [SEP], as Hugging Face
        # does; done here rather than by the tokenizer so that no call changes its state.
        return [
            row if len(row) <= max_length else row[: max_length - 1] + [self.sep_id] for row in ids
        ]

    def piece_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """The WordPiece ids of each text, without `[CLS]`/`[SEP]` and untruncated."""
        if not texts:
            return []
        _check_texts(texts)
        return [e.ids for e in self._tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def lengths(self, texts: Sequence[str]) -> list[int]:
        """The untruncated length of each text's `[CLS] … [SEP]` ids."""
        _check_texts(texts)
        return [len(e.ids) for e in self._tokenizer.encode_batch(list(texts))]

    def encode(
        self, texts: Sequence[str], max_length: int | None = None, pad_to_max_length: bool = False
    ) -> dict[str, np.ndarray]:
        """Encodes a batch, padded with `[PAD]` (id 0) to its longest member.

        Args:
            texts: B strings. An empty string encodes as `[CLS] [SEP]`.
            max_length: truncation length, `[CLS]`/`[SEP]` included; defaults to the
                tokenizer's `max_length`.
            pad_to_max_length: pad to `max_length` rather than to the longest text.

        Returns:
            `{"input_ids": (B, L) int64, "attention_mask": (B, L) int64}`, the mask 1 at
            tokens and 0 at padding (the ONNX inputs of Hugging Face Optimum).
        """
        max_length = self._check_max_length(max_length)
        ids = self.encode_ids(texts, max_length)
        length = max_length if pad_to_max_length else max(len(row) for row in ids)
        input_ids = np.full((len(ids), length), self.pad_id, dtype=np.int64)
        attention_mask = np.zeros((len(ids), length), dtype=np.int64)
        for i, row in enumerate(ids):
            input_ids[i, : len(row)] = row
            attention_mask[i, : len(row)] = 1
        return {"input_ids": input_ids, "attention_mask": attention_mask}

    def decode(self, ids: Sequence[int] | np.ndarray, skip_special_tokens: bool = True) -> str:
        """Joins the pieces of one id sequence back into text (lower-cased, accents gone,
        with transformers' clean-up where `clean_up_tokenization_spaces` asks for it)."""
        ids = [int(i) for i in np.asarray(ids).reshape(-1)]
        size = self.vocabulary_size
        bad = [i for i in ids if not 0 <= i < size]
        if bad:
            raise ValueError(f"`ids` must lie in [0, {size}). Received: ids containing {bad[:5]}")
        text = self._tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)
        if self.clean_up_tokenization_spaces:
            for old, new in CLEAN_UP_REPLACEMENTS:
                text = text.replace(old, new)
        return text

    def _check_max_length(self, max_length: int | None) -> int:
        return self.max_length if max_length is None else _checked_max_length(max_length)


def _checked_max_length(max_length) -> int:
    if not is_integer(max_length) or max_length < 2:
        raise ValueError(
            f"`max_length` must be an integer of at least 2. Received: max_length={max_length!r}"
        )
    return int(max_length)


def _check_texts(texts: Sequence[str]) -> None:
    if isinstance(texts, (str, bytes)):
        raise ValueError(
            f"`texts` must be a sequence of strings, not one string. Received: {texts!r:.60}"
        )
    if len(texts) == 0:
        raise ValueError("`texts` is empty: there is nothing to encode.")
    for text in texts:
        if not isinstance(text, str):
            raise ValueError(
                f"`texts` must hold strings. Received: {type(text).__name__} {text!r:.60}"
            )
