"""The in-graph WordPiece (keras-hub) against the reference ids and the TF-free tokenizer."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.helpers import WORDPIECE_EDGE_CASES as EDGE_CASES
from tests.helpers import minilm_dir, minilm_reference
from transformer_zoo.text.wordpiece import WordPieceTokenizer
from transformer_zoo.train import wordpiece_unicode
from transformer_zoo.train.wordpiece import WordPiecePreprocessor


@pytest.fixture(scope="module")
def tokenizer():
    return WordPieceTokenizer.from_directory(minilm_dir())


@pytest.fixture(scope="module")
def preprocessor():
    return WordPiecePreprocessor.from_directory(minilm_dir())


def unpadded(outputs):
    ids, mask = outputs["token_ids"].numpy(), outputs["padding_mask"].numpy()
    return [row[m].tolist() for row, m in zip(ids, mask, strict=True)]


def test_ids_equal_the_sentence_transformers_reference(preprocessor):
    sentences, reference_ids, _ = minilm_reference()
    assert unpadded(preprocessor(tf.constant(sentences))) == reference_ids


def test_ids_equal_the_tf_free_tokenizer_on_edge_cases(preprocessor, tokenizer):
    assert unpadded(preprocessor(tf.constant(EDGE_CASES))) == tokenizer.encode_ids(EDGE_CASES)


def test_invalid_utf8_is_read_as_replacement_characters(preprocessor, tokenizer):
    got = unpadded(preprocessor(tf.constant([b"caf\xc3 ok\xff\xfe"])))
    assert got == tokenizer.encode_ids(["caf\ufffd ok\ufffd\ufffd"])


def per_code_point_texts(code_points):
    # "a{c}b" shows whether c is deleted, a space, punctuation or a CJK character (word
    # boundaries); " {c}X" whether it is lower-cased or stripped into the vocabulary.
    return [f"a{chr(c)}b {chr(c)}X" for c in code_points]


def assert_same_on_code_points(preprocessor, tokenizer, code_points):
    texts = per_code_point_texts(code_points)
    expected = [ids[1:-1] for ids in tokenizer.encode_ids(texts)]
    got = []
    for start in range(0, len(texts), 65536):
        got += preprocessor.tokenize(tf.constant(texts[start : start + 65536])).to_list()
    bad = [hex(c) for c, e, g in zip(code_points, expected, got, strict=True) if e != g]
    assert not bad, f"{len(bad)} code points differ: {bad[:20]}"


def valid_code_points(stop=0x110000, step=1):
    return [c for c in range(0, stop, step) if not 0xD800 <= c < 0xE000]


def test_ids_equal_the_tf_free_tokenizer_for_a_sample_of_code_points(preprocessor, tokenizer):
    # Latin to Hangul Jamo in full, then every 61st code point of Unicode.
    sample = valid_code_points(0x1200) + valid_code_points(step=61)[80:]
    assert_same_on_code_points(preprocessor, tokenizer, sample)


@pytest.mark.slow
def test_ids_equal_the_tf_free_tokenizer_for_every_code_point(preprocessor, tokenizer):
    assert_same_on_code_points(preprocessor, tokenizer, valid_code_points())


SMALL_VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "##s", "world", "!", "a"]


def test_output_is_packed_to_sequence_length_with_a_padding_mask():
    preprocessor = WordPiecePreprocessor(SMALL_VOCABULARY, sequence_length=6)
    texts = ["Hellos world!", "a", "a a a a a a a"]
    out = preprocessor(tf.constant(texts))
    assert out["token_ids"].dtype == tf.int32 and out["padding_mask"].dtype == tf.bool
    expected = WordPieceTokenizer(SMALL_VOCABULARY).encode(texts, 6, pad_to_max_length=True)
    np.testing.assert_array_equal(out["token_ids"], expected["input_ids"])
    np.testing.assert_array_equal(out["padding_mask"], expected["attention_mask"] == 1)
    assert out["token_ids"].numpy()[2].tolist() == [2, 9, 9, 9, 9, 3]  # truncated, [SEP] kept


def test_runs_inside_a_tf_data_map(preprocessor):
    sentences, reference_ids, _ = minilm_reference()
    data = tf.data.Dataset.from_tensor_slices(sentences).batch(8).map(preprocessor)
    got = [ids for batch in data for ids in unpadded(batch)]
    assert got == reference_ids


def test_config_and_keras_file_round_trips_give_identical_ids(tmp_path):
    preprocessor = WordPiecePreprocessor(SMALL_VOCABULARY, sequence_length=8)
    texts = tf.constant(["Hellos world!", "[MASK] x", ""])
    expected = preprocessor(texts)["token_ids"]
    clone = WordPiecePreprocessor.from_config(preprocessor.get_config())
    np.testing.assert_array_equal(clone(texts)["token_ids"], expected)
    inputs = keras.Input(shape=(), dtype="string")
    keras.Model(inputs, preprocessor(inputs)).save(tmp_path / "wp.keras")
    reloaded = keras.saving.load_model(tmp_path / "wp.keras")
    np.testing.assert_array_equal(reloaded(texts)["token_ids"], expected)


def test_bad_arguments_raise_value_errors_naming_them(tokenizer):
    with pytest.raises(ValueError, match="sequence_length"):
        WordPiecePreprocessor(tokenizer.vocabulary, sequence_length=1)
    with pytest.raises(ValueError, match="inputs"):
        WordPiecePreprocessor(tokenizer.vocabulary).split_words(tf.constant([["a"]]))


def test_committed_unicode_tables_match_the_installed_tokenizers_in_the_bmp():
    derived = wordpiece_unicode.derive_tables(stop=0x10000)
    committed = wordpiece_unicode.load_tables()
    for name, values in derived.items():
        if name == "lowercase":
            expected = {c: s for c, s in committed[name].items() if c < 0x10000}
        else:
            expected = [c for c in committed[name] if c < 0x10000]
        assert values == expected, name


@pytest.mark.slow
def test_committed_unicode_tables_match_the_installed_tokenizers():
    assert wordpiece_unicode.derive_tables() == wordpiece_unicode.load_tables()
