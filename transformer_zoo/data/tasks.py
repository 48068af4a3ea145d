"""A task (`data.task.Task`): the train/valid/test examples of one family, from
`builtin:NAME` or a file.

`load_task("builtin:dates-zh", "encoder-decoder")` gives translation pairs,
`"decoder-only"` prompt/completion text and `"encoder-only"` pair classification;
a file path is read by the family's reader (`user_files`) and split 90/5/5, keeping
examples with the same input in one split, unless `valid` and `test` files are given.
A classification task's labels are those of its `data` file (two at least), and the
`valid` and `test` files may hold no other. A decoder-only file read as a token stream
(`stream=True`) is one `TextStream` per split: its first 90% of characters train and the
last 10% validate (nanoGPT's split), and the test split is the validation text unless a
`test` file is given.
"""

from __future__ import annotations

import dataclasses
import os
import random
import re
import unicodedata

from transformer_zoo.data.builtin.dates_zh import LABELS, DatesZh
from transformer_zoo.data.examples import ClassificationExample, PromptCompletion, TextStream
from transformer_zoo.data.task import Task
from transformer_zoo.data.user_files import (
    DataError,
    check_columns,
    is_column_name,
    read_classification_tsv,
    read_stream,
    read_text,
    read_translation_tsv,
)
from transformer_zoo.errors import is_integer
from transformer_zoo.run_directory import FAMILIES

BUILTIN = {"dates-zh": DatesZh}
HELD_OUT_FRACTION = 0.05  # of a user file, for each of valid and test
STREAM_VALID_FRACTION = 0.1  # of a text stream: its end (nanoGPT's split)
# A classification file whose labels are this many and this varied is taken for a file of
# another family (its first column is text): refused, rather than a 3,000-class model.
MAX_LABELS = 100
LABEL_SHARE = 0.2
# So are labels most rows do not share that outnumber the distinct texts this many times:
# the text and label columns swapped.
SWAPPED_RATIO = 4
# Vocabulary sizes (soft limits) and model types per task kind.
BUILTIN_TOKENIZERS = {
    "vocabulary_size": 500,
    "target_vocabulary_size": 100,
    "target_model_type": "char",
}
USER_TOKENIZERS = {
    "vocabulary_size": 8000,
    "target_vocabulary_size": 8000,
    "target_model_type": "unigram",
}


def _check_family(family: str) -> None:
    if family not in FAMILIES:
        raise ValueError(f"`family` must be one of {FAMILIES}. Received: family={family!r}")


def _builtin_task(spec: str, family: str, seed: int) -> Task:
    name = spec.removeprefix("builtin:")
    if name not in BUILTIN:
        raise DataError(
            spec,
            f"unknown built-in dataset; available: {', '.join(f'builtin:{n}' for n in BUILTIN)}",
        )
    source = BUILTIN[name](seed=seed)
    shape = {
        "encoder-decoder": source.pairs,
        "decoder-only": source.prompt_completions,
        "encoder-only": source.classification,
    }[family]
    return Task(
        spec,
        family,
        *(shape(split) for split in ("train", "valid", "test")),
        label_names=LABELS if family == "encoder-only" else (),
        tokenizer_options=dict(BUILTIN_TOKENIZERS),
        shared_targets=source.shared_target_count("test") if family == "encoder-decoder" else None,
    )


def _input_key(example) -> str | tuple:
    """What must not straddle splits: the model's input, as the tokenizers see it (NFKC,
    runs of whitespace one space), so that an NFD or double-spaced copy of a training
    input is no held-out example."""
    if isinstance(example, ClassificationExample):
        return (_normal(example.text), example.text2 and _normal(example.text2))
    if isinstance(example, PromptCompletion):
        return _normal(example.text)
    return _normal(example.source)


def _normal(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).split())


def read_split(
    path: str,
    family: str,
    columns: list[str] | None = None,
    labels: tuple[str, ...] | None = None,
    stream: bool = False,
) -> list:
    """The examples of a file of one split, in the family's format: a `TextStream` of the
    whole text with `stream`; with `labels` (a classification file of a split other than
    the training one), rows of other labels are refused."""
    if stream:
        return [TextStream(read_stream(path), path=path)]
    if family == "encoder-only":
        return read_classification_tsv(path, columns, labels)
    if family == "encoder-decoder":
        return read_translation_tsv(path, columns)
    return read_text(path)


def _stream_task(path: str, valid=None, test=None) -> Task:
    """nanoGPT's split of a text: its first 90% trains, the last 10% (or `valid`)
    validates; the test text is `test`, or the validation text."""
    (train,) = read_split(path, "decoder-only", stream=True)
    if valid is None:
        cut = int((1 - STREAM_VALID_FRACTION) * len(train.text))
        last = f"its last {STREAM_VALID_FRACTION:.0%}"
        valid_split = [TextStream(train.text[cut:], path=path, part=last)]
        first = f"its first {1 - STREAM_VALID_FRACTION:.0%}"
        train = TextStream(train.text[:cut], path=path, part=first)
    else:
        valid_split = read_split(valid, "decoder-only", stream=True)
    test_split = read_split(test, "decoder-only", stream=True) if test is not None else valid_split
    splits = ([train], valid_split, test_split)
    return Task(path, "decoder-only", *splits, tokenizer_options=dict(USER_TOKENIZERS))


def _label_order(label: str) -> tuple:
    """Integer labels by value, before any other label, which sorts as text."""
    stripped = label.strip()
    # ASCII digits only: `str.isdigit` passes "²" and, after lstrip("-"), "--1", which
    # int() then refuses.
    if re.fullmatch(r"-?[0-9]+", stripped):
        return (0, int(stripped), label)
    return (1, 0, label)


def _label_names(path: str, examples: list, columns: list[str] | None = None) -> tuple[str, ...]:
    """The sorted labels of a classification file (integers in numeric order, so that
    labels 0-11 get ids 0-11), unless they are not class labels: text (too many, too
    varied, or more varied than the texts), or a single one."""
    labels = sorted({e.label for e in examples}, key=_label_order)
    texts = len({(e.text, e.text2) for e in examples})
    too_many = len(labels) > MAX_LABELS and len(labels) > LABEL_SHARE * len(examples)
    # SST-2's `sentence<TAB>label` read label first, too short for `too_many`: 61 labels
    # for 61 rows, and the texts '0' and '1'.
    swapped = len(labels) > len(examples) / 2 and len(labels) >= SWAPPED_RATIO * texts
    if too_many or swapped:
        raise DataError(path, _not_labels(examples, len(labels), texts, columns))
    if len(labels) < 2:
        raise DataError(
            path, f"every example has the label {labels[0]!r}: a classifier needs 2 labels at least"
        )
    return tuple(labels)


def _not_labels(examples: list, labels: int, texts: int, columns: list[str] | None) -> str:
    """Why the label column holds text, and the `--columns` that would read it."""
    held = f"holds {labels} distinct values in {len(examples)} examples"
    if texts * SWAPPED_RATIO <= labels:
        held += f" and the text column only {texts}"
    if columns is not None:
        return (
            f"the label column ({columns[-1]!r}, the last of --columns) {held}: that is text, "
            "not class labels. --columns names the text column(s) first and the label last"
        )
    first = examples[0]
    names = [first.label, first.text, *([first.text2] if first.text2 else [])]
    if all(map(is_column_name, names)):  # a header line, it seems
        how = f"A TSV with a header line names the columns to read with --columns {','.join(names)}"
    else:
        how = (
            "A TSV without a header line holds label<TAB>text[<TAB>text2]; one with a header "
            "line names the columns to read with --columns TEXT[,TEXT2],LABEL"
        )
    return (
        f"the label column (the first) {held}: that is text, not class labels. {how}, the "
        "label last; a translation file (source<TAB>target) trains with --family encoder-decoder"
    )


def _file_task(path: str, family: str, seed: int, valid=None, test=None, columns=None) -> Task:
    """A file's task: split 90/5/5 by input, or where `valid` and `test` name files of
    their own, those; a split not named is cut from `path` (5%). The labels of a
    classification task are those of `path`, and the files of the other splits may hold
    no other."""
    examples = read_split(path, family, columns)
    labels = _label_names(path, examples, columns) if family == "encoder-only" else ()
    groups: dict = {}
    for example in examples:
        groups.setdefault(_input_key(example), []).append(example)
    keys = list(groups)
    cut = [test is None, valid is None]  # the splits cut from this file: test, then valid
    if len(keys) < 1 + sum(cut):
        raise DataError(
            path, f"needs at least {1 + sum(cut)} distinct examples to split; found {len(keys)}"
        )
    random.Random(seed).shuffle(keys)
    held_out = max(1, round(HELD_OUT_FRACTION * len(keys)))
    bounds = [0, held_out * cut[0], held_out * (cut[0] + cut[1])]
    parts = [keys[bounds[0] : bounds[1]], keys[bounds[1] : bounds[2]], keys[bounds[2] :]]
    cut_test, cut_valid, train = ([e for k in part for e in groups[k]] for part in parts)
    if not train:
        raise DataError(path, "no training examples are left once the held-out splits are cut")
    known = labels or None
    valid = read_split(valid, family, columns, known) if valid is not None else cut_valid
    test = read_split(test, family, columns, known) if test is not None else cut_test
    return Task(path, family, train, valid, test, labels, dict(USER_TOKENIZERS))


def limit_task(task: Task, max_examples: int | None) -> Task:
    """The task cut to `max_examples` training examples and a tenth as many (at least 8)
    validation and test examples; unchanged for None.

    Raises:
        ValueError: `max_examples` is not an integer ≥ 1 (a negative one would cut from
            the end: -5 kept all but 5).
    """
    if max_examples is None:
        return task
    if not is_integer(max_examples) or max_examples < 1:
        raise ValueError(
            f"`max_examples` must be an integer ≥ 1 or None. Received: max_examples={max_examples!r}"
        )
    if task.stream:
        return task
    held_out = max(8, max_examples // 10)
    train = task.train[:max_examples]
    test = task.test[:held_out]
    shared = task.shared_targets
    if shared is not None:
        targets = {e.target for e in train}
        shared = {c: 0 for c in shared}
        for example in test:
            if example.target in targets:
                shared[example.category] = shared.get(example.category, 0) + 1
                shared["all"] += 1
    return dataclasses.replace(
        task, train=train, valid=task.valid[:held_out], test=test, shared_targets=shared
    )


def load_task(
    data: str | os.PathLike,
    family: str,
    seed: int = 0,
    valid: str | os.PathLike | None = None,
    test: str | os.PathLike | None = None,
    columns: list[str] | None = None,
    stream: bool = False,
) -> Task:
    """The task of `data` (`builtin:NAME` or a file path, a `pathlib.Path` too) shaped for
    `family`; `valid` and `test` name files for those splits instead of cutting them from
    `data`; `columns` picks TSV columns by header name (`user_files`); `stream` reads a
    decoder-only file as one token stream (see the module docstring).

    Raises:
        DataError: unknown built-in name, unreadable, malformed or empty file.
        ValueError: unknown family, a seed that is not an integer ≥ 0, `columns` that do
            not suit it, or split files beside built-in data.
    """
    _check_family(family)
    if not is_integer(seed) or seed < 0:
        # random.Random seeds "1" and 1 differently, and -1 as 1.
        raise ValueError(f"`seed` must be an integer ≥ 0. Received: seed={seed!r}")
    seed = int(seed)  # random.Random takes no numpy integer
    check_columns(family, columns)
    data = os.fspath(data)
    valid, test = (None if path is None else os.fspath(path) for path in (valid, test))
    if data.startswith("builtin:"):
        if valid is not None or test is not None:
            _refuse_split_files(data)
        return _builtin_task(data, family, seed)
    if stream:
        if family != "decoder-only":
            raise ValueError("Only a decoder-only model reads a file as a token stream.")
        return _stream_task(data, valid, test)
    return _file_task(data, family, seed, valid, test, columns)


def _refuse_split_files(data: str) -> None:
    raise ValueError(f"{data} has its own splits: --valid and --test take files of yours.")
