"""Marian's tokenizer (the `Helsinki-NLP/opus-mt-*` checkpoints) without TensorFlow or
transformers: SentencePiece pieces (`source.spm` for the source text, `target.spm` for the
translation) mapped to ids through the joint `vocab.json`, as transformers'
`MarianTokenizer` does. `</s>` ends a source; `<pad>` is also the decoder's start token.

`MarianTokenizer(text)` in transformers 5.25 does not run sacremoses' punctuation normaliser
(it sets one up when sacremoses is installed, but only its `normalize` method calls it), and
neither does this tokenizer: typographic quotes and dashes give the same ids in both.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence

import sentencepiece

from transformer_zoo.files import read_optional_json, write_bytes, write_json

SOURCE_SPM, TARGET_SPM, VOCAB_JSON = "source.spm", "target.spm", "vocab.json"
EOS, UNK, PAD = "</s>", "<unk>", "<pad>"
# The special tokens typed in a text: one token each, found before SentencePiece runs.
_SPECIAL = re.compile("(" + "|".join(re.escape(t) for t in (EOS, UNK, PAD)) + ")")


class MarianTokenizer:
    """One side (source or target) of a Marian tokenizer.

    Args:
        spm: the SentencePiece model (bytes) of this side.
        vocabulary: piece → id, shared by both sides (`vocab.json`).

    Example:
    >>> source, target = MarianTokenizer.from_directory("opus-mt-en-de")  # doctest: +SKIP
    >>> source.encode("Hello")  # pieces; `source_ids` adds </s>  # doctest: +SKIP
    """

    def __init__(self, spm: bytes, vocabulary: dict[str, int]):
        missing = [token for token in (EOS, UNK, PAD) if token not in vocabulary]
        if missing:
            raise ValueError(f"vocab.json lacks the special tokens {missing}.")
        ids = sorted(vocabulary.values())
        if ids != list(range(len(ids))):
            raise ValueError("vocab.json must give the ids 0 .. V-1, each once.")
        self.proto = spm
        self._sp = sentencepiece.SentencePieceProcessor(model_proto=spm)
        self.vocabulary = dict(vocabulary)
        self.pieces = {i: piece for piece, i in vocabulary.items()}
        self.eos_id, self.unk_id, self.pad_id = (vocabulary[t] for t in (EOS, UNK, PAD))
        self.bos_id = self.pad_id  # the decoder starts from <pad>
        self.mask_id = None

    @classmethod
    def from_directory(cls, directory: str | os.PathLike):
        """`(source, target)` tokenizers of a Marian checkpoint directory.

        Raises:
            ValueError: a file is missing or unreadable, or the checkpoint uses separate
                source and target vocabularies (`separate_vocabs`), which is not supported.
        """
        directory = os.fspath(directory)
        paths = {
            name: os.path.join(directory, name) for name in (SOURCE_SPM, TARGET_SPM, VOCAB_JSON)
        }
        missing = [name for name, path in paths.items() if not os.path.isfile(path)]
        if missing:
            raise ValueError(f"A Marian tokenizer needs {', '.join(missing)} in {directory}.")
        if (read_optional_json(directory, "tokenizer_config.json") or {}).get("separate_vocabs"):
            raise ValueError("Marian checkpoints with separate_vocabs are not supported.")
        try:
            with open(paths[VOCAB_JSON], encoding="utf-8") as file:
                vocabulary = json.load(file)
            sides = []
            for name in (SOURCE_SPM, TARGET_SPM):
                with open(paths[name], "rb") as file:
                    sides.append(cls(file.read(), vocabulary))
        except (OSError, RuntimeError, json.JSONDecodeError) as error:
            raise ValueError(f"Cannot read the Marian tokenizer in {directory}: {error}") from None
        return tuple(sides)

    def save(self, directory: str | os.PathLike, spm_name: str) -> None:
        """Writes this side's SentencePiece model as `spm_name` and `vocab.json`."""
        write_bytes(os.path.join(directory, spm_name), self.proto)
        write_json(os.path.join(directory, VOCAB_JSON), self.vocabulary)

    @property
    def vocabulary_size(self) -> int:
        return len(self.vocabulary)

    @property
    def special_ids(self) -> dict[str, int | None]:
        return {"pad": self.pad_id, "unk": self.unk_id, "bos": self.bos_id, "eos": self.eos_id}

    def encode(self, text: str | Sequence[str]) -> list[int] | list[list[int]]:
        """Ids of one string's pieces, or id lists for a list of strings; no `</s>` added.

        As transformers' `MarianTokenizer`: `</s>`, `<unk>` and `<pad>` typed in the text
        are their own ids, and the text between them is encoded piece by piece, each part
        on its own (so a leading `>>xx<<` language code of a part is one token).
        """
        if not isinstance(text, str):
            return [self.encode(t) for t in text]
        ids = []
        for part in _SPECIAL.split(text):
            if part in (EOS, UNK, PAD):
                ids.append(self.vocabulary[part])
            elif part:
                ids += self._piece_ids(part)
        return ids

    def _piece_ids(self, text: str) -> list[int]:
        code = []
        if text.startswith(">>") and (end := text.find("<<")) != -1:
            code, text = [text[: end + 2]], text[end + 2 :]
        pieces = code + self._sp.encode(text, out_type=str)
        return [self.vocabulary.get(piece, self.unk_id) for piece in pieces]

    def decode(self, ids: Iterable[int], stop_at_eos: bool = True) -> str:
        """Text of `ids` with this side's SentencePiece model; `</s>`, `<pad>` and `<unk>`
        give no text (transformers' `skip_special_tokens=True`)."""
        ids = [int(i) for i in ids]
        if stop_at_eos and self.eos_id in ids:
            ids = ids[: ids.index(self.eos_id)]
        bad = [i for i in ids if i not in self.pieces]
        if bad:
            raise ValueError(
                f"`ids` must lie in [0, {self.vocabulary_size}). Received an id of {bad[0]}."
            )
        special = {self.eos_id, self.unk_id, self.pad_id}
        pieces = [self.pieces[i] for i in ids if i not in special]
        return self._sp.decode_pieces(pieces).replace("\u2581", " ").strip()

    def __repr__(self) -> str:
        return f"MarianTokenizer(vocabulary_size={self.vocabulary_size})"
