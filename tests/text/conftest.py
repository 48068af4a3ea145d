"""The generated examples and tokenizers of tests/data, shared with the tokenizer tests."""

from tests.data.conftest import dates, shared_tokenizer, source_tokenizer, target_tokenizer

__all__ = ["dates", "shared_tokenizer", "source_tokenizer", "target_tokenizer"]
