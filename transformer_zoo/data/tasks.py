"""A task: the train/valid/test examples of one family, from `builtin:NAME` or a file.

`load_task("builtin:dates-zh", "encoder-decoder")` gives translation pairs,
`"decoder-only"` prompt/completion text and `"encoder-only"` pair classification;
a file path is read by the family's reader (`user_files`) and split 90/5/5, keeping
examples with the same input in one split, unless `valid` and `test` files are given.
A decoder-only file read as a token stream (`stream=True`) is one `TextStream` per
split: its first 90% of characters train and the last 10% validate (nanoGPT's split),
and the test split is the validation text unless a `test` file is given.

Tokenizers per family (`Task.fit_tokenizers`):
- encoder-decoder: separate source and target vocabularies (`tokenizer.model`,
  `target_tokenizer.model`); each side keeps a small vocabulary of its own language,
  and the Chinese target of `dates-zh` is character-level;
- decoder-only and encoder-only: one shared vocabulary (`tokenizer.model`), since both
  languages flow through one embedding.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field

from transformer_zoo.data.builtin.dates_zh import LABELS, DatesZh
from transformer_zoo.data.examples import ClassificationExample, PromptCompletion, TextStream
from transformer_zoo.data.user_files import (
    DataError,
    read_classification_tsv,
    read_stream,
    read_text,
    read_translation_tsv,
)
from transformer_zoo.errors import RunError
from transformer_zoo.run_directory import FAMILIES
from transformer_zoo.text import Tokenizer, train_tokenizer

BUILTIN = {"dates-zh": DatesZh}
HELD_OUT_FRACTION = 0.05  # of a user file, for each of valid and test
STREAM_VALID_FRACTION = 0.1  # of a text stream: its end (nanoGPT's split)
# A classification file whose labels are this many and this varied is taken for a file of
# another family (its first column is text): refused, rather than a 3,000-class model.
MAX_LABELS = 100
LABEL_SHARE = 0.2
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


@dataclass(frozen=True)
class Task:
    """The examples of one family, split, with what training needs to know about them.

    Attributes:
        data: the data spec it came from (`builtin:dates-zh` or a path).
        family: `"encoder-decoder"`, `"decoder-only"` or `"encoder-only"`.
        train, valid, test: the examples (`TranslationPair`, `PromptCompletion` or
            `ClassificationExample`).
        label_names: classification label names; a label's id is its position.
        tokenizer_options: default vocabulary sizes and target model type.
        shared_targets: built-in translation tasks: per category, how many test
            targets also occur as training targets.
    """

    data: str
    family: str
    train: list
    valid: list
    test: list
    label_names: tuple[str, ...] = ()
    tokenizer_options: dict = field(default_factory=dict)
    shared_targets: dict[str, int] | None = None

    @property
    def stream(self) -> bool:
        """Whether the examples are token streams (`TextStream`), not lines."""
        return bool(self.train) and isinstance(self.train[0], TextStream)

    def fit_tokenizers(
        self,
        vocabulary_size: int | None = None,
        target_vocabulary_size: int | None = None,
        kind: str | None = None,
        target_kind: str | None = None,
    ) -> tuple[Tokenizer, Tokenizer]:
        """`(tokenizer, target_tokenizer)` trained on the training split; the same
        object for the shared-vocabulary families. `kind` and `target_kind` are
        `text.tokenizer.MODEL_TYPES`, "word" taking whitespace-separated symbols
        (phones) as they are (default: unigram, and the task's target kind)."""
        options = self.tokenizer_options
        size = vocabulary_size or options["vocabulary_size"]
        kind = kind or "unigram"
        if self.family == "encoder-decoder":
            source = train_tokenizer([e.source for e in self.train], size, model_type=kind)
            target = train_tokenizer(
                [e.target for e in self.train],
                target_vocabulary_size or options["target_vocabulary_size"],
                model_type=target_kind or options["target_model_type"],
            )
            return source, target
        if self.stream:
            lines = [line for e in self.train for line in e.text.split("\n")]
            shared = train_tokenizer(lines, size, model_type=kind, keep_whitespace=True)
            return shared, shared
        if self.family == "decoder-only":
            texts = [e.prompt for e in self.train] + [e.completion for e in self.train]
        else:
            texts = [e.text for e in self.train] + [e.text2 for e in self.train if e.text2]
        shared = train_tokenizer(texts, size, model_type=kind)
        return shared, shared


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
    """What must not straddle splits: the model's input."""
    if isinstance(example, ClassificationExample):
        return (example.text, example.text2)
    if isinstance(example, PromptCompletion):
        return example.text
    return example.source


READERS = {
    "encoder-decoder": read_translation_tsv,
    "decoder-only": read_text,
    "encoder-only": read_classification_tsv,
}


def _stream_task(path: str, valid=None, test=None) -> Task:
    text = read_stream(path)
    if valid is None:
        cut = int((1 - STREAM_VALID_FRACTION) * len(text))
        text, valid_text = text[:cut], text[cut:]
    else:
        valid_text = read_stream(valid)
    test_text = read_stream(test) if test is not None else valid_text
    splits = ([TextStream(t)] for t in (text, valid_text, test_text))
    return Task(path, "decoder-only", *splits, tokenizer_options=dict(USER_TOKENIZERS))


def _file_task(path: str, family: str, seed: int, valid=None, test=None, columns=None) -> Task:
    """A file's task: split 90/5/5 by input, or where `valid` and `test` name files of
    their own, those; a split not named is cut from `path` (5%)."""

    def reader(file):
        return READERS[family](file, columns)

    examples = reader(path)
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
    test_examples = reader(test) if test is not None else cut_test
    valid_examples = reader(valid) if valid is not None else cut_valid
    if not train:
        raise DataError(path, "no training examples are left once the held-out splits are cut")
    test, valid = test_examples, valid_examples
    examples = train + valid + test
    labels = tuple(sorted({e.label for e in examples})) if family == "encoder-only" else ()
    if len(labels) > MAX_LABELS and len(labels) > LABEL_SHARE * len(examples):
        raise DataError(
            path,
            f"the label column (the first) holds {len(labels)} distinct values in "
            f"{len(examples)} examples: that is text, not class labels. A translation file "
            "(source<TAB>target) trains with --family encoder-decoder",
        )
    return Task(path, family, train, valid, test, labels, dict(USER_TOKENIZERS))


def limit_task(task: Task, max_examples: int | None) -> Task:
    """The task cut to `max_examples` training examples and a tenth as many (at least 8)
    validation and test examples; unchanged for None."""
    if max_examples is None or task.stream:
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
    data: str,
    family: str,
    seed: int = 0,
    valid: str | None = None,
    test: str | None = None,
    columns: list[str] | None = None,
    stream: bool = False,
) -> Task:
    """The task of `data` (`builtin:NAME` or a file path) shaped for `family`; `valid`
    and `test` name files for those splits instead of cutting them from `data`;
    `columns` picks TSV columns by header name (`user_files`); `stream` reads a
    decoder-only file as one token stream (see the module docstring).

    Raises:
        DataError: unknown built-in name, unreadable, malformed or empty file.
        ValueError: unknown family, or split files beside built-in data.
    """
    _check_family(family)
    if data.startswith("builtin:"):
        if valid is not None or test is not None:
            raise ValueError(f"{data} has its own splits: --valid and --test take files of yours.")
        return _builtin_task(data, family, seed)
    if stream:
        if family != "decoder-only":
            raise ValueError("Only a decoder-only model reads a file as a token stream.")
        return _stream_task(data, valid, test)
    return _file_task(data, family, seed, valid, test, columns)


def run_task(config, test: str | None = None) -> Task:
    """The task a run was trained on, as its `RunConfig` names it: data, its splits,
    columns and windows, seed and the `train` example limit; with `test`, that file
    (read as the training data was) is the test split instead.

    Raises:
        RunError: the config names no data (an imported checkpoint).
        DataError: the data is unreadable.
    """
    if not config.data:
        raise RunError(
            "This model names no task (config.json has no `data`): it was not trained "
            "here, so there is no test split to score it on."
        )
    settings = config.extra.get("train") or {}
    task = load_task(
        config.data,
        config.family,
        seed=config.seed or 0,
        valid=settings.get("valid"),
        test=test or settings.get("test"),
        columns=settings.get("columns"),
        stream=settings.get("windows") in ("random", "epoch"),
    )
    limited = limit_task(task, settings.get("max_examples"))
    return limited if test is None else dataclasses.replace(limited, test=task.test)
