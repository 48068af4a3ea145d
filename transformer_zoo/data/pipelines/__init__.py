"""`tf.data` pipelines, one per model family: tokenize in-graph, truncate to the model's
maximum, bucket by length, pad each batch with 0, prefetch.

Every pipeline yields Keras-ready `(inputs, labels, sample_weight)` batches whose input
keys match the models; padding masks are `token_ids != 0` as int32 1/0. Label id 0 marks a position
that is not trained on (padding, or a prompt token), and `sample_weight` is
`labels != 0`, so padding stays out of the loss whether the loss reads the labels
(`MaskedSparseCategoricalCrossentropy`) or the weights (any Keras loss). The token layout
is the one of `transformer_zoo.text.formats`, which generation and serving use.

One module per kind of data: `translation` (`translation_dataset`, for `EncoderDecoder`),
`language_model` (`language_model_dataset` and `stream_dataset`, for `DecoderOnly`),
`classification` (`classification_dataset`, for `EncoderOnlyClassifier`); `common` holds
what they share (the checks, `padding_mask`, `packed_pairs`). The masked LM's pipeline is
`transformer_zoo.data.masked_lm`.
"""

from transformer_zoo.data.pipelines.classification import classification_dataset
from transformer_zoo.data.pipelines.common import packed_pairs
from transformer_zoo.data.pipelines.language_model import language_model_dataset, stream_dataset
from transformer_zoo.data.pipelines.translation import translation_dataset

__all__ = [
    "classification_dataset",
    "language_model_dataset",
    "packed_pairs",
    "stream_dataset",
    "translation_dataset",
]
