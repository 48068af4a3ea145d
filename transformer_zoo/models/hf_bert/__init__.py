"""Hugging Face BERT checkpoints: the explicit table of weight names (`names`, numpy
only), loading into `EncoderOnly` (`load`), and importing as a run directory."""

from transformer_zoo.models.hf_bert.load import import_hf_bert
from transformer_zoo.models.hf_bert.run import import_hf_run

__all__ = ["import_hf_bert", "import_hf_run"]
