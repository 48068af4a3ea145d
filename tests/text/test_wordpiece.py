"""The TensorFlow-free WordPiece tokenizer against the ids sentence-transformers recorded."""

import json
import subprocess
import sys

import numpy as np
import pytest
from tokenizers import Tokenizer

from tests.helpers import WORDPIECE_EDGE_CASES as EDGE_CASES
from tests.helpers import minilm_dir, minilm_reference
from transformer_zoo.text.wordpiece import WordPieceTokenizer


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


def test_module_imports_neither_tensorflow_nor_keras():
    code = (
        "import sys, transformer_zoo.text.wordpiece; "
        "bad = [m for m in ('tensorflow', 'keras') if m in sys.modules]; "
        "sys.exit(f'imported {bad}' if bad else 0)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
