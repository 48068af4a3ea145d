"""Readers of the user's own data files, one per model family.

- plain text, one example per line (language modelling, `DecoderOnly`);
- TSV `source<TAB>target` (translation, `EncoderDecoder`);
- TSV `label<TAB>text[<TAB>text2]` (classification, `EncoderOnly`).

Files are UTF-8 (a byte-order mark is allowed) without a header line; blank lines are
skipped. Anything else that does not fit the format raises `DataError` naming the file
and line, and a file without any example is rejected.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from transformer_zoo.data.examples import ClassificationExample, PromptCompletion, TranslationPair


class DataError(ValueError):
    """Unreadable or malformed user data; `str(error)` is one line: `path:line: problem`.

    Args:
        path: the file.
        message: what is wrong.
        line: the 1-based line number, if the problem is on one line.
    """

    def __init__(self, path: str | os.PathLike, message: str, line: int | None = None):
        self.path = os.fspath(path)
        self.line = line
        self.message = message
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


def _lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """(line number, text) for every non-blank line; each line is decoded on its own so
    that a decoding error names its own line."""
    try:
        with open(path, "rb") as file:
            raw_lines = file.read().splitlines()
    except OSError as error:
        raise DataError(path, f"cannot read the file ({error.strerror or error})") from None
    for number, raw in enumerate(raw_lines, 1):
        try:
            line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError:
            raise DataError(path, "the line is not valid UTF-8", number) from None
        if line.strip():
            yield number, line


def _read(path, parse) -> list:
    examples = [parse(number, line) for number, line in _lines(path)]
    if not examples:
        raise DataError(path, "the file holds no examples (it is empty or blank)")
    return examples


def _fields(path, number: int, line: str, counts: tuple[int, ...], layout: str) -> list[str]:
    fields = [f.strip() for f in line.split("\t")]
    if len(fields) not in counts:
        raise DataError(
            path,
            f"expected {layout} ({' or '.join(map(str, counts))} tab-separated fields), "
            f"found {len(fields)}",
            number,
        )
    for index, field in enumerate(fields, 1):
        if not field:
            raise DataError(path, f"field {index} is empty; expected {layout}", number)
    return fields


def read_text(path: str | os.PathLike) -> list[PromptCompletion]:
    """A plain text file: every non-blank line is one language-modelling example."""
    return _read(path, lambda number, line: PromptCompletion("", line.strip()))


def read_translation_tsv(path: str | os.PathLike) -> list[TranslationPair]:
    """A TSV file of `source<TAB>target` lines."""

    def parse(number, line):
        return TranslationPair(*_fields(path, number, line, (2,), "source<TAB>target"))

    return _read(path, parse)


def read_classification_tsv(path: str | os.PathLike) -> list[ClassificationExample]:
    """A TSV file of `label<TAB>text` or `label<TAB>text<TAB>text2` lines."""

    def parse(number, line):
        fields = _fields(path, number, line, (2, 3), "label<TAB>text[<TAB>text2]")
        return ClassificationExample(*fields)

    return _read(path, parse)
