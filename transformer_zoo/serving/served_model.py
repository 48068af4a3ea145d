"""`ServedModel`: text in, text / vectors / labels out, over any of the three engines.

Tokenization and the input formats come from `transformer_zoo.text` (the same functions
training uses), and generation from `transformer_zoo.generation`: the one engine
(`CachedEngine`) and the search code. Only the runner differs: onnxruntime
(`OnnxRunner`), or TensorFlow (`KerasRunner`, `SavedModelRunner`).

Generative inputs longer than the model allows are rejected; encoder-only inputs are
truncated to `max_length`, as in training and as sentence-transformers does.

Its methods come in two halves, which `ServedModel` combines: `served_generation`
(`generate`, `translate` and the pieces the HTTP server's scheduler shares) and
`served_encoder` (`encode`, `embed`, `classify`), both over `served_base` (the attributes
they read, the family and tokenizer checks). The checks of its inputs live in
`input_checks`, the numpy side of an encoder-only model (feeds, pooling, class scores) in
`encoding`, and the batching of generated text with its stop strings in `text_batches`.
"""

from __future__ import annotations

from transformer_zoo.generation.engine import CachedEngine
from transformer_zoo.run_directory import ModelDimensions, RunConfig
from transformer_zoo.serving.served_encoder import ServedEncoder
from transformer_zoo.serving.served_generation import ServedGeneration


class ServedModel(ServedGeneration, ServedEncoder):
    """An exported (or trained) model behind a text interface.

    Args:
        config: the directory's `RunConfig`.
        dims: the model's `ModelDimensions`.
        runner: runs the graphs by name (`OnnxRunner`, `KerasRunner`, `SavedModelRunner`).
        tokenizer: the (source) tokenizer, or None for an id-only model.
        target_tokenizer: an encoder-decoder's target tokenizer (default: `tokenizer`).

    Attributes:
        engine: the `CachedEngine` over `runner` (None for an encoder-only model).
    """

    def __init__(
        self,
        config: RunConfig,
        dims: ModelDimensions,
        runner,
        tokenizer=None,
        target_tokenizer=None,
    ):
        self.config = config
        self.dims = dims
        self.runner = runner
        self.family = config.family
        self.engine = None
        if self.family != "encoder-only":
            self.engine = CachedEngine(runner, dims, self.family)
        self.tokenizer = tokenizer
        self.target_tokenizer = target_tokenizer or tokenizer
        self.max_length = min(config.max_length or dims.max_length, dims.max_length)
        self.reads_pairs = self._reads_pairs()
