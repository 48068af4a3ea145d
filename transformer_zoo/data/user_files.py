"""Readers of the user's own data files, one per model family.

- plain text, one example per line (language modelling, `DecoderOnly`);
- TSV `source<TAB>target` (translation, `EncoderDecoder`);
- TSV `label<TAB>text[<TAB>text2]` (classification, `EncoderOnly`);
- a whole plain-text file as one stream (`read_stream`, language modelling by windows).

Files are UTF-8 (a byte-order mark is allowed); blank lines are skipped. A TSV file
has no header line, unless `columns` names the columns to read by their header names
(`sentence,label`; any order of the file's columns, others ignored). Anything else that
does not fit the format raises `DataError` naming the file and line, and a file without
any example is rejected. Classification labels are read in NFC; a classification file of
another split is read with the labels of the training data (`labels`): a row with another
label is refused.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Collection, Iterator
from dataclasses import dataclass

from transformer_zoo.data.examples import (
    ClassificationExample,
    PromptCompletion,
    TranslationPair,
)
from transformer_zoo.text.formats import is_blank

MAX_SHOWN = 10  # labels a message lists


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


# The column counts `columns` may name per family, and what they name.
COLUMNS = {"encoder-decoder": (2,), "encoder-only": (2, 3)}
COLUMN_LAYOUTS = {"encoder-decoder": "source,target", "encoder-only": "text[,text2],label"}


def check_columns(family: str, columns) -> None:
    """Raises a one-line ValueError unless `columns` (None, or header names) suits
    `family`: `source,target`, or `text[,text2],label`, distinct and non-empty."""
    if columns is None:
        return
    counts = COLUMNS.get(family, ())
    if not counts:
        raise ValueError(
            "`columns` picks the columns of a TSV file: encoder-decoder "
            "(source,target) and encoder-only (text[,text2],label) data; a decoder-only "
            "model reads plain text."
        )
    if (
        not isinstance(columns, (list, tuple))
        or len(columns) not in counts
        or not all(isinstance(c, str) and c for c in columns)
        or len(set(columns)) != len(columns)
    ):
        raise ValueError(
            f"`columns` names {COLUMN_LAYOUTS[family]} for {family} data: "
            f"{' or '.join(map(str, counts))} distinct header names. Received: {columns!r}"
        )


def decode_line(raw: bytes, path: str | os.PathLike, number: int) -> str:
    """Line `number` (from 1) of a UTF-8 file as text; the first may start with a
    byte-order mark, which is dropped. Each line is decoded on its own so that a
    decoding error names its own line.

    Raises:
        DataError: the line is not valid UTF-8.
    """
    try:
        return raw.decode("utf-8-sig" if number == 1 else "utf-8")
    except UnicodeDecodeError:
        raise DataError(path, "the line is not valid UTF-8", number) from None


def split_lines(data: bytes, path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """(line number, text) for every line of the UTF-8 bytes `data` of the file `path`,
    decoded one at a time (`decode_line`). Lines end at LF, CR LF or a lone CR
    (`bytes.splitlines`; not str's, which also ends them at U+001C-U+001E, U+0085 and
    U+2028/9), and the end of the last line starts no other."""
    for number, raw in enumerate(data.splitlines(), 1):
        yield number, decode_line(raw, path, number)


def _lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """(line number, text) for every non-blank line."""
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError as error:
        raise DataError(path, f"cannot read the file ({error.strerror or error})") from None
    for number, line in split_lines(data, path):
        if line.strip():
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
            # Two files joined end to end (the second's byte-order mark kept, perhaps).
            if fields[1:] == pick.header[1:] and fields[0].lstrip("\ufeff") == pick.header[0]:
                raise DataError(path, "this row repeats the header line", number)
            if len(fields) != pick.width:
                raise DataError(
                    path,
                    f"expected {pick.width} tab-separated fields as the header has, found "
                    f"{len(fields)}",
                    number,
                )
            fields = [fields[i] for i in pick.indices]
        examples.append(parse(number, fields))
    if not examples and pick is not None:
        raise DataError(path, "the file holds a header line and no rows")
    if not examples:
        raise DataError(path, "the file holds no examples (it is empty or blank)")
    return examples


@dataclass(frozen=True)
class _Columns:
    indices: list[int]  # of the picked columns, in the family's order
    header: list[str]  # the header's names, one per field

    @property
    def width(self) -> int:  # fields per line
        return len(self.header)


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
    twice = [name for name in columns if header.count(name) > 1]
    if twice:
        raise DataError(path, f"the header names {twice[0]!r} twice", number)
    return _Columns([header.index(name) for name in columns], header)


def _fields(
    path, number: int, fields: list[str], counts: tuple[int, ...], layout: str
) -> list[str]:
    if len(fields) not in counts:
        suffix = os.path.splitext(os.fspath(path))[1].lower()
        hint = (
            f" (a {suffix[1:].upper()} file? this family's files are tab-separated: convert it "
            "to TSV)"
            if suffix in (".csv", ".json", ".jsonl")
            else ""
        )
        if not hint and len(fields) > max(counts) and fields[-1] == "":
            hint = " (the line ends with a tab)"
        raise DataError(
            path,
            f"expected {layout} ({' or '.join(map(str, counts))} tab-separated fields), "
            f"found {len(fields)}{hint}",
            number,
        )
    for index, field in enumerate(fields, 1):
        # Empty, or only whitespace, format (zero-width) and control characters, which
        # encode to no token.
        if is_blank(field):
            raise DataError(path, f"field {index} is empty; expected {layout}", number)
    return fields


def read_text(path: str | os.PathLike, columns: None = None) -> list[PromptCompletion]:
    """A plain text file: every non-blank line is one language-modelling example."""
    return [PromptCompletion("", line) for line in read_lines(path)]


def read_lines(path: str | os.PathLike) -> list[str]:
    """The non-blank lines of a plain text file, stripped.

    Raises:
        DataError: the file is unreadable, not UTF-8, or holds no text.
    """
    lines = [line.strip() for _, line in _lines(path)]
    if not lines:
        raise DataError(path, "the file holds no examples (it is empty or blank)")
    return lines


def read_stream(path: str | os.PathLike) -> str:
    """A whole plain text file as it is (newlines and spaces kept, CR LF and CR line ends
    made LF, a byte-order mark dropped), for language modelling on one token stream.

    The file is decoded at once rather than line by line: a list of its lines took six
    times the file's size in memory."""
    try:
        with open(path, "rb") as file:
            raw = file.read()
    except OSError as error:
        raise DataError(path, f"cannot read the file ({error.strerror or error})") from None
    try:
        text = raw.decode("utf-8")  # not utf-8-sig, whose error offsets skip the mark
    except UnicodeDecodeError as error:
        raise DataError(path, "the line is not valid UTF-8", _line_at(raw, error.start)) from None
    del raw
    # Lines end as bytes.splitlines ends them, and the last one's end is no text.
    text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    text = text.removesuffix("\n")
    if not text.strip():
        raise DataError(path, "the file holds no examples (it is empty or blank)")
    return text


def _line_at(raw: bytes, offset: int) -> int:
    """The 1-based number of the line holding byte `offset` (lines end at LF, CR LF or
    CR)."""
    before = raw[:offset]
    return before.count(b"\n") + before.count(b"\r") - before.count(b"\r\n") + 1


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
    path: str | os.PathLike,
    columns: list[str] | None = None,
    labels: Collection[str] | None = None,
) -> list[ClassificationExample]:
    """A TSV file of `label<TAB>text` or `label<TAB>text<TAB>text2` lines, or with a
    header, the columns that `columns` names: `[text, label]` or `[text, text2, label]`
    (the label last, as SST-2 has it).

    Labels are read in NFC, so that canonically equivalent spellings (`café` with a
    composed or a combining accent) are one label. `labels`, those of the training data,
    check a file of another split: a row with another label is refused, and a row's label
    is spelt as the training data spells it. Without them (the training file) and without
    `columns`, a first line whose label occurs on no other line, while the labels of the
    others repeat, is taken for a header line and refused with the `columns` that read it.
    """
    layout = "<TAB>".join(columns) if columns else "label<TAB>text[<TAB>text2]"
    counts = (len(columns),) if columns else (2, 3)
    known = None if labels is None else {_nfc(label): label for label in labels}
    first: list[int] = []  # the line number of the first row
    shapes: dict[bool, int] = {}  # pair or not: the first line of each

    def parse(number, fields):
        fields = _fields(path, number, fields, counts, layout)
        if columns:
            fields = [fields[-1], *fields[:-1]]  # the label last in `columns`
        if not first:
            first.append(number)
        label = _nfc(fields[0])
        if known is not None and label not in known:
            message = (
                f"label {label!r} does not occur in the training data (labels: "
                f"{_listed(sorted(known.values()))})"
            )
            if not columns and number == first[0] and is_column_name(label):
                # `labels` come from the training data, read with these `columns`: a file
                # of another split has a header only where every file has one (`--columns`)
                message += (
                    "; if this line is a header, delete it: this file is read as the "
                    "training data was, without one (train --columns reads a header in "
                    "every file)"
                )
            raise DataError(path, message, number)
        label = known[label] if known is not None else label
        example = ClassificationExample(label, *fields[1:])
        shapes.setdefault(example.text2 is not None, number)
        return example

    examples = _read(path, parse, columns)
    if len(shapes) == 2:  # a stray tab makes one text a pair; a file holds one kind
        pairs = sum(e.text2 is not None for e in examples)
        odd = pairs < len(examples) - pairs  # the rarer kind is the odd one
        kinds = {True: "3 fields (label, text, text2)", False: "2 fields (label, text)"}
        raise DataError(
            path,
            f"this line has {kinds[odd]}, where most lines have {kinds[not odd]}: a stray "
            "tab? A file holds single texts or text pairs, not both",
            shapes[odd],
        )
    if labels is None and columns is None and _is_header(examples):
        head = examples[0]
        names = ",".join([head.text, *([head.text2] if head.text2 else []), head.label])
        raise DataError(
            path,
            f"this looks like a header line: its label {head.label!r} occurs on no other "
            "line, while the labels of the others repeat. Read the file by its header with "
            f"--columns {names} (the label last), or delete the line",
            first[0],
        )
    return examples


def classification_file_holds_pairs(path: str | os.PathLike) -> bool:
    """Whether a `label<TAB>text[<TAB>text2]` file (no header) holds text pairs, as its
    first row says: `read_classification_tsv` refuses a file that holds both kinds.

    Raises:
        DataError: the file cannot be read or holds no rows.
    """
    for _, line in _lines(path):
        return len(line.split("\t")) == 3
    raise DataError(path, "the file holds no examples (it is empty or blank)")


def _nfc(label: str) -> str:
    return unicodedata.normalize("NFC", label)


def is_column_name(text: str) -> bool:
    """Whether `text` reads as a header's column name (one word: `label`, `sentence`)."""
    return re.fullmatch(r"\w{1,40}", text) is not None


def _listed(names: list[str]) -> str:
    shown = ", ".join(map(repr, names[:MAX_SHOWN]))
    return shown + ", ..." if len(names) > MAX_SHOWN else shown


def _is_header(examples: list[ClassificationExample]) -> bool:
    """Whether the first row's label occurs on no other row while the other rows' labels
    repeat (twice each on average, at least): a header line, not a class of one example."""
    others = [e.label for e in examples[1:]]
    distinct = set(others)
    return bool(others) and examples[0].label not in distinct and len(others) >= 2 * len(distinct)
