"""Readers of the user's own data files, one per model family.

- plain text, one example per line (language modelling, `DecoderOnly`);
- TSV `source<TAB>target` (translation, `EncoderDecoder`);
- TSV `label<TAB>text[<TAB>text2]` (classification, `EncoderOnly`);
- a whole plain-text file as one stream (`read_stream`, language modelling by windows).

Files are UTF-8 (a byte-order mark is allowed); blank lines are skipped. A TSV file
has no header line, unless `columns` names the columns to read by their header names
(`sentence,label`; any order of the file's columns, others ignored). Anything else that does not fit the format raises `DataError` naming the file
and line, and a file without any example is rejected.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

from transformer_zoo.data.examples import (
    ClassificationExample,
    PromptCompletion,
    TranslationPair,
)


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


def _lines(path: str | os.PathLike, keep_blank: bool = False) -> Iterator[tuple[int, str]]:
    """(line number, text) for every non-blank line (every line with `keep_blank`); each
    line is decoded on its own so that a decoding error names its own line."""
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
        if keep_blank or line.strip():
            yield number, line


def _read(path, parse, columns: list[str] | None = None) -> list:
    """`parse(number, fields)` of every line's fields, in the family's order: the
    file's, or those of the header names `columns` picks (the first line is the header)."""
    lines = _lines(path)
    pick = None
    if columns is not None:
        pick = _header(path, lines, columns)
    examples = []
    for number, line in lines:
        fields = [f.strip() for f in line.split("\t")]
        if pick is not None:
            if len(fields) != pick.width:
                raise DataError(
                    path,
                    f"expected {pick.width} tab-separated fields as the header has, found "
                    f"{len(fields)}",
                    number,
                )
            fields = [fields[i] for i in pick.indices]
        examples.append(parse(number, fields))
    if not examples:
        raise DataError(path, "the file holds no examples (it is empty or blank)")
    return examples


@dataclass(frozen=True)
class _Columns:
    indices: list[int]  # of the picked columns, in the family's order
    width: int  # fields per line


def _header(path, lines: Iterator[tuple[int, str]], columns: list[str]) -> _Columns:
    first = next(lines, None)
    if first is None:
        raise DataError(path, "the file is empty: expected a header line naming its columns")
    number, line = first
    header = [name.strip() for name in line.split("\t")]
    missing = [name for name in columns if name not in header]
    if missing:
        raise DataError(
            path,
            f"no column named {missing[0]!r}; the header names {', '.join(map(repr, header))}",
            number,
        )
    return _Columns([header.index(name) for name in columns], len(header))


def _fields(
    path, number: int, fields: list[str], counts: tuple[int, ...], layout: str
) -> list[str]:
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


def read_text(path: str | os.PathLike, columns: None = None) -> list[PromptCompletion]:
    """A plain text file: every non-blank line is one language-modelling example."""
    examples = [PromptCompletion("", line.strip()) for _, line in _lines(path)]
    if not examples:
        raise DataError(path, "the file holds no examples (it is empty or blank)")
    return examples


def read_stream(path: str | os.PathLike) -> str:
    """A whole plain text file as it is (newlines and spaces kept, a byte-order mark
    dropped), for language modelling on one token stream."""
    text = "\n".join(line for _, line in _lines(path, keep_blank=True))
    if not text.strip():
        raise DataError(path, "the file holds no examples (it is empty or blank)")
    return text


def read_translation_tsv(
    path: str | os.PathLike, columns: list[str] | None = None
) -> list[TranslationPair]:
    """A TSV file of `source<TAB>target` lines, or with a header, the two columns that
    `columns` names (`[source, target]`)."""
    layout = "<TAB>".join(columns) if columns else "source<TAB>target"

    def parse(number, fields):
        return TranslationPair(*_fields(path, number, fields, (2,), layout))

    return _read(path, parse, columns)


def read_classification_tsv(
    path: str | os.PathLike, columns: list[str] | None = None
) -> list[ClassificationExample]:
    """A TSV file of `label<TAB>text` or `label<TAB>text<TAB>text2` lines, or with a
    header, the columns that `columns` names: `[text, label]` or `[text, text2, label]`
    (the label last, as SST-2 has it)."""
    layout = "<TAB>".join(columns) if columns else "label<TAB>text[<TAB>text2]"
    counts = (len(columns),) if columns else (2, 3)

    def parse(number, fields):
        fields = _fields(path, number, fields, counts, layout)
        if columns:
            fields = [fields[-1], *fields[:-1]]  # the label last in `columns`
        return ClassificationExample(*fields)

    return _read(path, parse, columns)
