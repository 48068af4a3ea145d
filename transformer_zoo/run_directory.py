"""The run directory contract: what training writes and what export and serving read.

A run directory (`transformer-zoo train`, `import-hf`) holds:

    model.keras            the trained model, float32, uncompiled (export and serving)
    config.json            a `RunConfig`; `extra.train` = the training settings
    tokenizer.model        the (source) SentencePiece model; `target_tokenizer.model` too
                           when an encoder-decoder has a separate target vocabulary (or
                           BERT's `vocab.txt` for an imported checkpoint)
    metrics.json           the final evaluation and the training summary
    history.csv            one row per epoch (Keras `CSVLogger`)
    curves.png             loss and metric curves
    checkpoints/best.keras lowest validation loss so far; checkpoints/last.keras the
                           last finished epoch
    backup/                the crash backup (weights with the optimizer state, and the
                           epoch to resume from) while training; gone once finished
    logs/                  TensorBoard

An exported directory carries the same `config.json`, with its `export` entry filled in
(the files written, the ONNX input/output names, the model's `ModelDimensions`), next to
the tokenizer files and the ONNX / SavedModel files, so that it describes itself.

This module imports only the standard library and the project's own `errors` and `files`:
the TensorFlow-free serving runtime (`transformer_zoo.serving`) reads the same files.
What an existing run directory holds (which run, how far it got, whether its model file is
whole) is `run_state`'s.

Example:
>>> import tempfile
>>> cfg = RunConfig(family="decoder-only", preset="tiny", task="language-model")
>>> with tempfile.TemporaryDirectory() as run_dir:
...     path = save_run_config(run_dir, cfg)
...     load_run_config(run_dir) == cfg
True
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from typing import Any

from transformer_zoo.errors import RunError
from transformer_zoo.files import write_json

CONFIG_FILE = "config.json"
MODEL_FILE = "model.keras"
METRICS_FILE = "metrics.json"
HISTORY_FILE = "history.csv"
CURVES_FILE = "curves.png"
CHECKPOINT_DIR = "checkpoints"
BACKUP_DIR = "backup"
# A whole backup in BACKUP_DIR holds both (weights first, `train.callbacks.backup`).
BACKUP_WEIGHTS_FILE = "latest.weights.h5"
BACKUP_METADATA_FILE = "training_metadata.json"
LOG_DIR = "logs"
FRESH, RESUME, FINISHED = "fresh", "resume", "finished"
FORMAT_VERSION = 1

FAMILIES = ("encoder-decoder", "decoder-only", "encoder-only")
# Which tasks each family serves; a config pairing them otherwise is malformed.
FAMILY_TASKS = {
    "encoder-decoder": ("translation",),
    "decoder-only": ("language-model",),
    "encoder-only": ("classification", "embedding", "masked-lm"),
}
SENTENCEPIECE_SPECIALS = ("pad", "unk", "bos", "eos")
WORDPIECE_SPECIALS = ("pad", "unk", "cls", "sep", "mask")
# SentencePiece (trained here), WordPiece (BERT), byte-level BPE (GPT-2), Marian's source.
TOKENIZER_FILES = ("tokenizer.model", "vocab.txt", "tokenizer.json", "source.spm")
TARGET_TOKENIZER_FILES = ("target_tokenizer.model", "target.spm")
# Files a tokenizer needs besides its own: Marian's two SentencePiece models share one
# vocab.json.
TOKENIZER_COMPANIONS = {"source.spm": ("vocab.json",)}
DEFAULT_SPECIAL_IDS = {"pad": 0, "unk": 1, "bos": 2, "eos": 3}


@dataclass(frozen=True)
class ModelDimensions:
    """What a runtime must know of a model to feed its graphs: `export.model` in an
    exported `config.json`.

    Attributes:
        class_name: the Keras class (`DecoderOnly`, `EncoderOnlyClassifier`, ...).
        vocabulary_size: V of the (source) vocabulary.
        num_layers: blocks per stack.
        num_heads: H.
        head_dim: Dh.
        hidden_dim: D.
        max_length: the longest sequence (the context of a decoder-only model).
        dtype: the compute dtype of the caches.
        target_vocabulary_size: an encoder-decoder's target V.
        type_vocabulary_size: an encoder-only model's segment ids (0: none).
        use_pooler: whether an encoder-only model has BERT's pooler.
        num_classes: a classifier's number of labels.
    """

    class_name: str
    vocabulary_size: int
    num_layers: int
    num_heads: int
    head_dim: int
    hidden_dim: int
    max_length: int
    dtype: str = "float32"
    target_vocabulary_size: int | None = None
    type_vocabulary_size: int = 0
    use_pooler: bool = False
    num_classes: int | None = None

    @property
    def output_vocabulary_size(self) -> int:
        """The V of the logits a generative model's step returns."""
        return self.target_vocabulary_size or self.vocabulary_size

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelDimensions:
        """Raises `RunError` on unknown or missing keys."""
        if not isinstance(data, dict):
            raise RunError(f"`export.model` must be a JSON object. Received: {data!r}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise RunError(f"Unknown keys in `export.model`: {unknown}")
        try:
            return cls(**data)
        except TypeError as error:
            raise RunError(f"`export.model` is incomplete: {error}") from None


@dataclass
class RunConfig:
    """What a trained (or exported) model is, and how text becomes its input.

    Attributes:
        family: `"encoder-decoder"`, `"decoder-only"` or `"encoder-only"`.
        preset: the preset the model was built from (`"tiny"`, `"base"`, …), or
            `"custom"` for a model built in user code.
        task: `"translation"`, `"language-model"`, `"classification"`, `"embedding"`
            or `"masked-lm"`; must suit the family.
        special_ids: `{pad, unk, bos, eos}` for SentencePiece vocabularies (the zoo's
            0, 1, 2, 3), or `{pad, unk, cls, sep, mask}` for a WordPiece `vocab.txt`.
            A SentencePiece vocabulary may add `mask`. Imported GPT-2 and Marian
            checkpoints keep their own ids (`unk` None for GPT-2; Marian's `bos`, the
            decoder start, is its `pad`).
        tokenizer: file name of the (source) vocabulary: `"tokenizer.model"`,
            `"vocab.txt"` (BERT), `"tokenizer.json"` (GPT-2) or `"source.spm"` (Marian,
            with `vocab.json`).
        target_tokenizer: `"target_tokenizer.model"` when an encoder-decoder has a
            separate target vocabulary (`"target.spm"` for Marian), else None (shared).
        max_length: the longest input in tokens, special tokens included: the source of
            an encoder-decoder, prompt plus completion of a decoder-only model (its
            context), the text (pair) of an encoder-only model. None: the model's maximum.
        max_target_length: the longest decoder sequence of an encoder-decoder, or None.
        label_names: classification label names (a label's id is its position), or None.
        data: the data spec trained on (`"builtin:dates-zh"`, a path), or None.
        seed: the training seed, or None.
        extra: free-form JSON-serializable details (training options, metrics, …).
        export: filled in by the exporters only: `{"files": …, "onnx": {file: {"inputs":
            […], "outputs": […]}}, "model": {dimensions}}`; empty in a run directory.
    """

    family: str
    preset: str
    task: str
    special_ids: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_SPECIAL_IDS))
    tokenizer: str = "tokenizer.model"
    target_tokenizer: str | None = None
    max_length: int | None = None
    max_target_length: int | None = None
    label_names: list[str] | None = None
    data: str | None = None
    seed: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    export: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _validate(self)

    @property
    def tokenizer_files(self) -> list[str]:
        """The vocabulary files the directory must hold."""
        files = [self.tokenizer]
        if self.target_tokenizer:
            files.append(self.target_tokenizer)
        return files + list(TOKENIZER_COMPANIONS.get(self.tokenizer, ()))

    @property
    def normalizes_embeddings(self) -> bool:
        """Whether an encoder-only model's sentence embedding is L2-normalised: an imported
        sentence-transformers checkpoint says so in `extra["pooling"]` (its Normalize
        module); every model trained here is."""
        return bool(self.extra.get("pooling", {}).get("normalize", True))

    def default_new_tokens(self, model_max_length: int) -> int:
        """An encoder-decoder's default target budget: the training target length (else
        the model's `model_max_length`) less the decoder start."""
        return (self.max_target_length or model_max_length) - 1

    def to_dict(self) -> dict[str, Any]:
        return {"format_version": FORMAT_VERSION, **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunConfig:
        """Builds a config from `to_dict`'s output; raises `RunError` if it is malformed."""
        if not isinstance(data, dict):
            raise RunError(f"A run config must be a JSON object. Received: {type(data).__name__}")
        data = dict(data)
        version = data.pop("format_version", FORMAT_VERSION)
        if version != FORMAT_VERSION:
            raise RunError(
                f"Unsupported config format_version {version!r}; this version reads "
                f"{FORMAT_VERSION}."
            )
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise RunError(f"Unknown config keys {unknown}; put free-form details under 'extra'.")
        missing = sorted(f for f in ("family", "preset", "task") if f not in data)
        if missing:
            raise RunError(f"The config lacks the keys {missing}.")
        return cls(**data)


def _validate(cfg: RunConfig) -> None:
    def fail(message: str) -> None:
        raise RunError(message)

    if cfg.family not in FAMILIES:
        fail(f"`family` must be one of {FAMILIES}. Received: family={cfg.family!r}")
    if cfg.task not in FAMILY_TASKS[cfg.family]:
        fail(
            f"`task` must be one of {FAMILY_TASKS[cfg.family]} for the {cfg.family} family. "
            f"Received: task={cfg.task!r}"
        )
    if not isinstance(cfg.preset, str) or not cfg.preset:
        fail(f"`preset` must be a non-empty string. Received: preset={cfg.preset!r}")
    if cfg.tokenizer not in TOKENIZER_FILES:
        fail(f"`tokenizer` must be one of {TOKENIZER_FILES}. Received: tokenizer={cfg.tokenizer!r}")
    if cfg.target_tokenizer is not None and cfg.target_tokenizer not in TARGET_TOKENIZER_FILES:
        fail(
            f"`target_tokenizer` must be None or one of {TARGET_TOKENIZER_FILES}. "
            f"Received: target_tokenizer={cfg.target_tokenizer!r}"
        )
    if cfg.target_tokenizer is not None and cfg.family != "encoder-decoder":
        fail(f"Only an encoder-decoder has a `target_tokenizer`. Received: family={cfg.family!r}")
    required = WORDPIECE_SPECIALS if cfg.tokenizer == "vocab.txt" else SENTENCEPIECE_SPECIALS
    ids = cfg.special_ids
    if not isinstance(ids, dict) or any(k not in ids for k in required):
        fail(f"`special_ids` must name {list(required)}. Received: special_ids={ids!r}")
    if any(v is not None and (not isinstance(v, int) or v < 0) for v in ids.values()):
        fail(f"`special_ids` must be non-negative integers. Received: special_ids={ids!r}")
    for name in ("max_length", "max_target_length", "seed"):
        value = getattr(cfg, name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            fail(f"`{name}` must be an integer or None. Received: {name}={value!r}")
    for name in ("max_length", "max_target_length"):
        value = getattr(cfg, name)
        if value is not None and value < 1:
            fail(f"`{name}` must be positive. Received: {name}={value!r}")
    if cfg.label_names is not None and (
        not isinstance(cfg.label_names, list)
        or not all(isinstance(n, str) for n in cfg.label_names)
    ):
        fail(f"`label_names` must be a list of strings. Received: label_names={cfg.label_names!r}")
    if cfg.task == "classification" and not cfg.label_names:
        fail("A classification config needs `label_names`.")
    for name in ("extra", "export"):
        if not isinstance(getattr(cfg, name), dict):
            fail(f"`{name}` must be a dict. Received: {name}={getattr(cfg, name)!r}")


def save_run_config(directory: str | os.PathLike, cfg: RunConfig) -> str:
    """Writes `directory/config.json` atomically (a temporary file, then a rename).

    Returns:
        The path written.
    """
    if not isinstance(cfg, RunConfig):
        raise ValueError(f"`cfg` must be a RunConfig. Received: {type(cfg).__name__}")
    _validate(cfg)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, CONFIG_FILE)
    write_json(path, cfg.to_dict())
    return path


def load_run_config(directory: str | os.PathLike) -> RunConfig:
    """Reads `directory/config.json`.

    Raises:
        RunError: the directory or its config is missing, unreadable or malformed.
    """
    if os.path.isfile(directory):  # a model file given for its directory, say
        parent = os.path.dirname(os.path.abspath(directory))
        raise RunError(
            f"{os.fspath(directory)} is a file; give the directory that holds {CONFIG_FILE} "
            f"(its folder, {parent}, if that is the export or run)."
        )
    if not os.path.isdir(directory):
        raise RunError(f"no such directory: {os.fspath(directory)}")
    path = os.path.join(directory, CONFIG_FILE)
    if not os.path.isfile(path):
        raise RunError(f"{os.fspath(directory)!r} holds no {CONFIG_FILE}; is it a run directory?")
    try:
        with open(path, encoding="utf-8") as file:
            data = json.load(file)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise RunError(f"Cannot read {path}: {error}") from None
    if isinstance(data, dict) and "family" not in data and "model_type" in data:
        raise RunError(
            f"{os.fspath(directory)} holds a Hugging Face model (transformers' {CONFIG_FILE}, "
            f"model_type {data['model_type']!r}), not a run or an export of ours: "
            "`import-hf` makes a run of it (a run directory, as evaluate, export and "
            "--engine keras read); serve and --engine onnx read what `export --format onnx` "
            "wrote of a run"
        )  # one message for every command: serve takes no run directory
    try:
        return RunConfig.from_dict(data)
    except RunError as error:
        raise RunError(f"{path}: {error}") from None
    except TypeError as error:  # a wrong-typed value the dataclass could not take
        raise RunError(f"{path}: {error}") from None


def check_run_files(directory: str | os.PathLike, cfg: RunConfig, *names: str) -> None:
    """Raises `RunError` unless `directory` holds the tokenizer files and `names`."""
    missing = [
        n for n in [*cfg.tokenizer_files, *names] if not os.path.exists(os.path.join(directory, n))
    ]
    if missing:
        raise RunError(f"{os.fspath(directory)!r} lacks {', '.join(missing)}.")
