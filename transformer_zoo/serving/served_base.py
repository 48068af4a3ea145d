"""`ServedBase`: what the two halves of `ServedModel` (`served_generation`,
`served_encoder`) share: the attributes `ServedModel.__init__` sets, which their methods
read, and the two checks that open most calls."""

from __future__ import annotations

from transformer_zoo.errors import InputError, with_article


class ServedBase:
    """The state both halves of `ServedModel` read, and its checks.

    Attributes (set by `ServedModel.__init__`):
        config: the directory's `RunConfig`; `family` is its `config.family`.
        dims: the model's `ModelDimensions`.
        runner: runs the graphs by name; `engine`, the `CachedEngine` over it (None for an
            encoder-only model).
        tokenizer: the tokenizer of the input (prompt, source or text), or None for an
            id-only model; `target_tokenizer`, the output's.
        max_length: the longest source or encoder input, in tokens.
        reads_pairs: whether `classify` reads text pairs (`ServedEncoder._reads_pairs`).
    """

    def _need(self, family: str, what: str) -> None:
        if self.family != family:
            raise InputError(
                f"`{what}` needs {with_article(family)} model; this one is {self.family}."
            )

    def _tokenizer(self):
        if self.tokenizer is None:
            raise InputError("This model was exported without a tokenizer: pass token ids.")
        return self.tokenizer
