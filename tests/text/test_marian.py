"""Marian's tokenizer against transformers 5.25's `MarianTokenizer` on the special tokens
typed in a text and on typographic punctuation (tests/data/hf_tokenizer_reference.json,
on the tests/data/hf_marian checkpoint)."""

from tests.data.hf_tokenizer_cases import reference
from tests.helpers import DATA_DIR
from transformer_zoo.text.formats import source_ids
from transformer_zoo.text.marian import MarianTokenizer

MARIAN = reference()["marian"]


def test_special_tokens_typed_in_the_text_are_their_ids_as_in_transformers():
    """`</s>`, `<unk>` and `<pad>` in a text are one id each and the text around them is
    encoded part by part, on the source side and the target side. Before, they were
    encoded as characters: `'</s>'` gave [2, 1, 4, 1, 0] where transformers gives
    [0, 0], `'<pad> x'` [2, 1, 24, 20, 14, 1, 2, 229, 0] for [279, 2, 229, 0]."""
    source, target = MarianTokenizer.from_directory(DATA_DIR / MARIAN["base"])
    texts = MARIAN["texts"]
    assert [source_ids(source, text) for text in texts] == MARIAN["source_ids"]
    assert [ids + [target.eos_id] for ids in target.encode(texts)] == MARIAN["target_ids"]


def test_typographic_punctuation_is_not_normalised_as_in_transformers():
    """transformers 5.25's `MarianTokenizer(text)` does not run sacremoses' punctuation
    normaliser even with sacremoses installed (it was, for the reference), and neither do
    we: curly quotes and dashes keep their pieces."""
    source, _ = MarianTokenizer.from_directory(DATA_DIR / MARIAN["base"])
    text = next(t for t in MARIAN["texts"] if "\u201c" in t)
    expected = MARIAN["source_ids"][MARIAN["texts"].index(text)]
    assert MARIAN["sacremoses"] and source_ids(source, text) == expected
