"""Training data and the paper's recipe: built-in and user data, `tf.data` pipelines,
loss, metrics, learning-rate schedule, optimizers and evaluation."""

from transformer_zoo.train.batching import in_graph_tokenizer
from transformer_zoo.train.builtin import DatesZh
from transformer_zoo.train.evaluation import (
    accuracy,
    bleu,
    corpus_perplexity,
    exact_match,
    per_category,
)
from transformer_zoo.train.examples import ClassificationExample, PromptCompletion, TranslationPair
from transformer_zoo.train.masked_accuracy import MaskedAccuracy
from transformer_zoo.train.masked_lm import masked_lm_dataset
from transformer_zoo.train.masked_sparse_categorical_crossentropy import (
    MaskedSparseCategoricalCrossentropy,
)
from transformer_zoo.train.optimizers import adamw_cosine, paper_adam
from transformer_zoo.train.perplexity import Perplexity
from transformer_zoo.train.pipelines import (
    classification_dataset,
    language_model_dataset,
    translation_dataset,
)
from transformer_zoo.train.task import FAMILIES, Task, load_task
from transformer_zoo.train.transformer_schedule import TransformerSchedule
from transformer_zoo.train.user_data import (
    DataError,
    read_classification_tsv,
    read_text,
    read_translation_tsv,
)

__all__ = [
    "FAMILIES",
    "ClassificationExample",
    "DataError",
    "DatesZh",
    "MaskedAccuracy",
    "MaskedSparseCategoricalCrossentropy",
    "Perplexity",
    "PromptCompletion",
    "Task",
    "TransformerSchedule",
    "TranslationPair",
    "accuracy",
    "adamw_cosine",
    "bleu",
    "classification_dataset",
    "exact_match",
    "in_graph_tokenizer",
    "language_model_dataset",
    "load_task",
    "masked_lm_dataset",
    "paper_adam",
    "per_category",
    "corpus_perplexity",
    "read_classification_tsv",
    "read_text",
    "read_translation_tsv",
    "translation_dataset",
]
