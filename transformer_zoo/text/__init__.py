"""Text handling without TensorFlow or Keras: the SentencePiece and WordPiece tokenizers,
their files in a run or export directory, and the model input formats, shared by
training and serving."""

from transformer_zoo.text.files import (
    TARGET_TOKENIZER_FILE,
    TOKENIZER_FILE,
    copy_tokenizers,
    load_tokenizers,
    save_tokenizers,
)
from transformer_zoo.text.formats import is_blank, pair_ids, prompt_ids, source_ids
from transformer_zoo.text.tokenizer import Tokenizer
from transformer_zoo.text.tokenizer_training import train_tokenizer
from transformer_zoo.text.wordpiece import WordPieceTokenizer

__all__ = [
    "TARGET_TOKENIZER_FILE",
    "TOKENIZER_FILE",
    "Tokenizer",
    "WordPieceTokenizer",
    "copy_tokenizers",
    "is_blank",
    "load_tokenizers",
    "pair_ids",
    "prompt_ids",
    "save_tokenizers",
    "source_ids",
    "train_tokenizer",
]
