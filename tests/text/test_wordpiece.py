"""The TensorFlow-free WordPiece tokenizer against the ids sentence-transformers recorded,
and against transformers 5.25 on a BERT checkpoint's options and added tokens in each
layout of its files (tests/data/hf_tokenizer_reference.json)."""

import json
import subprocess
import sys

import numpy as np
import pytest
from tokenizers import AddedToken, Tokenizer

from tests.data.hf_tokenizer_cases import DEFAULTS_REFERENCE, make_case
from tests.data.hf_tokenizer_cases import reference as hf_reference
from tests.helpers import DATA_DIR, minilm_dir, minilm_reference
from tests.helpers import WORDPIECE_EDGE_CASES as EDGE_CASES
from transformer_zoo.text.wordpiece import WordPieceTokenizer

BERT_CASES = {case["name"]: case for case in hf_reference()["bert"]["cases"]}
BERT_DEFAULTS = hf_reference(DEFAULTS_REFERENCE)["bert"]


@pytest.fixture(scope="module")
def tokenizer():
    return WordPieceTokenizer.from_directory(minilm_dir())


def test_ids_equal_the_sentence_transformers_reference(tokenizer):
    sentences, reference_ids, _ = minilm_reference()
    assert tokenizer.encode_ids(sentences) == reference_ids


def test_ids_equal_the_checkpoint_tokenizer_json_on_edge_cases(tokenizer):
    # The checkpoint's own tokenizer.json (Hugging Face's serialised BertTokenizerFast),
    # with its 128-token truncation and padding switched off.
    hf = Tokenizer.from_file(str(minilm_dir() / "tokenizer.json"))
    hf.no_truncation()
    hf.no_padding()
    expected = [e.ids for e in hf.encode_batch(EDGE_CASES)]
    assert tokenizer.encode_ids(EDGE_CASES) == expected
    assert 103 in tokenizer.encode_ids(["a [MASK] b"])[0]  # one token, not "[", "mask", "]"


def test_from_directory_truncates_at_max_seq_length_keeping_cls_and_sep(tokenizer):
    sentences, reference_ids, _ = minilm_reference()
    long = next(i for i, ids in enumerate(reference_ids) if len(ids) == 256)
    assert tokenizer.max_length == 256
    ids = tokenizer.encode_ids([sentences[long]], max_length=10)[0]
    assert ids == reference_ids[long][:9] + [tokenizer.sep_id]
    assert len(tokenizer.tokenize(sentences[long])) > 254  # truncated, not short


def test_encode_pads_with_zero_and_masks_the_padding(tokenizer):
    sentences, reference_ids, _ = minilm_reference()
    batch = tokenizer.encode(sentences[:5])
    length = max(len(ids) for ids in reference_ids[:5])
    assert batch["input_ids"].shape == batch["attention_mask"].shape == (5, length)
    assert batch["input_ids"].dtype == batch["attention_mask"].dtype == np.int64
    for row, mask, ids in zip(
        batch["input_ids"], batch["attention_mask"], reference_ids, strict=False
    ):
        assert row[: len(ids)].tolist() == ids and not row[len(ids) :].any()
        assert mask.tolist() == [1] * len(ids) + [0] * (length - len(ids))
    fixed = tokenizer.encode(["a"], max_length=8, pad_to_max_length=True)
    assert fixed["input_ids"].tolist() == [[101, 1037, 102, 0, 0, 0, 0, 0]]


def test_special_ids_and_vocabulary_size(tokenizer):
    assert tokenizer.vocabulary_size == 30522
    assert tokenizer.special_ids == {"pad": 0, "unk": 100, "cls": 101, "sep": 102, "mask": 103}


def test_decode_joins_pieces_into_normalised_text(tokenizer):
    ids = tokenizer.encode(["Crème brûlée à Zürich, Sourdough!"])["input_ids"][0]
    assert tokenizer.decode(ids) == "creme brulee a zurich, sourdough!"
    assert tokenizer.decode(ids, skip_special_tokens=False).startswith("[CLS] creme")


def test_save_then_from_directory_gives_the_same_ids(tokenizer, tmp_path):
    tokenizer.save(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 64}))
    reloaded = WordPieceTokenizer.from_directory(tmp_path)
    assert reloaded.max_length == 64  # no sentence_bert_config.json: the model's positions
    assert reloaded.vocabulary == tokenizer.vocabulary
    sentences, _, _ = minilm_reference()
    assert reloaded.encode_ids(sentences, 64) == tokenizer.encode_ids(sentences, 64)


def test_bad_arguments_raise_value_errors_naming_them(tokenizer, tmp_path):
    with pytest.raises(ValueError, match="texts"):
        tokenizer.encode("one string")
    with pytest.raises(ValueError, match="texts"):
        tokenizer.encode([])
    with pytest.raises(ValueError, match="texts"):
        tokenizer.encode(["ok", 3])
    with pytest.raises(ValueError, match="max_length"):
        tokenizer.encode(["ok"], max_length=1)
    with pytest.raises(ValueError, match="ids"):
        tokenizer.decode([30522])
    with pytest.raises(ValueError, match="special tokens"):
        WordPieceTokenizer(["[PAD]", "a"])
    with pytest.raises(ValueError, match="directory"):
        WordPieceTokenizer.from_directory(tmp_path)
    with pytest.raises(ValueError, match="tokenize_chinese_chars=None"):
        WordPieceTokenizer(tokenizer.vocabulary, tokenize_chinese_chars=None)
    with pytest.raises(ValueError, match="added_tokens"):
        WordPieceTokenizer(tokenizer.vocabulary, added_tokens=["<ent>"])
    with pytest.raises(ValueError, match="`lowercase` must be True or False"):
        WordPieceTokenizer(tokenizer.vocabulary, lowercase="false")


def test_numpy_flags_are_taken_as_python_ones(tokenizer):
    """`np.True_` (a flag read from an array or a numpy config) is a flag, as it is to the
    layers and TrainConfig (`errors.is_flag`); it was refused here."""
    cased = WordPieceTokenizer(tokenizer.vocabulary, lowercase=np.False_)
    assert cased.lowercase is False
    text = ["Hello WORLD"]
    np.testing.assert_array_equal(
        cased.encode(text)["input_ids"],
        WordPieceTokenizer(tokenizer.vocabulary, lowercase=False).encode(text)["input_ids"],
    )


def bert_case(name, tmp_path):
    return make_case(DATA_DIR / "hf_bert_classifier", BERT_CASES[name], tmp_path / name)


@pytest.mark.parametrize("name", sorted(BERT_CASES))
def test_options_and_added_tokens_give_the_ids_transformers_gave(name, tmp_path):
    """Each case of the test classifier's tokenizer files, as transformers 5.25 read it.
    Before, added tokens were split into pieces (`'Hello <ent> world'` [2, 1008, 1146,
    1146, 1086, 32, 47, 1084, 1108, 34, 1094, 3] for [2, 1008, 1146, 1146, 1086, 1308,
    1094, 3]), a checkpoint without vocab.txt (saved by transformers 5) was refused,
    `tokenize_chinese_chars: false` gave each ideograph its id where transformers gives one
    [UNK], and decode ignored `clean_up_tokenization_spaces` ("don ' t" for "don't")."""
    case = BERT_CASES[name]
    tokenizer = WordPieceTokenizer.from_directory(bert_case(name, tmp_path))
    assert tokenizer.vocabulary_size == case["vocabulary_size"]
    ids = tokenizer.encode_ids(case["texts"])
    assert ids == case["ids"]
    assert [tokenizer.decode(row) for row in ids] == case["decoded"]
    keep = [tokenizer.decode(row, skip_special_tokens=False) for row in ids]
    assert keep == case["decoded_keep_special"]


@pytest.mark.parametrize("case", BERT_DEFAULTS["cases"], ids=lambda case: case["name"])
def test_options_missing_take_the_defaults_transformers_takes(case, tmp_path):
    """Without `tokenize_chinese_chars` in tokenizer_config.json, or without the file,
    transformers 5.25 still puts spaces around each ideograph (`"the中cat"` is three
    words), lowercases, and (no file) does not clean up the decoded spaces
    (tests/data/make_hf_tokenizer_defaults.py)."""
    directory = make_case(DATA_DIR / BERT_DEFAULTS["base"], case, tmp_path / case["name"])
    tokenizer = WordPieceTokenizer.from_directory(directory)
    assert tokenizer.tokenize_chinese_chars
    assert tokenizer.vocabulary_size == case["vocabulary_size"]
    ids = tokenizer.encode_ids(BERT_DEFAULTS["texts"])
    assert ids == case["ids"]
    assert [tokenizer.decode(row) for row in ids] == case["decoded"]
    keep = [tokenizer.decode(row, skip_special_tokens=False) for row in ids]
    assert keep == case["decoded_keep_special"]


@pytest.mark.parametrize("name", ["added_tokens_json", "saved_by_transformers_5"])
def test_save_writes_the_options_and_added_tokens_it_reads_back(name, tmp_path):
    """`save` writes vocab.txt and a tokenizer_config.json in transformers' format (which
    transformers 5.25 reads to the same ids: checked by hand), so that a run or an export
    keeps what the checkpoint said; before, only vocab.txt was written."""
    case = BERT_CASES[name]
    WordPieceTokenizer.from_directory(bert_case(name, tmp_path)).save(tmp_path / "saved")
    settings = json.loads((tmp_path / "saved" / "tokenizer_config.json").read_text())
    assert settings["added_tokens_decoder"]["1305"]["content"] == "[E1]"
    assert settings["clean_up_tokenization_spaces"] is True
    reloaded = WordPieceTokenizer.from_directory(tmp_path / "saved")
    ids = reloaded.encode_ids(case["texts"])
    assert ids == case["ids"]
    assert [reloaded.decode(row) for row in ids] == case["decoded"]


def test_added_tokens_at_ids_transformers_would_not_give_are_refused(tmp_path):
    """transformers gives an added token the next id, whatever a file records; a
    checkpoint whose records disagree has embeddings at other rows than the ids."""
    directory = bert_case("added_tokens_json", tmp_path)
    (directory / "added_tokens.json").write_text(json.dumps({"[E1]": 1400}))
    with pytest.raises(ValueError, match=r"'\[E1\]' has the id 1400 .* takes 1305"):
        WordPieceTokenizer.from_directory(directory)
    (directory / "added_tokens.json").write_text(json.dumps({"[E1]": "x"}))
    with pytest.raises(ValueError, match="Cannot read the added tokens"):
        WordPieceTokenizer.from_directory(directory)


def test_tokenizer_json_gives_the_vocabulary_as_in_transformers(tmp_path, caplog):
    """transformers reads the vocabulary of tokenizer.json where there is one; a vocab.txt
    beside it that differs is named in a warning."""
    directory = bert_case("saved_by_transformers_5", tmp_path)
    vocabulary = (DATA_DIR / "hf_bert_classifier" / "vocab.txt").read_text().splitlines()
    (directory / "vocab.txt").write_text("".join(t + "\n" for t in vocabulary[:-1]))
    with caplog.at_level("WARNING", logger="transformer_zoo"):
        assert WordPieceTokenizer.from_directory(directory).vocabulary == vocabulary
    assert [r.getMessage().split(" in ")[0] for r in caplog.records] == [
        "vocab.txt and tokenizer.json"
    ]
    assert "(1304 and 1305 tokens): tokenizer.json's is read" in caplog.records[0].getMessage()


def test_added_tokens_follow_the_vocabulary_in_order():
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "cat"]
    added = [
        AddedToken("<e>", normalized=False),
        AddedToken("cat"),
        AddedToken("[E1]", special=True),
    ]
    tokenizer = WordPieceTokenizer(vocabulary, added_tokens=added)
    assert tokenizer.vocabulary_size == 8  # "cat" keeps its id
    assert tokenizer.encode_ids(["<e>cat [E1]"]) == [[2, 6, 5, 7, 3]]
    assert tokenizer.decode([2, 6, 5, 7, 3]) == "<e> cat"


def test_module_imports_neither_tensorflow_nor_keras():
    code = (
        "import sys, transformer_zoo.text.wordpiece; "
        "bad = [m for m in ('tensorflow', 'keras') if m in sys.modules]; "
        "sys.exit(f'imported {bad}' if bad else 0)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
