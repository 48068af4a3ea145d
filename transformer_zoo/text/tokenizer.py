"""A SentencePiece tokenizer with the zoo's special ids, usable without TensorFlow
(`tokenizer_training.train_tokenizer` trains one)."""

from __future__ import annotations

import operator
import os
from collections.abc import Iterable, Sequence

import sentencepiece as spm

from transformer_zoo.files import write_bytes

# Fixed special ids: padding must be 0 (the masks and the loss treat id 0 as padding).
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
MASK_PIECE = "<mask>"  # a control symbol (id 4): never produced from text, used by masked-LM.


class Tokenizer:
    """A trained SentencePiece model: text ↔ ids, with pad=0, unk=1, bos=2, eos=3, mask=4.

    The same serialized model (`tokenizer.model`) feeds the in-graph
    `keras_hub.tokenizers.SentencePieceTokenizer` used by the `tf.data` pipelines
    (`transformer_zoo.data.bucketing.in_graph_tokenizer`); both produce identical ids.

    Args:
        proto: the serialized SentencePiece model (the bytes of `tokenizer.model`).

    Example:
    >>> from transformer_zoo.text import train_tokenizer
    >>> tok = train_tokenizer(["March 5, 2021", "2021年3月5日"] * 10, vocabulary_size=40)
    >>> tok.decode(tok.encode("March 5", add_eos=True))
    'March 5'
    """

    def __init__(self, proto: bytes):
        if not isinstance(proto, bytes) or not proto:
            raise ValueError(
                "`proto` must be the non-empty bytes of a SentencePiece model. "
                f"Received: proto of type {type(proto).__name__}"
            )
        self.proto = proto
        try:
            self._sp = spm.SentencePieceProcessor(model_proto=proto)
        except RuntimeError:  # the C++ parser's message, which says no more
            raise ValueError(
                "`proto` is not a SentencePiece model (the bytes of a `tokenizer.model` file)."
            ) from None
        expected = {"pad": PAD_ID, "unk": UNK_ID, "bos": BOS_ID, "eos": EOS_ID}
        found = {
            "pad": self._sp.pad_id(),
            "unk": self._sp.unk_id(),
            "bos": self._sp.bos_id(),
            "eos": self._sp.eos_id(),
        }
        if found != expected:
            raise ValueError(
                f"The SentencePiece model must use the special ids {expected}. Received: {found}"
            )

    @classmethod
    def load(cls, path: str | os.PathLike) -> Tokenizer:
        """Reads a `tokenizer.model` file.

        Raises:
            ValueError: naming `path`, the file is not a SentencePiece model with the
                zoo's special ids.
        """
        with open(path, "rb") as file:
            proto = file.read()
        if not proto:
            raise ValueError(f"{os.fspath(path)}: the file is empty, not a SentencePiece model.")
        try:
            return cls(proto)
        except ValueError as error:
            raise ValueError(f"{os.fspath(path)}: {error}") from None

    def save(self, path: str | os.PathLike) -> None:
        """Writes the model to `path` atomically."""
        write_bytes(path, self.proto)

    @property
    def vocabulary_size(self) -> int:
        return self._sp.get_piece_size()

    pad_id, unk_id, bos_id, eos_id = PAD_ID, UNK_ID, BOS_ID, EOS_ID

    @property
    def mask_id(self) -> int | None:
        """Id of the `<mask>` control symbol, or None if the model has none."""
        piece = self._sp.piece_to_id(MASK_PIECE)
        return None if piece == UNK_ID else piece

    @property
    def special_ids(self) -> dict[str, int | None]:
        return {
            "pad": PAD_ID,
            "unk": UNK_ID,
            "bos": BOS_ID,
            "eos": EOS_ID,
            "mask": self.mask_id,
        }

    def encode(
        self, text: str | Sequence[str], add_bos: bool = False, add_eos: bool = False
    ) -> list[int] | list[list[int]]:
        """Ids of one string, or a list of id lists for a sequence of strings."""
        if not isinstance(text, str):
            texts = list(text) if isinstance(text, Iterable) else [text]
            if not all(isinstance(t, str) for t in texts):
                raise ValueError(
                    f"`text` must be a string or a list of strings. Received: {text!r}"
                )
            text = texts  # sentencepiece takes a str or a list, not a tuple
        return self._sp.encode(text, out_type=int, add_bos=add_bos, add_eos=add_eos)

    def decode(self, ids: Iterable[int], stop_at_eos: bool = True) -> str:
        """Text of `ids`; special ids (pad, bos, eos, mask) produce no text.

        With `stop_at_eos`, ids after the first `<eos>` are ignored, so a generated
        sequence decodes to the text it produced before it stopped.

        Raises:
            ValueError: an id that is not an integer (an integer numpy array is fine), or
                one outside the vocabulary.
        """
        ids = list(ids)
        for index, token_id in enumerate(ids):
            try:
                ids[index] = operator.index(token_id)
            except TypeError:
                raise ValueError(
                    f"`ids` must be integers. Received: {token_id!r} at index {index}"
                ) from None
        if stop_at_eos and EOS_ID in ids:
            ids = ids[: ids.index(EOS_ID)]
        size = self.vocabulary_size
        bad = [i for i in ids if not 0 <= i < size]
        if bad:
            raise ValueError(f"`ids` must lie in [0, {size}). Received an id of {bad[0]}.")
        return self._sp.decode(ids)

    def id_to_piece(self, token_id: int) -> str:
        return self._sp.id_to_piece(int(token_id))

    def piece_to_id(self, piece: str) -> int:
        return self._sp.piece_to_id(piece)

    def normalize(self, text: str) -> str:
        """`text` as the model's normalization leaves it, words marked by `▁`."""
        return self._sp.normalize(text)

    def is_word_piece(self, token_id: int) -> bool:
        """Whether `token_id` is a piece of text: not a control token (`<pad>`, `<s>`,
        `</s>`) nor `<unk>`."""
        return not (self._sp.is_control(token_id) or self._sp.is_unknown(token_id))

    def __repr__(self) -> str:
        return f"Tokenizer(vocabulary_size={self.vocabulary_size})"
