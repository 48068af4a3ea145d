"""`Task`: the train/valid/test examples of one family, and what training needs to know
about them (`data.tasks.load_task` makes one).

Tokenizers per family (`Task.fit_tokenizers`):
- encoder-decoder: separate source and target vocabularies (`tokenizer.model`,
  `target_tokenizer.model`); each side keeps a small vocabulary of its own language,
  and the Chinese target of `dates-zh` is character-level;
- decoder-only and encoder-only: one shared vocabulary (`tokenizer.model`), since both
  languages flow through one embedding.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from transformer_zoo.data.examples import TextStream
from transformer_zoo.data.user_files import DataError
from transformer_zoo.text import Tokenizer, train_tokenizer

SPLIT_NAMES = {"train": "training", "valid": "validation", "test": "test"}
STREAM_WORDS = (
    "A word tokenizer cannot read a token stream: it has no newline piece, so a word and the "
    "line end after it would read as one unknown word. Train on the file's lines (--windows "
    "lines), or with --tokenizer unigram, bpe or char."
)


@dataclass(frozen=True)
class Task:
    """The examples of one family, split, with what training needs to know about them.

    Attributes:
        data: the data spec it came from (`builtin:dates-zh` or a path).
        family: `"encoder-decoder"`, `"decoder-only"` or `"encoder-only"`.
        train, valid, test: the examples (`TranslationPair`, `PromptCompletion` or
            `ClassificationExample`).
        label_names: classification label names; a label's id is its position.
        tokenizer_options: default vocabulary sizes and target model type.
        shared_targets: built-in translation tasks: per category, how many test
            targets also occur as training targets.
        pretraining: encoder-only: unlabelled texts that masked-LM pretraining reads
            besides the training split's, and that the tokenizer is trained on too.
    """

    data: str
    family: str
    train: list
    valid: list
    test: list
    label_names: tuple[str, ...] = ()
    tokenizer_options: dict = field(default_factory=dict)
    shared_targets: dict[str, int] | None = None
    pretraining: tuple[str, ...] = ()

    @property
    def stream(self) -> bool:
        """Whether the examples are token streams (`TextStream`), not lines."""
        first = next((split[0] for split in (self.train, self.valid, self.test) if split), None)
        return isinstance(first, TextStream)

    @property
    def pairs(self) -> bool:
        """Whether the training examples are text pairs (`--pairs`, an encoder-only task)."""
        return any(getattr(e, "text2", None) is not None for e in self.train)

    def check_windows(
        self,
        tokenizer: Tokenizer,
        length: int,
        splits: tuple[str, ...] = ("train", "valid", "test"),
    ) -> None:
        """Of a token-stream task: raises `DataError`, naming the file and the split,
        unless each of `splits` holds one window of `length` tokens (the model's context)
        at least; a task of lines passes.

        Raises:
            DataError: a split's text is shorter than one window.
        """
        if not self.stream:
            return
        for split in splits:
            for stream in getattr(self, split):
                count = len(stream.token_ids(tokenizer))  # kept for the pipeline
                if count < length:
                    part = f" ({stream.part})" if stream.part else ""
                    raise DataError(
                        stream.path or self.data,
                        f"the {SPLIT_NAMES[split]} text{part} holds {count} tokens, fewer than "
                        f"one window of {length}, the model's context (a longer text, or a "
                        "model trained with a shorter context, --set max_length=N, is needed)",
                    )

    def fit_tokenizers(
        self,
        vocabulary_size: int | None = None,
        target_vocabulary_size: int | None = None,
        kind: str | None = None,
        target_kind: str | None = None,
    ) -> tuple[Tokenizer, Tokenizer]:
        """`(tokenizer, target_tokenizer)` trained on the training split; the same
        object for the shared-vocabulary families. `kind` and `target_kind` are
        `text.tokenizer_training.MODEL_TYPES`, "word" taking whitespace-separated symbols
        (phones) as they are (default: unigram, and the task's target kind).

        A tokenizer whose pieces make the text the model writes (the target tokenizer,
        the decoder-only one) keeps every character of its training text ("identity"
        normalization): NFKC would make a Chinese target's `，` a `,` that no reference
        holds. The source and encoder-only tokenizers, which only read, keep NFKC.

        Raises:
            ValueError: a word tokenizer for a token stream: SentencePiece's word model
                has no newline piece, so a word and the line end after it would read as
                one unknown word.
        """
        options = self.tokenizer_options
        size = vocabulary_size or options["vocabulary_size"]
        kind = kind or "unigram"
        if self.stream and kind == "word":
            raise ValueError(STREAM_WORDS)
        if self.family == "encoder-decoder":
            source = train_tokenizer([e.source for e in self.train], size, model_type=kind)
            target = train_tokenizer(
                [e.target for e in self.train],
                target_vocabulary_size or options["target_vocabulary_size"],
                model_type=target_kind or options["target_model_type"],
                normalization="identity",
            )
            return source, target
        if self.stream:
            lines = [line for e in self.train for line in e.text.split("\n")]
            shared = train_tokenizer(lines, size, model_type=kind, normalization="verbatim")
            return shared, shared
        if self.family == "decoder-only":
            texts = [e.prompt for e in self.train] + [e.completion for e in self.train]
            shared = train_tokenizer(texts, size, model_type=kind, normalization="identity")
            return shared, shared
        texts = [e.text for e in self.train] + [e.text2 for e in self.train if e.text2]
        shared = train_tokenizer(texts + list(self.pretraining), size, model_type=kind)
        return shared, shared
