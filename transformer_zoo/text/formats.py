"""How text becomes model inputs: the one definition of the three input formats.

The `tf.data` pipelines (`transformer_zoo.data.pipelines`) build the same ids in-graph,
and a test checks they agree, so that generation and serving, which use these
functions, see exactly the tokens the model was trained on.

- Encoder-decoder source: `pieces(source) + [eos]`; the decoder starts from `[bos]`
  and is trained to end with `[eos]`. The ids are the tokenizer's own (`bos_id`,
  `eos_id`): an imported Marian model starts its decoder from `<pad>`, and GPT-2's
  `<|endoftext|>` is both its `[bos]` and its `[eos]`.
- Decoder-only prompt: `[bos] + pieces(prompt)`; the model continues with
  `pieces(completion) + [eos]`. Prompt and completion are encoded separately, so a
  piece never straddles the boundary between them.
- Teacher forcing (`translation_example`, `language_model_example`): the decoder inputs
  and the labels the loss covers, with label 0 where nothing is trained on.
- Encoder-only pair: `[bos] + pieces(text) + [eos] (+ pieces(text2) + [eos])`, segment
  ids 0 up to the first `[eos]`, then 1; `[bos]` plays BERT's `[CLS]`, `[eos]` its
  `[SEP]`, and a WordPiece vocabulary (an imported BERT) uses its own `[CLS]` and `[SEP]`
  ids, as BERT's tokenizer does. A model of fewer than two segment rows
  (`type_vocabulary_size` 1, RoBERTa's, or 0) reads the second text in segment 0 as well,
  as transformers' RoBERTa tokenizer gives a pair: the texts told apart by their `[SEP]`s
  alone. Over-long pairs lose tokens from the end of the longer text first
  (transformers' `longest_first`).
"""

from __future__ import annotations

import operator
import unicodedata
from collections.abc import Sequence

from transformer_zoo.errors import InputError, is_integer
from transformer_zoo.text.tokenizer import BOS_ID, EOS_ID, Tokenizer


def is_blank(text: str) -> bool:
    """Whether `text` holds nothing but whitespace, format characters (Unicode category
    Cf: zero-width spaces and joiners, U+FEFF, the soft hyphen) and control characters
    (Cc: U+0001, DEL), which SentencePiece's default normalization drops: text with
    nothing for a model to read. The one test of an empty input: a training file's empty field,
    a translation source with nothing to translate (`ServedModel`), the command line's
    blank line. Printable text is checked no further."""
    if text.isprintable():
        return not text.strip()
    return not "".join(c for c in text if unicodedata.category(c) not in ("Cf", "Cc")).strip()


def _check_max_length(max_length: int | None, minimum: int) -> None:
    if max_length is not None and (not is_integer(max_length) or max_length < minimum):
        raise ValueError(
            f"`max_length` must be an integer ≥ {minimum} or None. Received: max_length={max_length}"
        )


def check_pair_length(max_length: int | None) -> None:
    """Refuses text pairs for a model that reads at most 2 tokens: a pair takes 3 special
    tokens (`[CLS] text [SEP] text2 [SEP]`) before any of its text. The one check of it,
    for training data, serving and `pair_row` alike."""
    if is_integer(max_length) and max_length < 3:
        raise InputError(
            "A text pair needs max_length ≥ 3 (`[CLS] text [SEP] text2 [SEP]`), but the "
            f"model reads at most {max_length} tokens: give it single texts."
        )


def _check_text(text, name: str) -> None:
    """`text` is one str: a tokenizer encodes a list too, and its id lists would be
    nested in the ids (`source_ids(tokenizer, ["a", "b"])` was `[[...], [...], 3]`)."""
    if not isinstance(text, str):
        raise ValueError(
            f"`{name}` must be one text, a str (call once per text for several). "
            f"Received: {type(text).__name__} {text!r:.60}"
        )


def source_ids(tokenizer: Tokenizer, source: str, max_length: int | None = None) -> list[int]:
    """Encoder input ids of an encoder-decoder model: pieces + `[eos]`, at most `max_length`."""
    _check_text(source, "source")
    _check_max_length(max_length, 1)
    pieces = tokenizer.encode(source)
    if max_length is not None:
        pieces = pieces[: max_length - 1]
    return pieces + [tokenizer.eos_id]


def prompt_ids(tokenizer: Tokenizer, prompt: str, max_length: int | None = None) -> list[int]:
    """Decoder-only prompt ids: `[bos]` + pieces, at most `max_length`."""
    _check_text(prompt, "prompt")
    _check_max_length(max_length, 1)
    ids = [tokenizer.bos_id] + tokenizer.encode(prompt)
    return ids if max_length is None else ids[:max_length]


def pair_budget(length_a, length_b, budget, minimum=min, maximum=max):
    """How many pieces of each text fit in `budget`, trimming the longer one first: the
    `longest_first` truncation of Hugging Face's (Rust) tokenizers, which BERT's fast
    tokenizer and so cross-encoders use. A text of at most half the budget is kept whole
    and the other cut to the rest; else the longer text keeps the larger half (the second
    text on ties). `minimum`/`maximum` let the `tf.data` pipelines run the same arithmetic
    on tensors (`tf.minimum`, `tf.maximum`).
    """
    a_longer = minimum(maximum(length_a - length_b, 0), 1)  # 1 where a is the longer text
    half_a = budget // 2 + budget % 2 * a_longer
    keep_a = minimum(length_a, maximum(budget - length_b, half_a))
    return keep_a, minimum(length_b, budget - keep_a)


def pair_ids(
    tokenizer: Tokenizer,
    text: str,
    text2: str | None = None,
    max_length: int | None = None,
    type_vocabulary_size: int = 2,
) -> tuple[list[int], list[int]]:
    """Encoder-only ids and segment ids of one text or a text pair (`pair_row`)."""
    _check_text(text, "text")
    if text2 is not None:
        _check_text(text2, "text2")
    b = tokenizer.encode(text2) if text2 is not None else None
    return pair_row(tokenizer.encode(text), b, BOS_ID, EOS_ID, max_length, type_vocabulary_size)


def pair_row(
    a: list[int],
    b: list[int] | None,
    first: int,
    separator: int,
    max_length: int | None = None,
    type_vocabulary_size: int = 2,
) -> tuple[list[int], list[int]]:
    """`([first] + a + [separator] (+ b + [separator]), segment ids)` of the pieces of a text
    (or a pair, when `b` is not None), the longer text cut first to fit `max_length`; `b`
    in segment 1 where the model has that segment (`type_vocabulary_size` ≥ 2), else in 0."""
    if b is not None:
        check_pair_length(max_length)
    _check_max_length(max_length, 3 if b is not None else 2)
    if max_length is not None:
        specials = 3 if b is not None else 2
        keep_a, keep_b = pair_budget(len(a), len(b or []), max_length - specials)
        a, b = a[:keep_a], None if b is None else b[:keep_b]
    ids = [first] + a + [separator]
    segments = [0] * len(ids)
    if b is not None:
        ids += b + [separator]
        segments += [1 if type_vocabulary_size > 1 else 0] * (len(b) + 1)
    return ids, segments


def encoder_rows(
    tokenizer,
    texts: Sequence[str],
    pairs: Sequence[str | None] | None = None,
    max_length=None,
    type_vocabulary_size: int = 2,
) -> list[tuple[list[int], list[int]]]:
    """`(ids, segment ids)` per text or text pair, at most `max_length` long, for a model
    of `type_vocabulary_size` segments (`pair_row`): `[bos] … [eos]` for a SentencePiece
    `Tokenizer`, `[CLS] … [SEP]` for a `WordPieceTokenizer` (an imported BERT checkpoint;
    a cross-encoder reads pairs)."""
    from transformer_zoo.text.wordpiece import WordPieceTokenizer

    pairs = [None] * len(texts) if pairs is None else list(pairs)
    if isinstance(tokenizer, WordPieceTokenizer):
        first, separator = tokenizer.cls_id, tokenizer.sep_id
        a_rows = tokenizer.piece_ids(texts)
        given = [i for i, pair in enumerate(pairs) if pair is not None]
        b_rows: list[list[int] | None] = [None] * len(texts)
        for i, row in zip(given, tokenizer.piece_ids([pairs[i] for i in given]), strict=True):
            b_rows[i] = row
    else:
        first, separator = BOS_ID, EOS_ID
        a_rows = [tokenizer.encode(text) for text in texts]
        b_rows = [None if pair is None else tokenizer.encode(pair) for pair in pairs]
    return [
        pair_row(a, b, first, separator, max_length, type_vocabulary_size)
        for a, b in zip(a_rows, b_rows, strict=True)
    ]


def translation_example(
    source_tokenizer: Tokenizer,
    target_tokenizer: Tokenizer,
    source: str,
    target: str,
    max_source_length: int,
    max_target_length: int,
) -> tuple[list[int], list[int], list[int]]:
    """`(encoder ids, decoder ids, labels)` of a translation pair, teacher-forced: the
    decoder reads `[bos]` + target pieces and learns target pieces + `[eos]` (the target
    tokenizer's ids), both cut to `max_target_length` (a cut target keeps no `[eos]`
    label)."""
    _check_text(target, "target")
    pieces = target_tokenizer.encode(target)
    return (
        source_ids(source_tokenizer, source, max_source_length),
        ([target_tokenizer.bos_id] + pieces)[:max_target_length],  # Marian's: <pad>
        (pieces + [target_tokenizer.eos_id])[:max_target_length],
    )


def stream_window(ids, start, length: int, concat=operator.add, bos_id: int = BOS_ID):
    """`(inputs, labels)` of the window of a token stream `ids` at `start`: the labels
    are the `length` tokens from `start`, the inputs `[bos]` and all but the last of them,
    so every label is the next token of its input, the first predicted from `<bos>` alone
    (as a prompt begins at generation). `concat` joins `[bos]` to a slice: `+` for
    lists, `tf.concat` in the `tf.data` pipeline (`data.pipelines.stream_dataset`).
    `bos_id` is the tokenizer's (`<|endoftext|>` for GPT-2). A window holds no padding:
    every input is attended to and every label trained on, whatever its id."""
    labels = ids[start : start + length]
    return concat([bos_id], ids[start : start + length - 1]), labels


def stream_starts(count: int, length: int) -> range:
    """Starts of the non-overlapping windows of a stream of `count` tokens."""
    return range(0, count - length + 1, length)


def language_model_example(
    tokenizer: Tokenizer,
    prompt: str,
    completion: str,
    max_length: int,
    completion_only_loss: bool = True,
) -> tuple[list[int], list[int]]:
    """`(inputs, labels)` of a decoder-only example: the sequence `[bos]` + prompt +
    completion + `[eos]`, cut to `max_length + 1`, shifted by one; with
    `completion_only_loss` the prompt's labels are 0 (the prompt is given at inference)."""
    _check_text(prompt, "prompt")
    _check_text(completion, "completion")
    prompt_pieces = tokenizer.encode(prompt)
    sequence = [BOS_ID] + prompt_pieces + tokenizer.encode(completion) + [EOS_ID]
    sequence = sequence[: max_length + 1]
    labels = sequence[1:]
    if completion_only_loss:
        labels = [0 if i < len(prompt_pieces) else token for i, token in enumerate(labels)]
    return sequence[:-1], labels


def uncut_rows(family: str, tokenizer, examples, target_tokenizer=None) -> list[list[int]]:
    """Per line example (not a token stream's), the ids its longest model input would
    have uncut, the one a `max_length` cuts first: an encoder-decoder's source (pieces +
    `[eos]`) or target (`[bos]` + pieces), whichever is longer; a decoder-only
    prompt + completion; an encoder-only text (or pair) with its special tokens. The
    trainer's and the evaluation's counts of what gets cut both come from here."""
    if family == "encoder-decoder":
        target_tokenizer = target_tokenizer or tokenizer
        rows = []
        for e in examples:
            source = source_ids(tokenizer, e.source)
            target = [target_tokenizer.bos_id] + target_tokenizer.encode(e.target)
            rows.append(max(source, target, key=len))
        return rows
    if family == "encoder-only":
        texts, pairs = [e.text for e in examples], [e.text2 for e in examples]
        return [ids for ids, _ in encoder_rows(tokenizer, texts, pairs)]
    return [language_model_example(tokenizer, e.prompt, e.completion, 10**9)[0] for e in examples]
