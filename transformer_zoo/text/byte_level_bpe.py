"""GPT-2's byte-level BPE tokenizer without TensorFlow or transformers, on the Rust
`tokenizers` package: the files of a Hugging Face GPT-2 checkpoint (`tokenizer.json`, or
`vocab.json` + `merges.txt`, and `tokenizer_config.json`'s `add_prefix_space`) read as
transformers' `GPT2Tokenizer` reads them. A run directory keeps one `tokenizer.json`, which
holds everything (`add_prefix_space` too).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

from transformer_zoo.errors import is_flag
from transformer_zoo.files import read_optional_json, write_text

TOKENIZER_JSON, TOKENIZER_CONFIG = "tokenizer.json", "tokenizer_config.json"
VOCAB_JSON, MERGES_TXT = "vocab.json", "merges.txt"
END_OF_TEXT = "<|endoftext|>"


class ByteLevelBPETokenizer:
    """Text ↔ ids with a byte-level BPE model; one special token, GPT-2's `<|endoftext|>`,
    serves as begin, end and padding (GPT-2 has no other), and no text is unknown.

    Args:
        tokenizer: a `tokenizers.Tokenizer`.
        eos_id: the id of the end-of-text token.

    Example:
    >>> tok = ByteLevelBPETokenizer.from_directory("gpt2")  # doctest: +SKIP
    >>> tok.decode(tok.encode("Hello world"))  # doctest: +SKIP
    'Hello world'
    """

    def __init__(self, tokenizer: Tokenizer, eos_id: int):
        size = tokenizer.get_vocab_size(with_added_tokens=True)
        if not isinstance(eos_id, int) or not 0 <= eos_id < size:
            raise ValueError(f"`eos_id` must be an id in [0, {size}). Received: eos_id={eos_id!r}")
        self._tokenizer = tokenizer
        self._special = {i for i, t in tokenizer.get_added_tokens_decoder().items() if t.special}
        self.eos_id = self.bos_id = self.pad_id = eos_id
        self.unk_id = None
        self.mask_id = None

    @classmethod
    def from_directory(cls, directory: str | os.PathLike, eos_id: int | None = None):
        """Reads `tokenizer.json`, or else `vocab.json` and `merges.txt` (with GPT-2's
        byte-level pre-tokenizer and decoder). The end-of-text token is `eos_id`, else
        `tokenizer_config.json`'s `eos_token`, else `<|endoftext|>`.

        Where there is a `tokenizer_config.json` (a checkpoint's), its `add_prefix_space`
        (default false) decides whether a space is put before the text, as in transformers
        (4.x and 5.x), whatever `tokenizer.json`'s pre-tokenizer says; `save` keeps it in
        the `tokenizer.json` it writes.

        Raises:
            ValueError: neither file set is there, a file is unreadable, or the
                end-of-text token is not in the vocabulary.
        """
        directory = os.fspath(directory)
        path = os.path.join(directory, TOKENIZER_JSON)
        try:
            if os.path.isfile(path):
                tokenizer = Tokenizer.from_file(path)
                _check_byte_level(tokenizer, path)
            elif os.path.isfile(os.path.join(directory, VOCAB_JSON)):
                tokenizer = _from_vocab_and_merges(directory)
            else:
                raise ValueError(
                    f"A byte-level BPE tokenizer needs {TOKENIZER_JSON}, or {VOCAB_JSON} and "
                    f"{MERGES_TXT}; {directory} has neither."
                )
        except Exception as error:  # tokenizers raises its own Exception type
            if isinstance(error, ValueError):
                raise
            raise ValueError(f"Cannot read the tokenizer in {directory}: {error}") from None
        config = read_optional_json(directory, TOKENIZER_CONFIG)  # None where none
        if config is not None:
            add_prefix_space = config.get("add_prefix_space", False)
            if not is_flag(add_prefix_space):
                raise ValueError(
                    f"{TOKENIZER_CONFIG}'s `add_prefix_space` must be true or false. "
                    f"Received: add_prefix_space={add_prefix_space!r}"
                )
            # As transformers' GPT2Tokenizer builds it: from the config, not tokenizer.json.
            tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
        if eos_id is None:
            token = _eos_token(config or {})
            eos_id = tokenizer.token_to_id(token)
            if eos_id is None:
                raise ValueError(f"The end-of-text token {token!r} is not in the vocabulary.")
        return cls(tokenizer, eos_id)

    def save(self, directory: str | os.PathLike) -> str:
        """Writes `tokenizer.json` into `directory`; returns its path."""
        path = os.path.join(directory, TOKENIZER_JSON)
        write_text(path, self._tokenizer.to_str())
        return path

    @property
    def vocabulary_size(self) -> int:
        return self._tokenizer.get_vocab_size(with_added_tokens=True)

    @property
    def add_prefix_space(self) -> bool:
        """Whether a space is put before the text (`tokenizer_config.json`'s key)."""
        return bool(getattr(self._tokenizer.pre_tokenizer, "add_prefix_space", False))

    @property
    def special_ids(self) -> dict[str, int | None]:
        return {"pad": self.pad_id, "unk": None, "bos": self.bos_id, "eos": self.eos_id}

    def encode(self, text: str | Sequence[str]) -> list[int] | list[list[int]]:
        """Ids of one string (no special token added), or id lists for a list of strings."""
        if isinstance(text, str):
            return self._tokenizer.encode(text, add_special_tokens=False).ids
        if not all(isinstance(t, str) for t in text):
            raise ValueError(
                f"`text` must be a string or a list of strings. Received: {text!r:.60}"
            )
        return [e.ids for e in self._tokenizer.encode_batch(list(text), add_special_tokens=False)]

    def decode(self, ids: Iterable[int], stop_at_eos: bool = True) -> str:
        """Text of `ids` without special tokens; with `stop_at_eos`, up to the first
        end-of-text (a generated sequence's end)."""
        ids = [int(i) for i in ids]
        if stop_at_eos and self.eos_id in ids:
            ids = ids[: ids.index(self.eos_id)]
        size = self.vocabulary_size
        bad = [i for i in ids if not 0 <= i < size]
        if bad:
            raise ValueError(f"`ids` must lie in [0, {size}). Received an id of {bad[0]}.")
        return self._tokenizer.decode(ids, skip_special_tokens=True)

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes a token stands for in `decode`'s text: its characters read through
        GPT-2's byte-to-character table (a token with a character outside it, an added
        token's, as its UTF-8), and none for a special token or an id outside the
        vocabulary, as the `tokenizers` ByteLevel decoder reads them."""
        token = self._tokenizer.id_to_token(int(token_id))
        if token is None or int(token_id) in self._special:
            return b""
        try:
            return bytes(_BYTE_OF[character] for character in token)
        except KeyError:
            return token.encode("utf-8")

    def incomplete_end(self, ids: Iterable[int]) -> int:
        """How many characters at the end of the text of `ids` (`decode`, every id
        counted) stand for a character whose bytes have not all come: 1 where their bytes
        end with the start of a UTF-8 character that more bytes can complete, which the
        decoder shows as one U+FFFD (as `bytes.decode("utf-8", "replace")` does), else 0.
        Bytes no later byte can make a character of (a stray continuation byte, `E0 80`)
        are shown as U+FFFD for good, and a U+FFFD the text holds is a character: 0."""
        tail = b""
        for token_id in reversed(list(ids)):  # an incomplete character is 1-3 bytes
            tail = self.token_bytes(token_id) + tail
            if len(tail) >= 3:
                break
        return int(_open_character(tail[-3:]) > 0)

    def id_to_token(self, token_id: int) -> str | None:
        """The token string of an id (`<|endoftext|>` for the end-of-text id)."""
        return self._tokenizer.id_to_token(int(token_id))

    def __repr__(self) -> str:
        return (
            f"ByteLevelBPETokenizer(vocabulary_size={self.vocabulary_size}, eos_id={self.eos_id})"
        )


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's table of a character per byte (openai/gpt-2 `encoder.py`): the printable
    Latin-1 bytes are their own character, the others U+0100 onwards in byte order."""
    kept = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    moved = [b for b in range(256) if b not in kept]
    return {**{b: chr(b) for b in kept}, **{b: chr(256 + n) for n, b in enumerate(moved)}}


_BYTE_OF = {character: byte for byte, character in _bytes_to_unicode().items()}
# The bytes a UTF-8 lead byte may be followed by (Unicode's table 3-7): no overlong
# form (E0 80), no surrogate (ED A0), nothing past U+10FFFF (F4 90).
_SECOND_BYTE = {
    0xE0: range(0xA0, 0xC0),
    0xED: range(0x80, 0xA0),
    0xF0: range(0x90, 0xC0),
    0xF4: range(0x80, 0x90),
}


def _open_character(data: bytes) -> int:
    """How many bytes at the end of `data` begin a UTF-8 character that more bytes can
    still complete: a lead byte followed by fewer continuation bytes than it announces,
    each one it may be followed by (0: none)."""
    for size in range(1, min(len(data), 3) + 1):
        lead = data[-size]
        if 0x80 <= lead < 0xC0:  # a continuation byte: the lead is further back
            continue
        if size >= _character_length(lead):  # ASCII, a byte no character starts, complete
            return 0
        if size > 1 and data[-size + 1] not in _SECOND_BYTE.get(lead, range(0x80, 0xC0)):
            return 0
        return size
    return 0


def _character_length(lead: int) -> int:
    """The bytes of the UTF-8 character that `lead` begins (0: a byte that begins none)."""
    if 0xC2 <= lead < 0xE0:
        return 2
    if 0xE0 <= lead < 0xF0:
        return 3
    return 4 if 0xF0 <= lead < 0xF5 else 0


def _from_vocab_and_merges(directory: str) -> Tokenizer:
    """GPT-2's tokenizer as `GPT2TokenizerFast` builds it from the two slow-tokenizer files."""
    vocab, merges = os.path.join(directory, VOCAB_JSON), os.path.join(directory, MERGES_TXT)
    tokenizer = Tokenizer(models.BPE.from_file(vocab, merges))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    token = _eos_token(read_optional_json(directory, TOKENIZER_CONFIG) or {})
    if tokenizer.token_to_id(token) is not None:
        tokenizer.add_special_tokens([token])
    return tokenizer


def _eos_token(config: dict) -> str:
    token = config.get("eos_token", END_OF_TEXT)
    return token.get("content", END_OF_TEXT) if isinstance(token, dict) else token


def _check_byte_level(tokenizer: Tokenizer, path: str) -> None:
    """Refuses a `tokenizer.json` that is not a byte-level BPE (a SentencePiece model's,
    as `export --format hf` writes for a run trained here; a WordPiece one): read as
    GPT-2's, with its pre-tokenizer replaced, it gave ids that are not the model's."""
    setup = json.loads(tokenizer.to_str())
    kind = (setup.get("model") or {}).get("type")
    steps = json.dumps([setup.get("pre_tokenizer"), setup.get("decoder")])
    if kind != "BPE" or '"ByteLevel"' not in steps:
        raise ValueError(
            f"{path} is not a byte-level BPE tokenizer (GPT-2's) but a {kind} model"
            f"{'' if kind != 'BPE' else ' without the ByteLevel step'}: import-hf reads "
            "GPT-2's, BERT's and Marian's tokenizers only."
        )
