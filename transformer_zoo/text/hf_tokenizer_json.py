"""A SentencePiece `Tokenizer` of ours as a Hugging Face `tokenizer.json`: the `tokenizers`
pipeline that encodes text to the ids SentencePiece gives, which `export --format hf` writes
for a run trained here and transformers' `AutoTokenizer` loads (fast or not).

Each stage is read from the model file (its `ModelProto`), not assumed, as transformers'
own `SpmConverter` reads it:

- normalizer: the model's compiled normalization rule (`precompiled_charsmap`) and
  SentencePiece's whitespace handling (`remove_extra_whitespaces`: spaces stripped at both
  ends, and runs of them collapsed; `add_dummy_prefix`: a space before the text;
  `escape_whitespaces`: spaces written "▁");
- pre-tokenizer: the user-defined pieces (the newline of a `"verbatim"` tokenizer) cut out
  whole, as SentencePiece keeps them; a word model's words;
- model: unigram (the pieces and their scores), BPE (the merges recovered from the
  vocabulary: every split of a piece into two pieces, ranked by the piece's score, as
  SentencePiece merges the pair whose result scores highest), char (BPE without merges),
  word (a word-level vocabulary); unknown characters read as `<unk>`, a run of them as
  one, as SentencePiece fuses them;
- decoder: "▁" as a space, the dummy prefix's space dropped, `<unk>` as " ⁇ ";
- post-processor: our formats' special tokens (`text.formats`): `<s> text` for a
  decoder-only prompt, `<s> text </s>` (and `text2 </s>` of a pair) for an encoder.

Held to SentencePiece in tests/text/test_hf_tokenizer_json.py (and transformers' reading
of it in tests/export/test_hf_export.py). What differs:

- tokenizers' `Precompiled` normalizer applies the NFKC rule one grapheme at a time where
  SentencePiece takes the longest match: alone, it dropped the marks after a mapped
  character (the circumflex of a decomposed "ệ") and left decomposed Hangul and half-width
  kana with their voicing mark (ｶﾞ) apart. With NFC before and after it, text of real
  scripts in any normal form reads as in SentencePiece; what still differs is a
  compatibility character and a combining mark in one grapheme ("½" or a no-break space
  before an accent) and marks out of canonical order;
- a word model: SentencePiece reads unknown words in a row as one `<unk>`, a word-level
  vocabulary as one each, which a warning says;
- a text that spells a special piece ("<s>", "<mask>"): `tokenizers` takes it as that
  token, SentencePiece as characters; transformers reads it as characters where the
  tokenizer's `split_special_tokens` is set, as `export --format hf` writes it (the
  unigram model never chooses the special pieces: `_NEVER_CHOSEN`,
  `_special_pieces_apart`);
- decoding: a text that starts with a "▁" of its own (SentencePiece strips the "▁" of
  each leading piece, tokenizers of the first), and `<unk>`, which transformers drops as
  a special token where SentencePiece writes " ⁇ ".
"""

from __future__ import annotations

import logging
import re

from sentencepiece import sentencepiece_model_pb2
from tokenizers import AddedToken, Regex, decoders, models, normalizers, pre_tokenizers, processors
from tokenizers import Tokenizer as HFTokenizer

from transformer_zoo.text.tokenizer import Tokenizer

log = logging.getLogger(__name__)

_PIECE = sentencepiece_model_pb2.ModelProto.SentencePiece
_TRAINER = sentencepiece_model_pb2.TrainerSpec
# SentencePiece never reads a control or unknown piece in text; tokenizers' unigram lattice
# holds every piece, so these get a score below that of any text's other pieces.
_NEVER_CHOSEN = -1e9
# A character no vocabulary of ours holds (a Unicode noncharacter): `_special_pieces_apart`.
_APART = "\uffff"
# SentencePiece's surface of an unknown piece in decoded text (`unk_surface`).
_UNKNOWN_SURFACE = " \u2047 "


def sentencepiece_tokenizer_json(
    tokenizer: Tokenizer, add_eos: bool, pair_segment: int = 1
) -> HFTokenizer:
    """The `tokenizers.Tokenizer` that encodes and decodes as `tokenizer` does.

    Args:
        tokenizer: one of our SentencePiece `Tokenizer`s (unigram, bpe, char or word;
            any normalization of `train_tokenizer`).
        add_eos: end each text with `</s>` (an encoder-only model's `[bos] text [eos]`);
            else a text is `[bos] text` (a decoder-only prompt).
        pair_segment: the segment id of a pair's second text: 1, or 0 for a model of
            fewer than two segments (`text.formats.pair_row`, as RoBERTa's tokenizer).

    Returns:
        The tokenizer; `.save(path)` writes `tokenizer.json`.

    Raises:
        ValueError: a model with byte fallback or whitespace as a suffix, which
            `train_tokenizer` never makes and this conversion does not reproduce.
    """
    proto = sentencepiece_model_pb2.ModelProto.FromString(tokenizer.proto)
    trainer, spec = proto.trainer_spec, proto.normalizer_spec
    if trainer.byte_fallback or trainer.treat_whitespace_as_suffix:
        raise ValueError(
            "A SentencePiece model with byte fallback or whitespace as a suffix has no "
            "tokenizer.json here: `train_tokenizer` makes neither."
        )
    pieces = [(piece.piece, piece.score, piece.type) for piece in proto.pieces]
    unknown = pieces[trainer.unk_id][0]
    converted = HFTokenizer(_model(trainer.model_type, pieces, trainer.unk_id))
    converted.normalizer = _normalizer(spec, trainer.model_type, pieces)
    splits = _pre_tokenizers(trainer.model_type, pieces)
    if splits:
        converted.pre_tokenizer = pre_tokenizers.Sequence(splits)
    converted.decoder = decoders.Sequence(
        [
            decoders.Metaspace(prepend_scheme="always" if spec.add_dummy_prefix else "never"),
            decoders.Replace(unknown, _UNKNOWN_SURFACE),
        ]
    )
    bos, eos = pieces[trainer.bos_id][0], pieces[trainer.eos_id][0]
    b = pair_segment
    if add_eos:  # text.formats.pair_row: [bos] a [eos] (b [eos]), segment `b` from b
        single, pair = f"{bos} $A {eos}", f"{bos} $A {eos} $B:{b} {eos}:{b}"
    else:  # a prompt: [bos] a; a pair as transformers' Llama tokenizer writes one
        single, pair = f"{bos} $A", f"{bos} $A {bos}:{b} $B:{b}"
    converted.post_processor = processors.TemplateProcessing(
        single=single,
        pair=pair,
        special_tokens=[(bos, trainer.bos_id), (eos, trainer.eos_id)],
    )
    converted.add_special_tokens(
        [
            AddedToken(piece, special=True, normalized=False)
            for piece, _, kind in pieces
            if kind == _PIECE.CONTROL
        ]
    )
    if trainer.model_type == _TRAINER.WORD:
        log.warning(
            "this word tokenizer reads unknown words in a row as one <unk>, transformers "
            "as one <unk> each: their ids differ on such text"
        )
    return converted


def _model(model_type: int, pieces: list[tuple[str, float, int]], unk_id: int):
    unknown = pieces[unk_id][0]
    if model_type == _TRAINER.UNIGRAM:
        scored = [
            (piece, score if kind in (_PIECE.NORMAL, _PIECE.USER_DEFINED) else _NEVER_CHOSEN)
            for piece, score, kind in pieces
        ]
        return models.Unigram(scored, unk_id=unk_id)
    vocabulary = {piece: index for index, (piece, _, _) in enumerate(pieces)}
    if model_type == _TRAINER.WORD:
        return models.WordLevel(vocabulary, unk_token=unknown)
    merges = _merges(pieces) if model_type == _TRAINER.BPE else []
    # Char: BPE without merges, each character a piece.
    return models.BPE(vocabulary, merges, unk_token=unknown, fuse_unk=True)


def _merges(pieces: list[tuple[str, float, int]]) -> list[tuple[str, str]]:
    """Every split of a normal piece into two normal pieces, the highest-scoring result
    first: SentencePiece's BPE merges any adjacent pair whose concatenation is a piece,
    the best-scoring one first (transformers' SentencePieceExtractor does the same)."""
    normal = {
        piece: (score, index)
        for index, (piece, score, kind) in enumerate(pieces)
        if kind == _PIECE.NORMAL
    }
    ranked = []
    for piece, (score, index) in normal.items():
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            if left in normal and right in normal:
                ranked.append((-score, index, cut, left, right))
    return [(left, right) for *_, left, right in sorted(ranked)]


def _normalizer(spec, model_type: int, pieces: list[tuple[str, float, int]]):
    steps = []
    if spec.precompiled_charsmap:
        charsmap = normalizers.Precompiled(spec.precompiled_charsmap)
        # NFKC, compiled: NFC around it makes tokenizers' grapheme-by-grapheme reading of
        # the rule agree with SentencePiece's longest match (see the module's docstring).
        nfkc = "nfkc" in spec.name
        steps += [normalizers.NFC(), charsmap, normalizers.NFC()] if nfkc else [charsmap]
    if spec.remove_extra_whitespaces:
        # Spaces only (SentencePiece leaves a tab alone), but at the end, where it strips
        # its escaped output, a "▁" of the text goes too.
        end = "[ ▁]" if spec.escape_whitespaces else " "
        steps += [
            normalizers.Replace(Regex(rf"\A +|{end}+\z"), ""),
            normalizers.Replace(Regex(" {2,}"), " "),
        ]
    if spec.add_dummy_prefix:  # not before an empty text
        steps.append(normalizers.Prepend(" "))
    if spec.escape_whitespaces:
        steps.append(normalizers.Replace(" ", "▁"))
    if model_type == _TRAINER.UNIGRAM:
        steps += _special_pieces_apart(pieces)
    return normalizers.Sequence(steps)


def _special_pieces_apart(pieces: list[tuple[str, float, int]]) -> list:
    """Normalizers that put each unknown character of a special piece between two
    `_APART`s, so that the unigram lattice never holds the special piece.

    Its `_NEVER_CHOSEN` score keeps it out of any path of known characters, but an
    unknown character scores lower still (tokenizers' `<unk>` scores below every piece):
    "<s>" would read as `<s>` where "<" is unknown, as `<unk> s <unk>` in SentencePiece.
    Apart, the three characters are unknown, one `<unk>` as SentencePiece fuses them.
    """
    known = {piece for piece, _, kind in pieces if kind in (_PIECE.NORMAL, _PIECE.USER_DEFINED)}
    if _APART in known:
        raise ValueError(f"A SentencePiece model with the piece {_APART!r} has no tokenizer.json.")
    special = {
        character
        for piece, _, kind in pieces
        if kind in (_PIECE.CONTROL, _PIECE.UNKNOWN)
        for character in piece
    }
    return [normalizers.Replace(c, f"{_APART}{c}{_APART}") for c in sorted(special - known)]


def _pre_tokenizers(model_type: int, pieces: list[tuple[str, float, int]]) -> list:
    splits = []
    user_defined = [piece for piece, _, kind in pieces if kind == _PIECE.USER_DEFINED]
    if user_defined:
        longest_first = sorted(user_defined, key=len, reverse=True)
        pattern = Regex("|".join(map(re.escape, longest_first)))
        splits.append(pre_tokenizers.Split(pattern, behavior="isolated"))
    if model_type == _TRAINER.WORD:  # a word starts at each "▁"
        splits.append(pre_tokenizers.Split("▁", behavior="merged_with_next"))
    return splits
