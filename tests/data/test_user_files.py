"""User data files: the three readers, one-line errors naming file and line, and the
split of a file into train/valid/test."""

import unicodedata

import pytest

from transformer_zoo.data import (
    ClassificationExample,
    DataError,
    PromptCompletion,
    TranslationPair,
    load_task,
    read_classification_tsv,
    read_text,
    read_translation_tsv,
)
from transformer_zoo.data.user_files import read_stream


def _write(tmp_path, content, name="data.txt"):
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return path


def test_plain_text_lines_are_examples_and_blank_lines_are_skipped(tmp_path):
    path = _write(tmp_path, "\ufeffFirst line.\n\n  \nSecond\tline, with a tab.\r\nThird")
    assert read_text(path) == [
        PromptCompletion("", "First line."),
        PromptCompletion("", "Second\tline, with a tab."),
        PromptCompletion("", "Third"),
    ]


def test_translation_tsv_reads_source_and_target(tmp_path):
    path = _write(tmp_path, "March 5, 2021\t2021年3月5日\nnoon\t中午十二点\n")
    assert read_translation_tsv(path) == [
        TranslationPair("March 5, 2021", "2021年3月5日"),
        TranslationPair("noon", "中午十二点"),
    ]


def test_classification_tsv_reads_single_texts_and_pairs(tmp_path):
    singles = _write(tmp_path, "pos\tgreat film\nneg\tdull\n")
    assert read_classification_tsv(singles) == [
        ClassificationExample("pos", "great film"),
        ClassificationExample("neg", "dull"),
    ]
    pairs = _write(tmp_path, "yes\tnoon\t中午十二点\nno\tnoon\t午夜\n")
    assert read_classification_tsv(pairs) == [
        ClassificationExample("yes", "noon", "中午十二点"),
        ClassificationExample("no", "noon", "午夜"),
    ]


@pytest.mark.parametrize(
    "reader, content, line, match",
    [
        (read_translation_tsv, "a\tb\nonly one field\n", 2, "found 1"),
        (read_translation_tsv, "a\tb\n\na\tb\tc\n", 3, "found 3"),
        (read_translation_tsv, "a\tb\na\tb\t\n", 2, r"found 3 \(the line ends with a tab\)"),
        (read_translation_tsv, "a\t \n", 1, "field 2 is empty"),
        (read_classification_tsv, "pos\tok\nlabel only\n", 2, "label<TAB>text"),
        (read_classification_tsv, "pos\ta\tb\tc\n", 1, "found 4"),
        (read_classification_tsv, "\tno label\n", 1, "field 1 is empty"),
    ],
)
def test_malformed_lines_name_the_file_and_line(tmp_path, reader, content, line, match):
    path = _write(tmp_path, content)
    with pytest.raises(DataError, match=match) as error:
        reader(path)
    assert str(error.value).startswith(f"{path}:{line}: ")
    assert "\n" not in str(error.value) and error.value.line == line
    assert isinstance(error.value, ValueError)


@pytest.mark.parametrize("name", ["train.csv", "train.jsonl"])
def test_a_csv_or_jsonl_file_is_told_that_files_are_tab_separated(tmp_path, name):
    content = "label,text\npos,a fine film\n" if name.endswith("csv") else '{"label": "pos"}\n'
    path = _write(tmp_path, content, name)
    with pytest.raises(DataError, match="files are tab-separated: convert it to TSV"):
        read_classification_tsv(path)


def test_invalid_utf8_names_its_line(tmp_path):
    path = _write(tmp_path, b"fine\nalso fine\n\xff\xfe broken\n")
    with pytest.raises(DataError, match=r":3: the line is not valid UTF-8"):
        read_text(path)


@pytest.mark.parametrize("reader", [read_text, read_translation_tsv, read_classification_tsv])
@pytest.mark.parametrize("content", ["", "\n \n\t\n"])
def test_empty_files_are_rejected(tmp_path, reader, content):
    with pytest.raises(DataError, match="no examples"):
        reader(_write(tmp_path, content))


def test_unreadable_paths_give_one_line_errors(tmp_path):
    with pytest.raises(DataError, match="cannot read the file") as error:
        read_text(tmp_path / "missing.txt")
    assert "\n" not in str(error.value)
    with pytest.raises(DataError, match="cannot read the file"):
        read_text(tmp_path)  # a directory


def test_a_file_task_splits_deterministically_without_sharing_inputs(tmp_path):
    lines = [f"source {i % 150}\ttarget {i}" for i in range(200)]  # repeated sources
    path = _write(tmp_path, "\n".join(lines), "pairs.tsv")
    task = load_task(str(path), "encoder-decoder", seed=1)
    assert len(task.train) + len(task.valid) + len(task.test) == 200
    assert len({e.source for e in task.test}) == len({e.source for e in task.valid}) == 8
    sources = [{e.source for e in split} for split in (task.train, task.valid, task.test)]
    assert (
        not sources[0] & sources[1] and not sources[0] & sources[2] and not sources[1] & sources[2]
    )
    assert load_task(str(path), "encoder-decoder", seed=1) == task
    assert load_task(str(path), "encoder-decoder", seed=2).test != task.test


def test_a_classification_file_task_lists_its_labels(tmp_path):
    path = _write(tmp_path, "".join(f"{'pos' if i % 3 else 'neg'}\ttext {i}\n" for i in range(40)))
    task = load_task(str(path), "encoder-only")
    assert task.label_names == ("neg", "pos")
    source, target = task.fit_tokenizers(vocabulary_size=40)
    assert source is target


def test_too_small_files_unknown_builtins_and_families_are_rejected(tmp_path):
    with pytest.raises(DataError, match="at least 3"):
        load_task(str(_write(tmp_path, "one\ntwo\none\n")), "decoder-only")
    with pytest.raises(DataError, match="unknown built-in dataset; available: builtin:dates-zh"):
        load_task("builtin:nope", "decoder-only")
    with pytest.raises(ValueError, match="family"):
        load_task("builtin:dates-zh", "encoder-decoder-only")


def test_a_header_without_rows_is_named_so(tmp_path):
    path = _write(tmp_path, "sentence\tlabel\n\n", "header.tsv")
    with pytest.raises(DataError) as error:
        read_classification_tsv(path, columns=["sentence", "label"])
    assert str(error.value) == f"{path}: the file holds a header line and no rows"


@pytest.mark.parametrize(
    "family, columns",
    [
        ("encoder-decoder", ["source"]),
        ("encoder-decoder", ["source", "target", "extra"]),
        ("encoder-only", ["a", "b", "c", "label"]),
        ("encoder-only", ["label", "label"]),
        ("decoder-only", ["text", "label"]),
    ],
)
def test_columns_that_do_not_suit_the_family_are_refused(tmp_path, family, columns):
    path = _write(tmp_path, "a\tb\tc\tlabel\n1\t2\t3\tpos\n", "data.tsv")
    with pytest.raises(ValueError, match="`columns`") as error:
        load_task(str(path), family, columns=columns)
    assert not isinstance(error.value, DataError)  # the arguments, not the file


def test_a_stream_split_shorter_than_a_window_names_its_file_and_part(tmp_path):
    path = _write(tmp_path, "word " * 300, "text.txt")
    task = load_task(str(path), "decoder-only", stream=True)
    tokenizer, _ = task.fit_tokenizers(kind="char")
    task.check_windows(tokenizer, 100)  # 1,350 and 150 characters
    with pytest.raises(DataError) as error:
        task.check_windows(tokenizer, 200)
    assert str(error.value).startswith(
        f"{path}: the validation text (its last 10%) holds 150 tokens, fewer than one window "
        "of 200, the model's context"
    )
    short = _write(tmp_path, "word " * 10, "short.txt")
    task = load_task(str(path), "decoder-only", test=str(short), stream=True)
    with pytest.raises(DataError, match=r"short.txt: the test text holds 50 tokens"):
        task.check_windows(tokenizer, 100)
    with pytest.raises(DataError, match=r"text.txt: the training text \(its first 90%\)"):
        task.check_windows(tokenizer, 2000)


def test_a_run_scores_a_test_file_without_its_training_data(tmp_path):
    """`evaluate RUN --test FILE` read the training file too, and failed where it was gone."""
    from transformer_zoo.data.run_task import run_task
    from transformer_zoo.run_directory import RunConfig, RunError

    test = _write(tmp_path, "pos\tgood\nneg\tbad\n", "test.tsv")
    config = RunConfig(
        family="encoder-only",
        preset="tiny",
        task="classification",
        label_names=["neg", "pos"],
        data=str(tmp_path / "gone.tsv"),
        extra={"train": {"columns": None}},
    )
    task = run_task(config, str(test))
    assert task.test == read_classification_tsv(test) and task.label_names == ("neg", "pos")
    other = _write(tmp_path, "pos\tgood\nmaybe\tso-so\n", "other.tsv")
    with pytest.raises(DataError, match=r"other.tsv:2: label 'maybe' does not occur"):
        run_task(config, str(other))
    with pytest.raises(RunError, match=r"gone.tsv \(the data file this run trained on"):
        run_task(config)


def test_held_out_inputs_are_no_normalized_copies_of_training_inputs(tmp_path):
    """NFC, NFD and double-spaced copies of one source give the same token ids: grouped by
    the raw string, they leaked into the validation and test splits (60 of 60)."""
    lines = []
    for i in range(100):
        word = f"caf\u00e9 {i}"
        nfd = unicodedata.normalize("NFD", word)
        lines += [f"{word}\tT{i}", f"{nfd}\tT{i}", f"{word.replace(' ', '  ')}\tT{i}"]
    task = load_task(str(_write(tmp_path, "\n".join(lines), "pairs.tsv")), "encoder-decoder")

    def normal(text):
        return " ".join(unicodedata.normalize("NFKC", text).split())

    train = {normal(e.source) for e in task.train}
    held_out = [e.source for e in task.valid + task.test]
    assert len(held_out) == 30 and not [s for s in held_out if normal(s) in train]


def test_a_row_repeating_the_header_is_refused(tmp_path):
    """Two files joined end to end: the second header became an example of the class
    'label'."""
    head, rows = "sentence\tlabel\n", "a fine film\t1\na mess\t0\n"
    for second in (head, "\ufeff" + head):
        path = _write(tmp_path, head + rows + second + rows, "joined.tsv")
        with pytest.raises(DataError) as error:
            read_classification_tsv(path, columns=["sentence", "label"])
        assert str(error.value) == f"{path}:4: this row repeats the header line"


@pytest.mark.parametrize("field", ["\u200b", "\u2060", "\ufeff", "\u200b \u200b", "\u00ad"])
def test_a_field_of_format_characters_only_is_empty(tmp_path, field):
    """Zero-width characters encode to no token: such a field passed the empty check."""
    path = _write(tmp_path, f"pos\tgood\nneg\t{field}\n")
    with pytest.raises(DataError) as error:
        read_classification_tsv(path)
    assert str(error.value) == f"{path}:2: field 2 is empty; expected label<TAB>text[<TAB>text2]"
    kept = _write(tmp_path, "pos\tzero\u200bwidth\n\u200bneg\tbad\n", "kept.tsv")
    assert [e.label for e in read_classification_tsv(kept)] == ["pos", "\u200bneg"]


def test_a_header_naming_a_requested_column_twice_is_refused(tmp_path):
    """`header.index` took the first of the two columns named x."""
    path = _write(tmp_path, "x\tx\ty\na\tb\tc\n", "twice.tsv")
    with pytest.raises(DataError) as error:
        read_translation_tsv(path, ["x", "y"])
    assert str(error.value) == f"{path}:1: the header names 'x' twice"
    other = _write(tmp_path, "x\ty\tz\tz\na\tb\tc\td\n", "other.tsv")
    assert read_translation_tsv(other, ["x", "y"]) == [TranslationPair("a", "b")]


@pytest.mark.parametrize(
    "content, text",
    [
        (b"\xef\xbb\xbfa\r\nb\r\n\r\nc", "a\nb\n\nc"),
        (b"a\rb\n\n", "a\nb\n"),
        (b"a\xe2\x80\xa8b  \n", "a\u2028b  "),  # a line separator is text
    ],
)
def test_a_stream_is_the_text_with_its_newlines_made_one(tmp_path, content, text):
    assert read_stream(_write(tmp_path, content)) == text


def test_invalid_utf8_in_a_stream_names_its_line(tmp_path):
    path = _write(tmp_path, b"\xef\xbb\xbffine\r\nalso\rfine\n\n\xff broken\n")
    with pytest.raises(DataError) as error:
        read_stream(path)
    assert str(error.value) == f"{path}:5: the line is not valid UTF-8"


@pytest.mark.parametrize("field", ["\x7f\x7f", "\x01", "\x1b \x07", "\u200b\x00"])
def test_a_field_of_control_characters_only_is_empty(tmp_path, field):
    """Control characters (category Cc) encode to no token either: such a field passed
    the empty check."""
    path = _write(tmp_path, f"source\tgood\nsource 2\t{field}\n")
    with pytest.raises(DataError) as error:
        read_translation_tsv(path)
    assert str(error.value) == f"{path}:2: field 2 is empty; expected source<TAB>target"
    kept = _write(tmp_path, "a\x7fb\tc\x01\n", "kept.tsv")
    assert read_translation_tsv(kept) == [TranslationPair("a\x7fb", "c\x01")]


def test_canonically_equivalent_labels_are_one_label(tmp_path):
    """`café` with a composed accent and with a combining one were two classes of one
    name; a --valid file's NFD label was refused, or kept apart."""
    nfc, nfd = "caf\u00e9", "cafe\u0301"
    rows = [f"{(nfc, nfd, 'thé')[i % 3]}\ttext number {i}" for i in range(40)]
    path = _write(tmp_path, "\n".join(rows) + "\n", "train.tsv")
    valid = _write(tmp_path, f"{nfd}\tanother text\nthe\u0301\tone more\n", "valid.tsv")
    task = load_task(path, "encoder-only", valid=valid)
    assert task.label_names == (nfc, "thé")
    assert {e.label for e in task.train + task.valid + task.test} == {nfc, "thé"}
    # Labels of a run trained before (spelt NFD) read a test file in their own spelling.
    assert [e.label for e in read_classification_tsv(valid, labels=[nfd, "the\u0301"])] == [
        nfd,
        "the\u0301",
    ]
    with pytest.raises(DataError, match=r"valid.tsv:1: label 'café' does not occur"):
        read_classification_tsv(valid, labels=["tea", "thé"])


@pytest.mark.parametrize("reader", [read_text, read_translation_tsv])
def test_a_path_object_names_a_file_to_load(tmp_path, reader):
    """`load_task(pathlib.Path(...), family)` raised AttributeError (`startswith`)."""
    family = "decoder-only" if reader is read_text else "encoder-decoder"
    lines = [f"line {i}" if reader is read_text else f"line {i}\tLINE {i}" for i in range(40)]
    path = _write(tmp_path, "\n".join(lines), "data.txt")
    held = _write(tmp_path, lines[0], "test.txt")
    task = load_task(path, family, test=held)
    assert task.data == str(path) and len(task.train) + len(task.valid) == 40
    assert task.test == reader(held)
    stream = load_task(path, "decoder-only", stream=True, valid=held)
    assert stream.train[0].path == str(path) and stream.valid[0].path == str(held)


def test_split_lines_ends_lines_as_bytes_splitlines_does(tmp_path):
    from transformer_zoo.data.user_files import split_lines

    data = "\ufeffa\rb\r\n\r\nc\u2028d \x85e\n".encode()
    assert list(split_lines(data, "in.txt")) == [
        (1, "a"),
        (2, "b"),
        (3, ""),
        (4, "c\u2028d \x85e"),
    ]
    with pytest.raises(DataError, match=r"^in.txt:2: the line is not valid UTF-8$"):
        list(split_lines(b"fine\r\xff\n", "in.txt"))
