"""Generation: the search algorithms, the one engine, and the runners it steps.

- `search`: greedy, sampling and beam search in numpy, typed strategy values
  (`Greedy`, `Sampling`, `BeamSearch`, each in its own module: `greedy`, `sampling`,
  `beam_search`; what they share in `search_common`);
- `engine.CachedEngine`: the search's engine over a runner of the step graphs;
- runners: `onnx_runner.OnnxRunner` (onnxruntime, no TensorFlow),
  `keras_runner.KerasRunner` and `saved_model_runner.SavedModelRunner` (TensorFlow);
- `graphs`: the step graphs themselves (what the exporters write);
- `reference.UncachedEngine`: full recomputation, the reference tests hold the engine to;
- `generate(model, ...)`: the Keras model through `KerasRunner` and the engine.

Importing this package (or `search`, `greedy`, `sampling`, `beam_search`,
`search_common`, `engine`, `alignment`, `inputs`, `onnx_runner`, `onnx_greedy`, `runners`)
does not import TensorFlow, so the TensorFlow-free serving runtime builds on it; the
Keras names below load TensorFlow on first use.
"""

# The engines a directory can be served with (`runners.open_runner`).
ENGINES = ("onnx", "keras", "saved_model")
# Texts that `ServedModel.generate` and `translate` decode together (`--batch-size`). A
# file of thousands of inputs is not one batch: `transformer-zoo translate` of 12,000 G2P
# words took 77 s and 14 GB as one batch, 12 s and 189 MB in batches of 64.
GENERATION_BATCH_SIZE = 64
# The new tokens `ServedModel.generate` and `transformer-zoo generate` decode when no
# `max_new_tokens` is given, cut to the room each prompt leaves in the context.
DEFAULT_NEW_TOKENS = 32

from transformer_zoo.generation.beam_search import BeamSearch  # noqa: E402
from transformer_zoo.generation.greedy import Greedy  # noqa: E402
from transformer_zoo.generation.sampling import Sampling  # noqa: E402
from transformer_zoo.generation.search import STRATEGIES  # noqa: E402
from transformer_zoo.generation.search_common import SearchResult  # noqa: E402

_KERAS = {
    "generate": "transformer_zoo.generation.decoding",
    "KerasRunner": "transformer_zoo.generation.keras_runner",
    "SavedModelRunner": "transformer_zoo.generation.saved_model_runner",
    "UncachedEngine": "transformer_zoo.generation.reference",
}

__all__ = ["ENGINES", "STRATEGIES", "BeamSearch", "Greedy", "Sampling", "SearchResult", *_KERAS]


def __getattr__(name: str):
    if name in _KERAS:
        import importlib

        return getattr(importlib.import_module(_KERAS[name]), name)
    raise AttributeError(f"module 'transformer_zoo.generation' has no attribute {name!r}")
