"""BERT's uncased WordPiece tokenizer without TensorFlow, for serving and training alike.

Built on the Rust `tokenizers` package from a plain `vocab.txt`, so that an exported model
directory needs nothing else. It reproduces Hugging Face's `BertTokenizer(Fast)` (and so
sentence-transformers): the same normaliser, pre-tokenizer, WordPiece model and
`[CLS] … [SEP]` template; the tests hold it to the ids recorded from the reference
implementation.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

import numpy as np
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

from transformer_zoo.files import write_text

VOCAB_FILENAME = "vocab.txt"
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
# BERT's WordPiece maps a word of more characters than this to [UNK] (google-research/bert).
MAX_INPUT_CHARS_PER_WORD = 100


def read_vocabulary(path: str | os.PathLike) -> list[str]:
    """Reads a `vocab.txt`: one token per line, the id is the line number from 0."""
    with open(path, encoding="utf-8") as file:
        # Only the newline goes: a token may legitimately end in other whitespace.
        return [line.rstrip("\n").rstrip("\r") for line in file]


class WordPieceTokenizer:
    """BERT WordPiece: text → `[CLS] tokens [SEP]` ids, truncated and padded.

    Normalisation follows BERT (Devlin et al. 2019, §A.2 and google-research/bert
    `tokenization.py`): remove control characters and map whitespace to spaces, put spaces
    around CJK ideographs so each is its own word, strip accents (NFD, drop combining marks)
    and lower-case; then split on whitespace and punctuation, and split each word greedily
    into the longest vocabulary pieces (`##` marks a continuation), `[UNK]` where a word
    cannot be covered or is over 100 characters long. The special tokens are matched as
    whole tokens in the raw text, as Hugging Face does.

    Args:
        vocabulary: the tokens in id order, or the path of a `vocab.txt`.
        max_length: the longest encoded sequence, `[CLS]` and `[SEP]` included; longer
            inputs keep their first `max_length - 2` tokens. Use the model's maximum
            (256 for all-MiniLM-L6-v2, which sentence-transformers truncates there; 512
            for BERT).
        lowercase: lower-case the text (an uncased model).
        strip_accents: remove accents; `None` follows `lowercase`, as in BERT.

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
    ):
        if isinstance(vocabulary, (str, os.PathLike)):
            vocabulary = read_vocabulary(vocabulary)
        vocabulary = list(vocabulary)
        missing = [t for t in SPECIAL_TOKENS if t not in vocabulary]
        if missing:
            raise ValueError(
                f"`vocabulary` lacks the special tokens {missing}. "
                f"Received: vocabulary of {len(vocabulary)} tokens"
            )
        if len(set(vocabulary)) != len(vocabulary):
            raise ValueError("`vocabulary` holds a token more than once.")
        if not isinstance(max_length, int) or max_length < 2:
            raise ValueError(
                f"`max_length` must be an integer of at least 2. Received: max_length={max_length}"
            )
        self.vocabulary = vocabulary
        self.max_length = max_length
        self.lowercase = lowercase
        self.strip_accents = lowercase if strip_accents is None else strip_accents
        self.token_to_id = {token: i for i, token in enumerate(vocabulary)}
        self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (
            self.token_to_id[t] for t in SPECIAL_TOKENS
        )
        self._tokenizer = self._build()

    def _build(self) -> Tokenizer:
        tokenizer = Tokenizer(
            models.WordPiece(
                self.token_to_id,
                unk_token="[UNK]",
                max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD,
            )
        )
        tokenizer.normalizer = normalizers.BertNormalizer(
            clean_text=True,
            handle_chinese_chars=True,
            strip_accents=self.strip_accents,
            lowercase=self.lowercase,
        )
        tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tokenizer.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]",
            special_tokens=[("[CLS]", self.cls_id), ("[SEP]", self.sep_id)],
        )
        tokenizer.decoder = decoders.WordPiece(prefix="##", cleanup=True)
        # Registered as special: matched whole in the raw text, skipped when decoding.
        tokenizer.add_special_tokens(list(SPECIAL_TOKENS))
        return tokenizer

    @classmethod
    def from_directory(
        cls, directory: str | os.PathLike, max_length: int | None = None
    ) -> WordPieceTokenizer:
        """Loads `directory/vocab.txt`.

        The options come from the files a Hugging Face or sentence-transformers checkpoint
        carries, when present: `tokenizer_config.json` (`do_lower_case`, `strip_accents`)
        and the maximum length from, in order, the `max_length` argument,
        `sentence_bert_config.json` (`max_seq_length`), `config.json`
        (`max_position_embeddings`), else 512.
        """
        vocab_path = os.path.join(directory, VOCAB_FILENAME)
        if not os.path.isfile(vocab_path):
            raise ValueError(f"No {VOCAB_FILENAME} in `directory`. Received: directory={directory}")
        tokenizer_config = _read_json(directory, "tokenizer_config.json")
        lowercase = tokenizer_config.get("do_lower_case", True)
        strip_accents = tokenizer_config.get("strip_accents")
        if max_length is None:
            max_length = _read_json(directory, "sentence_bert_config.json").get("max_seq_length")
        if max_length is None:
            max_length = _read_json(directory, "config.json").get("max_position_embeddings", 512)
        return cls(vocab_path, max_length, lowercase=lowercase, strip_accents=strip_accents)

    def save(self, directory: str | os.PathLike) -> str:
        """Writes `vocab.txt` into `directory`; returns its path."""
        path = os.path.join(directory, VOCAB_FILENAME)
        write_text(path, "".join(f"{token}\n" for token in self.vocabulary))
        return path

    @property
    def vocabulary_size(self) -> int:
        """V, the number of token ids."""
        return len(self.vocabulary)

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
        """Joins the pieces of one id sequence back into text (lower-cased, accents gone)."""
        ids = [int(i) for i in np.asarray(ids).reshape(-1)]
        bad = [i for i in ids if not 0 <= i < self.vocabulary_size]
        if bad:
            raise ValueError(
                f"`ids` must lie in [0, {self.vocabulary_size}). Received: ids containing {bad[:5]}"
            )
        return self._tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)

    def _check_max_length(self, max_length: int | None) -> int:
        if max_length is None:
            return self.max_length
        if not isinstance(max_length, int) or max_length < 2:
            raise ValueError(
                f"`max_length` must be an integer of at least 2. Received: max_length={max_length}"
            )
        return max_length


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


def _read_json(directory: str | os.PathLike, name: str) -> dict:
    path = os.path.join(directory, name)
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as file:
        return json.load(file)
