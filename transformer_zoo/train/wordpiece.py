"""In-graph BERT WordPiece for `tf.data` and SavedModel: strings → `[CLS] … [SEP]` ids.

The twin of the TensorFlow-free `transformer_zoo.text.wordpiece.WordPieceTokenizer`; both
give the ids of Hugging Face's BERT tokenizer, which the tests check on every code point.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

import keras
import keras_hub
import tensorflow as tf
import tensorflow_text as tf_text

from transformer_zoo.text.wordpiece import (
    MAX_INPUT_CHARS_PER_WORD,
    SPECIAL_TOKENS,
    WordPieceTokenizer,
)
from transformer_zoo.train import wordpiece_unicode


class _WordPieceByCharacters(keras_hub.tokenizers.WordPieceTokenizer):
    """keras-hub's WordPiece, with BERT's word limit counted in characters.

    tf-text's FastWordpieceTokenizer maps a word over 100 *bytes* to [UNK]; BERT's limit is
    100 *characters*, so a 40-letter hiragana word (120 bytes) must still be split. This
    lifts the byte limit to 4 bytes × 100 characters; `WordPiecePreprocessor` applies the
    character limit itself. (Overrides keras-hub's hook that builds the tf-text tokenizer;
    a test with a long Cyrillic word fails if a keras-hub upgrade bypasses it.)
    """

    def _set_vocabulary_tf(self):
        self._fast_word_piece = tf_text.FastWordpieceTokenizer(
            vocab=self.vocabulary,
            suffix_indicator=self.suffix_indicator,
            max_bytes_per_word=4 * MAX_INPUT_CHARS_PER_WORD,
            token_out_type=self.compute_dtype,
            unknown_token=self.oov_token,
            no_pretokenization=True,
            support_detokenization=True,
        )


@keras.saving.register_keras_serializable(package="transformer_zoo")
class WordPiecePreprocessor(keras.layers.Layer):
    """BERT uncased tokenization and `[CLS]`/`[SEP]` packing as TensorFlow ops.

    keras-hub's `WordPieceTokenizer(lowercase=True, strip_accents=True)` is not BERT's
    normaliser: it lower-cases by NFKC case folding ("ß" → "ss", "™" → "tm", full-width
    letters → ASCII, Hangul recomposed), splits words at control and zero-width characters
    where BERT deletes them, knows only ASCII whitespace (a no-break space joins two words),
    and splits a few CJK code points BERT does not. So this layer normalises the text
    itself, step for step as Hugging Face's `BertNormalizer` and `BertPreTokenizer` do and
    with their character tables (`wordpiece_unicode`), and hands keras-hub the words:

    1. split the special tokens (`[MASK]` …) off the raw text; they stay whole;
    2. delete control and format characters, map every whitespace to a space, and put
       spaces around CJK ideographs;
    3. strip accents (NFD, then delete non-spacing marks) and lower-case;
    4. put spaces around punctuation and split on spaces; a word over 100 characters
       becomes `[UNK]`;
    5. WordPiece (keras-hub, tf-text's FastWordpiece) and `StartEndPacker`.

    Args:
        vocabulary: the tokens in id order, or the path of a `vocab.txt`.
        sequence_length: L, the output length, `[CLS]` and `[SEP]` included; longer texts
            keep their first L − 2 tokens. 256 for all-MiniLM-L6-v2, 512 for BERT.
        lowercase: lower-case (an uncased model).
        strip_accents: remove accents; `None` follows `lowercase`, as in BERT.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: (B,) `tf.string` tensor of UTF-8 texts.

    Returns:
        `{"token_ids": (B, L) int32, "padding_mask": (B, L) bool}`, padded with id 0 and
        the mask True at tokens — the inputs of `EncoderOnly`.

    Example:
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "##s", "!"]
    >>> pre = WordPiecePreprocessor(vocab, sequence_length=6)
    >>> pre(tf.constant(["Hellos!"]))["token_ids"].numpy().tolist()
    [[2, 5, 6, 7, 3, 0]]
    """

    def __init__(
        self,
        vocabulary: Sequence[str] | str | os.PathLike,
        sequence_length: int = 512,
        lowercase: bool = True,
        strip_accents: bool | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not isinstance(sequence_length, int) or sequence_length < 2:
            raise ValueError(
                "`sequence_length` must be an integer of at least 2 ([CLS] and [SEP]). "
                f"Received: sequence_length={sequence_length}"
            )
        # The TF-free tokenizer validates the other arguments and knows the special ids.
        reference = WordPieceTokenizer(vocabulary, sequence_length, lowercase, strip_accents)
        self.vocabulary = reference.vocabulary
        self.sequence_length = sequence_length
        self.lowercase = lowercase
        self.strip_accents = strip_accents
        self.special_ids = reference.special_ids
        self._strip = reference.strip_accents
        self.word_piece = _WordPieceByCharacters(
            vocabulary=self.vocabulary,
            lowercase=False,
            strip_accents=False,
            split=False,
            oov_token="[UNK]",
            dtype="int32",
            name="word_piece",
        )
        self.packer = keras_hub.layers.StartEndPacker(
            sequence_length=sequence_length,
            start_value=reference.cls_id,
            end_value=reference.sep_id,
            pad_value=reference.pad_id,
            return_padding_mask=True,
            name="packer",
        )
        self._specials = tf.constant(SPECIAL_TOKENS)
        self._special_pattern = "|".join(re.escape(t) for t in SPECIAL_TOKENS)
        runs, self._lower_multi = wordpiece_unicode.lowercase_runs()
        first, last, step, delta = (
            tf.constant(column, tf.int32) for column in zip(*runs, strict=True)
        )
        self._lower_runs = (first, last, step, delta)
        self._classes = {
            name: wordpiece_unicode.re2_class(name)
            for name in ("removed", "whitespace", "chinese", "marks", "punctuation")
        }
        self._graph_functions = {}

    @classmethod
    def from_directory(
        cls, directory: str | os.PathLike, sequence_length: int | None = None, **kwargs
    ) -> WordPiecePreprocessor:
        """Reads `directory/vocab.txt` with the options `WordPieceTokenizer.from_directory`
        finds there."""
        ref = WordPieceTokenizer.from_directory(directory, sequence_length)
        return cls(ref.vocabulary, ref.max_length, ref.lowercase, ref.strip_accents, **kwargs)

    def _lowercase(self, text):
        for char, lowered in self._lower_multi.items():
            text = tf.strings.regex_replace(text, f"\\x{{{char:X}}}", lowered)
        cps = tf.strings.unicode_decode(text, "UTF-8")  # (N, C) code points
        c = cps.flat_values
        first, last, step, delta = self._lower_runs
        run = tf.maximum(tf.searchsorted(first, c, side="right") - 1, 0)
        first, last, step, delta = (tf.gather(t, run) for t in (first, last, step, delta))
        hit = (c >= first) & (c <= last) & (tf.math.floormod(c - first, step) == 0)
        return tf.strings.unicode_encode(cps.with_flat_values(tf.where(hit, c + delta, c)), "UTF-8")

    def _normalize(self, text):
        """BertNormalizer, then the punctuation split of BertPreTokenizer, on (N,) strings."""
        text = tf.strings.regex_replace(text, self._classes["removed"], "")
        text = tf.strings.regex_replace(text, self._classes["whitespace"], " ")
        text = tf.strings.regex_replace(text, self._classes["chinese"], r" \0 ")
        if self._strip:
            text = tf_text.normalize_utf8(text, "NFD")
            text = tf.strings.regex_replace(text, self._classes["marks"], "")
        if self.lowercase:
            text = self._lowercase(text)
        return tf.strings.regex_replace(text, self._classes["punctuation"], r" \0 ")

    def split_words(self, inputs):
        """(B,) strings → (B, W) ragged words, as keras-hub's WordPiece receives them."""
        inputs = tf.convert_to_tensor(inputs, tf.string)
        if inputs.shape.rank != 1:
            raise ValueError(
                f"`inputs` must be a (B,) string tensor. Received: shape {inputs.shape}"
            )
        # Invalid UTF-8 becomes U+FFFD, which normalising deletes (Python text cannot hold
        # such bytes, so the TF-free tokenizer never sees them). regex_split stops at a NUL;
        # U+0001 stands in for it, and both are deleted as control characters.
        inputs = tf.strings.unicode_transcode(inputs, "UTF-8", "UTF-8", replacement_char=0xFFFD)
        inputs = tf.strings.regex_replace(inputs, r"\x00", "\x01")
        pieces = tf_text.regex_split(inputs, self._special_pattern, self._special_pattern)
        flat = pieces.flat_values
        special = tf.reduce_any(tf.equal(flat[:, None], self._specials[None, :]), axis=1)
        flat = tf.where(special, flat, self._normalize(flat))
        text = tf.strings.reduce_join(pieces.with_flat_values(flat), axis=1, separator=" ")
        words = tf.strings.split(text)  # (B, W), on runs of spaces
        long = tf.strings.length(words.flat_values, unit="UTF8_CHAR") > MAX_INPUT_CHARS_PER_WORD
        return words.with_flat_values(tf.where(long, "[UNK]", words.flat_values))

    def _in_graph(self, fn, inputs):
        # keras-hub runs its TensorFlow path only while tracing; eagerly it would take its
        # pure-Python path, so eager calls go through a tf.function.
        if not tf.executing_eagerly():
            return fn(inputs)
        if fn.__name__ not in self._graph_functions:
            self._graph_functions[fn.__name__] = tf.function(fn, reduce_retracing=True)
        return self._graph_functions[fn.__name__](inputs)

    def tokenize(self, inputs):
        """(B,) strings → (B, T) ragged ids, without `[CLS]`/`[SEP]` and untruncated."""
        return self._in_graph(self._tokenize, inputs)

    def _tokenize(self, inputs):
        return self.word_piece(self.split_words(inputs))

    def _pack(self, inputs):
        token_ids, padding_mask = self.packer(self._tokenize(inputs))
        return {"token_ids": token_ids, "padding_mask": padding_mask}

    def call(self, inputs):
        return self._in_graph(self._pack, inputs)

    def build(self, inputs_shape=None):
        # Nothing to build: the sublayers hold no weights, only the vocabulary.
        self.built = True

    def compute_output_spec(self, inputs):
        shape = (inputs.shape[0], self.sequence_length)
        return {
            "token_ids": keras.KerasTensor(shape, "int32"),
            "padding_mask": keras.KerasTensor(shape, "bool"),
        }

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary": list(self.vocabulary),
                "sequence_length": self.sequence_length,
                "lowercase": self.lowercase,
                "strip_accents": self.strip_accents,
            }
        )
        return config
