"""What differs between the families in training: tokenizers, model, pipelines, loss.

`FamilySetup` gathers it for one `Task`, so that the trainer, the evaluation and the
benchmarks build the three families through one code path.
"""

from __future__ import annotations

import dataclasses
import inspect

import keras
import tensorflow as tf

from transformer_zoo.data.pipelines import (
    classification_dataset,
    language_model_dataset,
    stream_dataset,
    translation_dataset,
)
from transformer_zoo.data.task import Task
from transformer_zoo.errors import with_article
from transformer_zoo.models import EncoderOnlyClassifier
from transformer_zoo.models.presets import (
    MODEL_CLASSES,
    PRESETS,
    check_overrides,
    preset_config,
    resolve_preset,
)
from transformer_zoo.run_directory import FAMILY_TASKS
from transformer_zoo.text import Tokenizer, train_tokenizer
from transformer_zoo.text.formats import check_pair_length, uncut_rows
from transformer_zoo.text.tokenizer import PAD_ID
from transformer_zoo.train.recipe import (
    MaskedAccuracy,
    MaskedSparseCategoricalCrossentropy,
    perplexity,
)

EVAL_BATCH_SIZE = 256
# The most logits (rows × positions × vocabulary) a validation batch may hold, unless a
# training batch already holds more: 256 windows of a 256-token context over 8,000 pieces
# are 524 M floats, 2 GB, and the loss's float32 copies took a tiny model's run to 9.4 GB.
LOGITS_BUDGET = 2**26


def one_vocabulary(preset: str, overrides: dict | None = None) -> bool:
    """Whether the (resolved) `preset` with `overrides` (`--set tie_weights=all` too) ties
    all its weights, source and target embeddings and the output layer, which needs one
    vocabulary for both sides of an encoder-decoder: the run trains one shared tokenizer."""
    tie = {**PRESETS[preset]["config"], **(overrides or {})}.get("tie_weights")
    return tie == "all"


def check_model_arguments(preset: str, family: str, overrides: dict | None) -> None:
    """Runs the family constructor's own checks on the preset with `overrides`, before
    any data is read or tokenizer trained: a width the heads do not divide, no layers,
    an unknown activation and the like fail here, in one line. The vocabulary sizes are
    stand-ins (the tokenizers set them); the model built is thrown away (about a second
    for a 124M-parameter preset).

    Raises:
        ValueError: as the constructor (a TypeError, such as a list where a number is
            expected, is reported as one too).
    """
    overrides = dict(overrides or {})
    check_overrides(preset, family, overrides)
    sizes = {"vocabulary_size": 8}
    if family == "encoder-decoder":
        sizes["target_vocabulary_size"] = 8
    _, family, config = preset_config(preset, family, **overrides, **sizes)
    try:
        MODEL_CLASSES[family](**config)
    except TypeError as error:
        raise ValueError(f"--set {', '.join(sorted(overrides))}: {error}") from None


def even_batches(data: tf.data.Dataset, replicas: int) -> tf.data.Dataset:
    """Batches a multi-replica strategy can split evenly: each cut to a multiple of
    `replicas` rows (a batch with fewer is dropped), and no boolean masks (the models
    derive them from `ids != 0`, as the pipelines do).

    Keras reduces a strategy's first batch across replicas to build the model
    symbolically; that reduction fails on boolean tensors and on replicas holding
    different numbers of rows, which bucketed batches and small splits give. Rows are
    dropped rather than padded: a replica holding only padding would report a loss of 0
    and pull the mean over replicas down. The pipelines reshuffle every epoch, so a
    training example is dropped in one epoch at most by chance.
    """

    def cut(inputs, *targets):
        rows = tf.shape(targets[0])[0]
        keep = rows - rows % replicas
        kept = {k: v[:keep] for k, v in inputs.items() if v.dtype != tf.bool}
        return (kept, *(t[:keep] for t in targets))

    def not_empty(inputs, *targets):
        return tf.shape(targets[0])[0] >= replicas

    return data.filter(not_empty).map(cut, num_parallel_calls=tf.data.AUTOTUNE)


def stream_batches(windows: int, batch_size: int, replicas: int = 1) -> int:
    """The batches of one pass over `windows` windows of a token stream (full batches
    and a smaller last one), after `even_batches` where `replicas` > 1: a batch of fewer
    rows than `replicas` is dropped."""
    full, last = divmod(windows, batch_size)
    return full * (batch_size >= replicas) + (last >= max(1, replicas))


@dataclasses.dataclass
class FamilySetup:
    """The family-specific pieces of a run.

    Attributes:
        task: the examples.
        preset: the full preset name (`"tiny_encoder_decoder"`).
        tokenizer: the (source) tokenizer (a `WordPieceTokenizer` when the run starts
            from an imported BERT checkpoint).
        target_tokenizer: the target tokenizer (the same object when shared).
        overrides: constructor arguments replacing the preset's.
        windows: how a token stream is cut (`"random"` or `"epoch"`), for stream tasks.
        init: the model the run starts from (`FamilySetup.create`'s `init`): an encoder,
            a classifier (whose encoder the new classifier copies, and whose head dropout
            its fresh head takes), or a language model to fine-tune.
        init_max_length: the `max_length` of `init`'s run (its `config.json`: what
            `import-hf --max-length` or sentence-transformers' `max_seq_length` set),
            which the run keeps; None: the model's positions.
    """

    task: Task
    preset: str
    tokenizer: Tokenizer
    target_tokenizer: Tokenizer
    overrides: dict = dataclasses.field(default_factory=dict)
    windows: str = "random"
    init: keras.Model | None = None
    init_max_length: int | None = None

    @classmethod
    def create(
        cls,
        task: Task,
        preset: str,
        tokenizers: tuple[Tokenizer, Tokenizer] | None = None,
        kinds: tuple[str | None, str | None] = (None, None),
        sizes: tuple[int | None, int | None] = (None, None),
        overrides: dict | None = None,
        windows: str | None = None,
        init: str | None = None,
    ) -> FamilySetup:
        """Resolves the preset and trains the tokenizers (unless `tokenizers` are given),
        of `kinds` (source or shared, target; `text.tokenizer_training.MODEL_TYPES`) and
        vocabulary `sizes`. With `init`, a run directory (trained, or imported with
        `import-hf`), the run starts from its model and tokenizer instead: a classifier
        from an encoder-only run's encoder, a language model from a decoder-only run.

        Raises:
            ValueError: an unknown preset, or one of another family; bad `overrides`
                (`presets.check_overrides`); an `init` of another family; text the
                tokenizer cannot be trained on.
            DataError: a token stream with a split shorter than one window of the
                model's context (`Task.check_windows`).
            InputError: text pairs for a model of `max_length` 2 (`check_pair_length`).
        """
        name = resolve_preset(preset, task.family)
        overrides = dict(overrides or {})
        check_overrides(name, task.family, overrides)
        start, start_length = None, None
        if init is not None:
            start, start_length, tokenizers = _load_init(init, task.family)
        if tokenizers is None:
            if one_vocabulary(name, overrides):
                pairs = task.train
                shared = train_tokenizer(
                    [p.source for p in pairs] + [p.target for p in pairs],
                    sizes[0] or task.tokenizer_options["vocabulary_size"],
                    model_type=kinds[0] or "unigram",
                    normalization="identity",  # the target side's, as fit_tokenizers
                )
                tokenizers = (shared, shared)
            else:
                tokenizers = task.fit_tokenizers(*sizes, kind=kinds[0], target_kind=kinds[1])
        setup = cls(task, name, *tokenizers, overrides, windows or "random", start, start_length)
        task.check_windows(setup.tokenizer, setup.max_length)
        if task.pairs:
            check_pair_length(setup.max_length)
        return setup

    @property
    def family(self) -> str:
        return self.task.family

    @property
    def max_length(self) -> int:
        """The context the run trains and serves at: the `init` run's `max_length`
        (within its model's positions), or the preset's `max_length` with the overrides
        (the constructor's default where the preset has none), the context of the model
        `build_model` builds."""
        if self.init is not None:
            positions = self.backbone(self.init).max_length
            return min(self.init_max_length or positions, positions)
        _, _, config = preset_config(self.preset, self.family, **self.overrides)
        if "max_length" in config:
            return config["max_length"]
        parameters = inspect.signature(MODEL_CLASSES[self.family].__init__).parameters
        return parameters["max_length"].default

    def validation_batch_size(self, batch_size: int) -> int:
        """Rows per validation batch: `EVAL_BATCH_SIZE`, fewer where a batch of the
        model's context would hold more than `LOGITS_BUDGET` logits, but never fewer than
        the training batch's `batch_size` rows. The rows hold no more than the context;
        an encoder-only model's logits are its labels'."""
        if self.family == "encoder-only":
            return EVAL_BATCH_SIZE
        per_row = self.max_length * self.target_tokenizer.vocabulary_size
        return min(EVAL_BATCH_SIZE, max(batch_size, LOGITS_BUDGET // per_row))

    @property
    def separate_target(self) -> bool:
        return self.target_tokenizer is not self.tokenizer

    def build_model(self, dropout: float | None = None) -> keras.Model:
        """The preset's model with the `overrides`, sized to the tokenizers (under the
        current dtype policy); a copy of the `init` model when the run starts from one (a
        classifier over a copy of its encoder).

        A classifier's fresh head drops out at `dropout`, else at the `init` classifier's
        head rate (transformers' `BertForSequenceClassification` reads the checkpoint's
        `classifier_dropout` for a new head too), else at the encoder's."""
        overrides = {**self.overrides, "vocabulary_size": self.tokenizer.vocabulary_size}
        if self.family == "encoder-decoder" and self.separate_target:
            overrides["target_vocabulary_size"] = self.target_tokenizer.vocabulary_size
        if dropout is not None:
            overrides["dropout"] = float(dropout)
        if self.init is not None:
            start = self.backbone(self.init)
            config = {**start.get_config(), **overrides}
            config.pop("dtype", None)  # the current policy's
            model = type(start).from_config(config)
            model.set_weights(start.get_weights())
        else:
            _, _, config = preset_config(self.preset, self.family, **overrides)
            model = MODEL_CLASSES[self.family](**config)
        if self.family == "encoder-only":
            head_dropout = dropout
            if head_dropout is None:  # the `init` classifier's head's, else the encoder's
                from_head = isinstance(self.init, EncoderOnlyClassifier)
                head_dropout = self.init.dropout if from_head else config.get("dropout", 0.1)
            model = EncoderOnlyClassifier(
                model, num_classes=len(self.task.label_names), dropout=head_dropout
            )
        return model

    def dataset(
        self,
        split: str,
        model: keras.Model,
        batch_size: int,
        shuffle: bool = False,
        seed: int = 0,
        replicas: int = 1,
    ) -> tf.data.Dataset:
        """The `tf.data` pipeline of one split, cut to the run's `max_length`; with
        `replicas` > 1, batches made fit for a multi-replica strategy (`even_batches`).
        A token stream's pipeline knows its length (`Dataset.cardinality`); the others'
        bucketing hides it."""
        examples = getattr(self.task, split)
        options = dict(batch_size=batch_size, shuffle=shuffle, seed=seed)
        max_length = min(self.max_length, self.backbone(model).max_length)
        batches = None  # in one pass, where known without iterating
        if self.family == "encoder-decoder":
            data = translation_dataset(
                examples,
                self.tokenizer,
                self.target_tokenizer,
                max_source_length=max_length,
                max_target_length=max_length,
                **options,
            )
        elif self.task.stream:
            ids = examples[0].token_ids(self.tokenizer)  # encoded once, by `check_windows`
            windows = self.windows if split == "train" else "epoch"  # all of it, in order
            data = stream_dataset(
                ids, max_length=max_length, windows=windows, bos_id=self.tokenizer.bos_id, **options
            )
            batches = stream_batches(len(ids) // max_length, batch_size, replicas)
        elif self.family == "decoder-only":
            data = language_model_dataset(
                examples, self.tokenizer, max_length=max_length, **options
            )
        else:
            data = classification_dataset(
                examples,
                self.tokenizer,
                self.task.label_names,
                max_length=max_length,
                type_vocabulary_size=self.backbone(model).type_vocabulary_size,
                **options,
            )
        if replicas > 1:
            data = even_batches(data, replicas)
            if batches is not None:  # which even_batches' filter hides from tf.data
                data = data.apply(tf.data.experimental.assert_cardinality(batches))
        return data

    def longer_than(self, max_length: int, split: str = "train") -> int:
        """How many examples of `split` the pipelines cut to `max_length` tokens (their
        model inputs, `text.formats`, are longer)."""
        if self.task.stream:
            return 0  # windows are as long as the context
        rows = uncut_rows(
            self.family, self.tokenizer, getattr(self.task, split), self.target_tokenizer
        )
        return sum(len(ids) > max_length for ids in rows)

    def unknown_tokens(self, limit: int | None = None) -> tuple[int, int]:
        """How many tokens of the first `limit` training examples' model inputs are the
        tokenizer's `<unk>`, and how many tokens those inputs have: (0, 0) for a token
        stream, an encoder-decoder task or a tokenizer without `<unk>`."""
        unk = self.tokenizer.special_ids.get("unk")
        if unk is None or self.task.stream or self.family == "encoder-decoder":
            return 0, 0
        rows = uncut_rows(self.family, self.tokenizer, self.task.train[:limit])
        return sum(int(i == unk) for row in rows for i in row), sum(len(row) for row in rows)

    @staticmethod
    def backbone(model: keras.Model) -> keras.Model:
        """The model that holds the Transformer (a classifier's backbone)."""
        return model.backbone if isinstance(model, EncoderOnlyClassifier) else model

    def loss_and_metrics(
        self, label_smoothing: float | None = None
    ) -> tuple[keras.losses.Loss, list]:
        """The paper's smoothed (`label_smoothing`, default 0.1; 0 for a token stream),
        padding-masked loss for the generative families (windows of a token stream have
        no padding: every label counts, id 0 too); plain cross-entropy and accuracy for
        classification."""
        if self.family == "encoder-only":
            loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
            return loss, [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
        if label_smoothing is None:
            label_smoothing = 0.0 if self.task.stream else 0.1
        pad_id = None if self.task.stream else PAD_ID
        loss = MaskedSparseCategoricalCrossentropy(label_smoothing=label_smoothing, pad_id=pad_id)
        return loss, [MaskedAccuracy(pad_id=pad_id), perplexity(pad_id)]

    @property
    def task_name(self) -> str:
        return FAMILY_TASKS[self.family][0]  # what `train` trains each family for


def _load_init(directory: str, family: str) -> tuple[keras.Model, int, tuple]:
    """The model a run of `family` starts from, its run's `max_length` and its
    tokenizers: the model of an encoder-only run directory (an embedding model, or a
    classifier), or the language model of a decoder-only one.

    Raises:
        ValueError: not a run directory, or not one of `family`.
    """
    from transformer_zoo.models.saving import load_run_model
    from transformer_zoo.run_directory import load_run_config
    from transformer_zoo.text import load_tokenizers

    config = load_run_config(directory)
    if config.family != family:
        start = {
            "encoder-only": "a classifier starts from an encoder-only run",
            "decoder-only": "a language model continues from a decoder-only run",
        }[family]
        raise ValueError(
            f"--init {directory} holds {with_article(config.family)} model; {start} "
            "(trained, or imported with import-hf)."
        )
    return load_run_model(directory), config.max_length, load_tokenizers(directory, config)
