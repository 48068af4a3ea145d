"""Text handling without TensorFlow or Keras: the SentencePiece tokenizer and the model
input formats, shared by training (through `transformer_zoo.train`) and ONNX serving."""

from transformer_zoo.text.formats import pair_ids, prompt_ids, source_ids
from transformer_zoo.text.tokenizer import (
    TARGET_TOKENIZER_FILE,
    TOKENIZER_FILE,
    Tokenizer,
    load_tokenizers,
    save_tokenizers,
    train_tokenizer,
)
from transformer_zoo.text.wordpiece import WordPieceTokenizer as WordPieceTokenizer

__all__ = [
    "TARGET_TOKENIZER_FILE",
    "TOKENIZER_FILE",
    "Tokenizer",
    "load_tokenizers",
    "pair_ids",
    "prompt_ids",
    "save_tokenizers",
    "source_ids",
    "train_tokenizer",
]
