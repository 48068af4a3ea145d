"""The SentencePiece tokenizer: special ids, files, and identical ids in-graph
(keras-hub / TensorFlow Text) and without TensorFlow (sentencepiece)."""

import io
import os
import subprocess
import sys
import unicodedata

import numpy as np
import pytest
import sentencepiece as spm
import tensorflow as tf

from transformer_zoo.data.bucketing import in_graph_tokenizer, tokenize_columns
from transformer_zoo.text import (
    TARGET_TOKENIZER_FILE,
    TOKENIZER_FILE,
    Tokenizer,
    load_tokenizers,
    save_tokenizers,
    train_tokenizer,
)
from transformer_zoo.text.tokenizer_training import HAN

# Chinese outside the training text, accents precomposed and combining, full-width forms
# that NFKC normalizes, an emoji, whitespace runs and the empty string.
TRICKY_TEXTS = [
    "北京欢迎你，二〇二一年三月五日。",
    "Café naïve résumé Ångström façade",
    "Cafe\u0301 nai\u0308ve",
    "ＡＢＣ１２３（全角）",
    "Ça coûte 1 234,56 € — déjà vu 🙂",
    "  two   spaces  ",
    "",
    "下午三点十五分 quarter past three",
]
# What NFKC changes (`，` → `,`, `２` → `2`, `ﬁ` → `fi`), and what a Chinese target is
# made of: full-width punctuation and digits, curly quotes, a ligature, a run of spaces.
FULL_WIDTH_TEXTS = [
    "你好，世界！",
    "今天是星期五，天气很好。",
    "他说：“我们走吧？”",
    "２０２１年３月５日",
    "ﬁve  o'clock",
]


def _graph_ids(tokenizer, texts):
    """Ids from the keras-hub tokenizer inside a `tf.function`, and the same through the
    pipelines' `tf.data` tokenization step (which must agree)."""
    ragged = tf.function(in_graph_tokenizer(tokenizer))(tf.constant(texts))
    ids = [list(row) for row in ragged.to_list()]
    data = tokenize_columns({"text": texts}, {"text": tokenizer})
    assert [list(e["text"].numpy()) for e in data] == ids
    return ids


def test_special_ids_are_pad_0_unk_1_bos_2_eos_3_mask_4(shared_tokenizer):
    assert shared_tokenizer.special_ids == {"pad": 0, "unk": 1, "bos": 2, "eos": 3, "mask": 4}
    pieces = [shared_tokenizer.id_to_piece(i) for i in range(5)]
    assert pieces == ["<pad>", "<unk>", "<s>", "</s>", "<mask>"]


def test_in_graph_and_sentencepiece_ids_are_identical_on_the_builtin_data(
    dates, source_tokenizer, target_tokenizer, shared_tokenizer
):
    pairs = dates.pairs("test") + dates.pairs("valid")
    for tokenizer, texts in [
        (source_tokenizer, [p.source for p in pairs]),
        (target_tokenizer, [p.target for p in pairs]),
        (shared_tokenizer, [p.source for p in pairs] + [p.target for p in pairs]),
    ]:
        assert _graph_ids(tokenizer, texts) == tokenizer.encode(texts)


@pytest.mark.parametrize("name", ["source", "target", "shared"])
def test_in_graph_and_sentencepiece_ids_are_identical_on_chinese_and_accented_text(name, request):
    tokenizer = request.getfixturevalue(f"{name}_tokenizer")
    assert _graph_ids(tokenizer, TRICKY_TEXTS) == tokenizer.encode(TRICKY_TEXTS)


def test_ids_match_a_tokenizer_trained_on_chinese_and_accented_text():
    texts = TRICKY_TEXTS * 3 + ["Crème brûlée à la française", "我们明天下午三点见面"]
    tokenizer = train_tokenizer(texts, 60)
    assert _graph_ids(tokenizer, texts) == tokenizer.encode(texts)
    assert all(1 not in ids for ids in tokenizer.encode(texts))  # full character coverage


def test_full_character_coverage_keeps_every_training_character(dates, target_tokenizer):
    targets = [p.target for p in dates.pairs("train")]
    characters = set("".join(targets))
    assert all(target_tokenizer.piece_to_id(c) > 4 for c in characters)
    assert all(1 not in ids for ids in target_tokenizer.encode(targets))


def test_decode_inverts_encode_and_stops_at_eos(dates, source_tokenizer, target_tokenizer):
    for pair in dates.pairs("valid"):
        assert source_tokenizer.decode(source_tokenizer.encode(pair.source)) == pair.source
        ids = target_tokenizer.encode(pair.target, add_bos=True, add_eos=True)
        assert ids[0] == 2 and ids[-1] == 3
        assert target_tokenizer.decode(ids + [5, 6, 0, 0]) == pair.target
    with pytest.raises(ValueError, match="lie in"):
        target_tokenizer.decode([target_tokenizer.vocabulary_size])


def test_training_is_deterministic(dates):
    texts = [p.source for p in dates.pairs("train")]
    assert train_tokenizer(texts, 200).proto == train_tokenizer(texts, 200).proto


def test_small_corpus_gives_fewer_pieces_instead_of_an_error():
    tokenizer = train_tokenizer(["abc abd"], 1000)
    assert 5 < tokenizer.vocabulary_size < 1000


def test_split_digits_makes_every_digit_one_piece(source_tokenizer):
    pieces = [source_tokenizer.id_to_piece(i) for i in source_tokenizer.encode("2021-03-05 1,234")]
    assert all(len(p.strip("▁")) == 1 for p in pieces if any(c.isdigit() for c in p))


def test_saved_file_loads_to_the_same_ids_and_leaves_no_temporary(tmp_path, shared_tokenizer):
    path = tmp_path / TOKENIZER_FILE
    shared_tokenizer.save(path)
    assert os.listdir(tmp_path) == [TOKENIZER_FILE]
    loaded = Tokenizer.load(path)
    assert loaded.encode(TRICKY_TEXTS) == shared_tokenizer.encode(TRICKY_TEXTS)
    # The file is a plain SentencePiece model: the library reads it directly.
    processor = spm.SentencePieceProcessor(model_file=str(path))
    assert processor.encode(TRICKY_TEXTS) == shared_tokenizer.encode(TRICKY_TEXTS)


def test_tokenizer_files_are_shared_or_separate(tmp_path, source_tokenizer, target_tokenizer):
    save_tokenizers(tmp_path, source_tokenizer, target_tokenizer)
    assert sorted(os.listdir(tmp_path)) == sorted([TOKENIZER_FILE, TARGET_TOKENIZER_FILE])
    source, target = load_tokenizers(tmp_path)
    assert (source.proto, target.proto) == (source_tokenizer.proto, target_tokenizer.proto)
    save_tokenizers(tmp_path, source_tokenizer)  # now shared: the stale target file goes
    assert os.listdir(tmp_path) == [TOKENIZER_FILE]
    source, target = load_tokenizers(tmp_path)
    assert source is target


def test_copying_tokenizer_files_refuses_a_missing_one_before_copying_any(
    tmp_path, source_tokenizer
):
    """`copy_tokenizers` had skipped a missing file: an export's config named
    tokenizer.model, which was never written, and loading it failed later."""
    from transformer_zoo.errors import ModelDirectoryError
    from transformer_zoo.text import copy_tokenizers

    run, out = tmp_path / "run", tmp_path / "out"
    run.mkdir()
    out.mkdir()
    save_tokenizers(run, source_tokenizer)
    names = [TOKENIZER_FILE, TARGET_TOKENIZER_FILE]
    with pytest.raises(
        ModelDirectoryError, match=f"lacks the tokenizer file\\(s\\) {TARGET_TOKENIZER_FILE}"
    ):
        copy_tokenizers(run, out, names)
    assert os.listdir(out) == []
    with pytest.raises(ModelDirectoryError, match="is not a directory"):
        copy_tokenizers(tmp_path / "nowhere", out, names)
    copy_tokenizers(run, out, [TOKENIZER_FILE])
    assert os.listdir(out) == [TOKENIZER_FILE]


def test_a_model_with_other_special_ids_is_rejected():
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(["hello world"] * 10),
        model_writer=model,
        vocab_size=12,
        minloglevel=2,
    )
    with pytest.raises(ValueError, match="special ids"):
        Tokenizer(model.getvalue())


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"vocabulary_size": 3}, "vocabulary_size"),
        ({"vocabulary_size": 50, "model_type": "bytes"}, "model_type"),
        ({"vocabulary_size": 50, "character_coverage": 0}, "character_coverage"),
        ({"vocabulary_size": 50, "normalization": "nfc"}, "normalization"),
    ],
)
def test_bad_training_arguments_are_rejected(kwargs, match):
    with pytest.raises(ValueError, match=match):
        train_tokenizer(["some text"], **kwargs)


def test_empty_training_text_is_rejected():
    with pytest.raises(ValueError, match="no non-empty"):
        train_tokenizer(["", "  "], 50)


def test_text_package_imports_neither_tensorflow_nor_keras():
    code = (
        "import sys, transformer_zoo.text, transformer_zoo.text.formats; "
        "bad = [m for m in ('tensorflow', 'keras') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_mask_id_is_none_without_a_mask_piece():
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(["hello world"] * 10),
        model_writer=model,
        vocab_size=12,
        pad_id=0,
        unk_id=1,
        bos_id=2,
        eos_id=3,
        minloglevel=2,
    )
    assert Tokenizer(model.getvalue()).mask_id is None
    assert np.asarray(Tokenizer(model.getvalue()).encode("hello")).dtype.kind == "i"


def test_every_han_character_is_a_piece_of_its_own(dates, shared_tokenizer):
    pieces = [shared_tokenizer.id_to_piece(i) for i in range(shared_tokenizer.vocabulary_size)]
    assert all(len(HAN.findall(p)) <= 1 for p in pieces)
    target = dates.pairs("test")[0].target
    encoded = [shared_tokenizer.id_to_piece(i) for i in shared_tokenizer.encode(target)]
    assert "".join(encoded).lstrip("▁") == target and all(len(p.lstrip("▁")) <= 1 for p in encoded)
    merged = train_tokenizer([p.target for p in dates.pairs("train")] * 3, 300, split_han=False)
    assert any(len(HAN.findall(merged.id_to_piece(i))) > 1 for i in range(merged.vocabulary_size))


@pytest.mark.parametrize("normalization", ["nfkc", "identity", "verbatim"])
def test_characters_found_only_in_very_long_lines_are_learnt(normalization):
    """SentencePiece skipped sentences over 4,192 bytes: their characters became <unk>, and
    a text of long lines only failed to train at all."""
    long_line = " ".join(["naïve épée"] * 1000)  # 11,000 characters
    for texts in ([long_line] * 3, ["a short line"] * 20 + [long_line]):
        tokenizer = train_tokenizer(texts, 40, normalization=normalization)
        ids = tokenizer.encode("naïve épée")
        assert tokenizer.unk_id not in ids
        assert tokenizer.decode(ids) == "naïve épée"


def _fed_to_sentencepiece(monkeypatch, text: str) -> tuple[list[str], Tokenizer]:
    """The sentences SentencePiece's trainer read while `train_tokenizer([text])` ran."""
    fed, train = [], spm.SentencePieceTrainer.train

    def recording(sentence_iterator, **kwargs):
        fed.extend(sentence_iterator)
        return train(sentence_iterator=iter(fed), **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(spm.SentencePieceTrainer, "train", recording)
        return fed, train_tokenizer([text], 40)


def test_a_long_text_is_read_whole_in_pieces_cut_before_a_space(monkeypatch):
    """SentencePiece reads a long text in pieces of at most 4,096 characters (its limit is
    in bytes): each as long as it can be without cutting a word, cut before the last
    space of its second half, else (no space there) at 4,096 characters. The pieces put
    back together are the text, so a character that only the last piece holds is learnt."""
    rng = np.random.default_rng(0)
    words = ["".join(rng.choice(list("abcdefgh"), rng.integers(1, 10))) for _ in range(2000)]
    text = " ".join(words) + " ж"
    fed, tokenizer = _fed_to_sentencepiece(monkeypatch, text)
    assert "".join(fed) == text and len(fed) >= 3
    start = 0
    for piece in fed[:-1]:
        end = start + len(piece)
        assert 4096 // 2 <= len(piece) <= 4096 and text[end] == " "
        assert " " not in text[end + 1 : start + 4096]  # the last space that fits
        start = end
    assert len(fed[-1]) <= 4096 and tokenizer.unk_id not in tokenizer.encode("ж")
    # No space: cut at 4,096 characters; spaces only in the first half: the same.
    for text in ("abcdefgh" * 1300 + "ж", "ab " * 600 + "x" * 7000):
        fed, _ = _fed_to_sentencepiece(monkeypatch, text)
        assert "".join(fed) == text
        assert [len(piece) for piece in fed] == [4096, 4096, len(text) - 2 * 4096]
    fed, _ = _fed_to_sentencepiece(monkeypatch, "ab " * 1365 + "a")  # 4,096 characters
    assert fed == ["ab " * 1365 + "a"]


def test_a_sentencepiece_failure_is_a_one_line_value_error(monkeypatch):
    def fail(**kwargs):
        raise RuntimeError("Internal: src/trainer_interface.cc(661) [!sentences_.empty()]\nmore")

    monkeypatch.setattr(spm.SentencePieceTrainer, "train", fail)
    with pytest.raises(ValueError) as error:
        train_tokenizer(["some text"], 40)
    assert str(error.value) == (
        "SentencePiece cannot train a tokenizer on this text: Internal: "
        "src/trainer_interface.cc(661) [!sentences_.empty()]"
    )


@pytest.mark.parametrize("normalization", ["identity", "verbatim"])
@pytest.mark.parametrize("model_type", ["unigram", "bpe", "char"])
def test_identity_normalizations_keep_tabs_as_characters_of_their_own(model_type, normalization):
    """The identity normalization keeps a tab (NFKC makes it a space): the vocabulary
    must grow to hold it, as it does for every other character."""
    texts = ["a\tb c\td e", "f\tg h"]
    tokenizer = train_tokenizer(texts, 6, model_type=model_type, normalization=normalization)
    for text in texts:
        ids = tokenizer.encode(text)
        assert tokenizer.unk_id not in ids and tokenizer.decode(ids) == text
    pieces = {c.replace(" ", "▁") for c in "".join(texts)}
    assert all(tokenizer.piece_to_id(p) != tokenizer.unk_id for p in pieces)


def test_a_tuple_of_texts_encodes_as_the_list_does(shared_tokenizer):
    texts = ("March 5, 2021", "2021年3月5日")
    expected = spm.SentencePieceProcessor(model_proto=shared_tokenizer.proto).encode(list(texts))
    assert shared_tokenizer.encode(texts) == shared_tokenizer.encode(list(texts)) == expected


@pytest.mark.parametrize("model_type", ["unigram", "bpe", "char", "word"])
def test_identity_normalization_gives_back_every_character_with_spaces_collapsed(model_type):
    """What a model writes through this tokenizer can be the reference: full-width
    punctuation and digits and ligatures come back as they went in (in-graph too, as the
    training pipelines tokenize); only runs of spaces are collapsed."""
    tokenizer = train_tokenizer(
        FULL_WIDTH_TEXTS * 5, 40, model_type=model_type, normalization="identity"
    )
    for text in FULL_WIDTH_TEXTS + ["  ﬁve   o'clock "]:
        ids = tokenizer.encode(text)
        assert tokenizer.unk_id not in ids
        assert tokenizer.decode(ids) == " ".join(text.split())
    assert _graph_ids(tokenizer, FULL_WIDTH_TEXTS) == tokenizer.encode(FULL_WIDTH_TEXTS)


def test_nfkc_normalization_stays_the_default_for_text_a_model_only_reads():
    tokenizer = train_tokenizer(FULL_WIDTH_TEXTS * 5, 40)
    for text in FULL_WIDTH_TEXTS:
        expected = " ".join(unicodedata.normalize("NFKC", text).split())
        assert tokenizer.decode(tokenizer.encode(text)) == expected


def test_a_word_vocabulary_too_small_for_its_words_says_how_many_become_unk(caplog):
    """`--target-tokenizer word --target-vocabulary-size 30` kept 25 of 39 phones and
    encoded the others as <unk> without a word."""
    import itertools

    words = ["".join(p) for n in (2, 3) for p in itertools.product("ab", repeat=n)]  # 12
    texts = [" ".join(words[i : i + 4]) for i in range(0, 12, 2)] * 3
    with caplog.at_level("WARNING", logger="transformer_zoo.text.tokenizer_training"):
        small = train_tokenizer(texts, 10, model_type="word", normalization="identity")
    unknown = [w for w in words if small.encode(w) == [small.special_ids["unk"]]]
    assert len(unknown) == 7  # 10 pieces: 5 special, 5 words
    assert "keeps the 5 most frequent of the text's 12 distinct words" in caplog.text
    assert "the other 7 read as <unk>" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="transformer_zoo.text.tokenizer_training"):
        whole = train_tokenizer(texts, 40, model_type="word", normalization="identity")
    assert caplog.text == ""
    assert all(whole.encode(w) != [whole.special_ids["unk"]] for w in words)


def test_a_word_tokenizer_refuses_the_verbatim_normalization():
    """SentencePiece's word model ignores the newline piece: on a token stream
    `sat\\non` was one unknown word, and every line end went into <unk>, silently."""
    with pytest.raises(ValueError, match='"word" tokenizer has no newline piece'):
        train_tokenizer(
            ["the cat\nsat on", "the mat"], 50, model_type="word", normalization="verbatim"
        )


# Every character `str.split()` splits at: a tab, no-break and ideographic spaces, the
# line and paragraph separators, the information separators.
WORD_SPACE_TEXTS = [
    "AH0\tB\tK",
    "K\u00a0AE1\u3000T",
    "D\u2028AO1\u2029G",
    "B\x1cIH1\x1fG  AH0",
    "\u2003S\u202fIH1\u205fT\x0b",
]


def test_a_word_tokenizer_without_nfkc_splits_at_every_whitespace_character():
    """Under the identity normalization the word model split at ASCII spaces only:
    `AH0\\tB\\tK` was one word, and so were words joined by U+00A0 or U+3000. The
    in-graph tokenizer reads the rule in the model and gives the same ids; full-width
    forms are still kept (no NFKC)."""
    texts = WORD_SPACE_TEXTS + ["２０２１ ，"]
    tokenizer = train_tokenizer(texts * 3, 40, model_type="word", normalization="identity")
    words = {w for text in texts for w in text.split()}
    pieces = {tokenizer.id_to_piece(i) for i in range(5, tokenizer.vocabulary_size)}
    assert pieces == {"▁" + w for w in words}
    for text in texts:
        ids = tokenizer.encode(text)
        assert tokenizer.unk_id not in ids and len(ids) == len(text.split())
        assert tokenizer.decode(ids) == " ".join(text.split())
    assert _graph_ids(tokenizer, texts) == tokenizer.encode(texts)
    # The rule's temporary file leaves no trace: the same text trains the same bytes.
    again = train_tokenizer(texts * 3, 40, model_type="word", normalization="identity")
    assert again.proto == tokenizer.proto and b"word_spaces.tsv" not in tokenizer.proto


@pytest.mark.parametrize(
    "normalization, texts",
    [
        ("identity", ["AH0\tB\tK", "K\u00a0AE1"]),  # one word each, before the rule
        ("nfkc", ["x\x0by z", "x\x1cy z"]),  # NFKC drops these: xy is one word
    ],
)
def test_the_words_cut_are_counted_as_the_tokenizer_splits_them(caplog, normalization, texts):
    """`str.split()` counted words that the tokenizer did not split (or split where it
    did not): a vocabulary holding every word warned that some were cut."""
    with caplog.at_level("WARNING", logger="transformer_zoo.text.tokenizer_training"):
        tokenizer = train_tokenizer(texts * 3, 40, model_type="word", normalization=normalization)
    assert all(tokenizer.unk_id not in ids for ids in tokenizer.encode(texts))
    assert caplog.text == ""


@pytest.mark.parametrize(
    "texts, match",
    [
        ("hello world", "a list of strings.*Received: a single str"),
        (b"hello world", "a list of strings.*Received: a single bytes"),
        (["hello", None], r"texts\[1\] of type NoneType"),
        (iter(["hello", b"world"]), r"texts\[1\] of type bytes"),
    ],
)
def test_texts_that_are_not_a_list_of_strings_are_refused(texts, match):
    """A bare string trained on its single characters, silently."""
    with pytest.raises(ValueError, match=match):
        train_tokenizer(texts, 50)


@pytest.mark.parametrize("normalization", ["nfkc", "identity", "verbatim"])
def test_a_text_of_zero_width_and_control_characters_only_is_empty(normalization):
    """SentencePiece failed with `INTERNAL: ... all_chars_count > 0` (NFKC), or trained
    a tokenizer of nothing but them."""
    with pytest.raises(ValueError, match="holds no non-empty sentence"):
        train_tokenizer(
            ["\u200b", "\x7f\x7f", " \x01 ", "\ufeff\u00ad"], 50, normalization=normalization
        )


def test_a_numpy_integer_vocabulary_size_is_an_integer():
    tokenizer = train_tokenizer(["some text here"] * 3, np.int64(40))
    assert tokenizer.decode(tokenizer.encode("some text")) == "some text"
    with pytest.raises(ValueError, match="vocabulary_size"):
        train_tokenizer(["some text"], 40.0)


def test_bytes_or_a_file_that_are_no_sentencepiece_model_are_named_so(tmp_path):
    """A RuntimeError with SentencePiece's C++ parser message, naming no file."""
    with pytest.raises(ValueError, match="`proto` is not a SentencePiece model"):
        Tokenizer(b"garbage")
    path = tmp_path / "tokenizer.model"
    path.write_bytes(b"garbage")
    with pytest.raises(ValueError, match=f"^{path}: `proto` is not a SentencePiece model"):
        Tokenizer.load(path)
    path.write_bytes(b"")
    with pytest.raises(ValueError, match=f"^{path}: the file is empty"):
        Tokenizer.load(path)


def test_decode_refuses_ids_that_are_not_integers(shared_tokenizer):
    """`decode([1.5])` read id 1, silently."""
    ids = shared_tokenizer.encode("March 5")
    assert shared_tokenizer.decode(np.asarray(ids, np.int32)) == shared_tokenizer.decode(ids)
    for bad in ([ids[0], 1.5], np.asarray(ids, np.float32)):
        with pytest.raises(ValueError, match="`ids` must be integers"):
            shared_tokenizer.decode(bad)
