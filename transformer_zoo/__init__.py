"""transformer_zoo: a Keras 3 model zoo of the Transformer family."""

__version__ = "0.1.0"
