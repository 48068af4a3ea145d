"""The labels of a classification task come from its training file (issue 18): a header
line, a file of one label, and labels that only another split holds are refused in one
line naming the file at fault."""

import pytest

from transformer_zoo.data import DataError, load_task, read_classification_tsv

ROWS = [f"{'pos' if i % 3 else 'neg'}\ttext number {i}" for i in range(40)]


def _write(tmp_path, lines, name="train.tsv"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def test_a_label_first_header_line_is_refused_with_the_columns_that_read_it(tmp_path):
    path = _write(tmp_path, ["label\ttext", *ROWS])
    with pytest.raises(DataError) as error:
        load_task(path, "encoder-only")
    message = str(error.value)
    assert message.startswith(f"{path}:1: this looks like a header line: its label 'label'")
    assert "--columns text,label" in message
    task = load_task(path, "encoder-only", columns=["text", "label"])  # what it suggests
    assert task.label_names == ("neg", "pos")


def test_a_stray_tab_that_makes_one_text_a_pair_is_refused_at_its_line(tmp_path):
    """It loaded as text="the story", text2="was dreadful": single and pair rows mixed."""
    rows = [*ROWS[:5], "neg\tthe story\twas dreadful", *ROWS[5:]]
    with pytest.raises(DataError) as error:
        read_classification_tsv(_write(tmp_path, rows))
    assert str(error.value).startswith(
        f"{tmp_path / 'train.tsv'}:6: this line has 3 fields (label, text, text2), where most "
        "lines have 2 fields (label, text): a stray tab?"
    )
    pairs = [f"{label}\tone\ttwo {i}" for i, label in enumerate(["a", "b"] * 10)]
    assert len(read_classification_tsv(_write(tmp_path, pairs, "pairs.tsv"))) == 20


def test_a_first_line_of_a_label_that_repeats_is_no_header(tmp_path):
    assert len(read_classification_tsv(_write(tmp_path, ROWS))) == 40
    tiny = _write(tmp_path, ["pos\tgood", "neg\tbad"], "tiny.tsv")  # too few rows to tell
    assert len(read_classification_tsv(tiny)) == 2


def test_a_text_first_file_without_columns_is_told_the_columns_of_its_header(tmp_path):
    rows = [f"sentence number {i}\t{i % 2}" for i in range(150)]
    path = _write(tmp_path, ["sentence\tlabel", *rows])
    with pytest.raises(DataError, match="that is text, not class labels") as error:
        load_task(path, "encoder-only")
    assert "--columns sentence,label" in str(error.value)
    assert str(error.value).startswith(f"{path}: ")


def test_a_file_of_one_label_is_refused(tmp_path):
    path = _write(tmp_path, [f"pos\ttext {i}" for i in range(20)])
    with pytest.raises(DataError, match="every example has the label 'pos': a classifier needs 2"):
        load_task(path, "encoder-only")


@pytest.mark.parametrize("split", ["valid", "test"])
@pytest.mark.parametrize(
    "lines, line, label",
    [
        (["neg\tok", "1\tmislabelled"], 2, "1"),  # 0/1 against neg/pos
        (["text number 3\tneg"], 1, "text number 3"),  # columns swapped
    ],
)
def test_a_label_only_another_split_holds_is_refused_naming_its_file_and_line(
    tmp_path, split, lines, line, label
):
    data = _write(tmp_path, ROWS)
    other = _write(tmp_path, lines, f"{split}.tsv")
    with pytest.raises(DataError) as error:
        load_task(data, "encoder-only", **{split: other})
    assert str(error.value) == (
        f"{other}:{line}: label {label!r} does not occur in the training data "
        "(labels: 'neg', 'pos')"
    )


def test_a_header_in_a_test_file_is_named_as_a_possible_header(tmp_path):
    data = _write(tmp_path, ROWS)
    test = _write(tmp_path, ["label\ttext", "pos\tfine"], "test.tsv")
    with pytest.raises(DataError, match=r"test.tsv:1: label 'label' does not occur") as error:
        load_task(data, "encoder-only", test=test)
    # --columns at evaluate does not exist, and at train it would apply to the headerless
    # training file too: the hint says so (rnew's finding 4)
    assert str(error.value).endswith(
        "; if this line is a header, delete it: this file is read as the training data "
        "was, without one (train --columns reads a header in every file)"
    )


def test_a_valid_file_of_another_format_is_named_not_the_data_file(tmp_path):
    data = _write(tmp_path, ROWS)
    valid = _write(tmp_path, [f"word{i}\tW ER D {i}" for i in range(300)], "pairs.tsv")
    with pytest.raises(DataError) as error:
        load_task(data, "encoder-only", valid=valid)
    assert str(error.value).startswith(f"{valid}:1: label 'word0' does not occur")


def test_integer_labels_get_the_ids_of_their_values(tmp_path):
    """Labels 0-11 are ids 0-11 (as a user's id2label expects), not the text order that
    puts "10" and "11" before "2"."""
    path = _write(tmp_path, [f"{i % 12}\ttext number {i}" for i in range(48)])
    assert load_task(path, "encoder-only").label_names == tuple(str(i) for i in range(12))
    mixed = _write(tmp_path, ROWS + [f"{i % 2 + 9}\tmore {i}" for i in range(8)], "mixed.tsv")
    assert load_task(mixed, "encoder-only").label_names == ("9", "10", "neg", "pos")


def test_a_short_file_read_with_its_columns_swapped_is_refused(tmp_path):
    """SST-2's `sentence<TAB>label` read label first: with 60 rows, 61 sentences became
    the labels and '0', '1' the texts, trained to 0% accuracy without an error."""
    rows = [f"sentence number {i}\t{i % 2}" for i in range(60)]
    path = _write(tmp_path, ["sentence\tlabel", *rows])
    with pytest.raises(DataError) as error:
        load_task(path, "encoder-only")
    message = str(error.value)
    assert message.startswith(
        f"{path}: the label column (the first) holds 61 distinct values in 61 examples and "
        "the text column only 3: that is text, not class labels"
    )
    assert "--columns sentence,label" in message and "\n" not in message
    assert load_task(path, "encoder-only", columns=["sentence", "label"]).label_names == ("0", "1")
    headless = _write(tmp_path, rows[:10], "headless.tsv")  # no header: no columns to name
    with pytest.raises(DataError, match="A TSV without a header line holds label<TAB>text"):
        load_task(headless, "encoder-only")
    with pytest.raises(DataError, match=r"the label column \('sentence', the last of --columns\)"):
        load_task(path, "encoder-only", columns=["label", "sentence"])


@pytest.mark.parametrize(
    "lines",
    [
        ["pos\tgood", "neg\tbad", "pos\tfine", "neg\tawful"],
        [f"intent{i % 6}\tutterance {i}" for i in range(8)],  # a label for most rows
        ["pos\tsame text", "neg\tsame text", "pos\tother", "neg\tanother"],
    ],
)
def test_small_classification_files_are_not_taken_for_swapped_columns(tmp_path, lines):
    assert len(load_task(_write(tmp_path, lines), "encoder-only").label_names) >= 2


def test_labels_that_only_look_like_integers_sort_as_text(tmp_path):
    """`--1` and `²` passed `lstrip("-").isdigit()` and crashed int() with a message
    naming no file."""
    labels = ["--1", "²", "1", "-3", "٣"]  # ٣: an Arabic-Indic three
    path = _write(tmp_path, [f"{labels[i % 5]}\ttext number {i}" for i in range(40)])
    assert load_task(path, "encoder-only").label_names == ("-3", "1", "--1", "²", "٣")
