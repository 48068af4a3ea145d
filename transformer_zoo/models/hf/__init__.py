"""Hugging Face checkpoints ↔ our models, through one mechanism (`weights`: explicit tables
of weight names with invertible layout transforms) and one table per architecture:
BERT → `EncoderOnly` (`bert`), GPT-2 → `DecoderOnly` (`gpt2`), Marian → `EncoderDecoder`
(`marian`). `run` imports a checkpoint directory as a run directory."""

from transformer_zoo.models.hf.bert import import_hf_bert
from transformer_zoo.models.hf.gpt2 import import_hf_gpt2
from transformer_zoo.models.hf.marian import import_hf_marian

__all__ = ["import_hf_bert", "import_hf_gpt2", "import_hf_marian"]
