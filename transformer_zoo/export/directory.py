"""The self-describing exported directory: `config.json`, tokenizer files, model files.

`config.json` is the run directory's `RunConfig` (`transformer_zoo.run_directory`) with its
`export` entry filled in:

    "export": {
      "model": {class_name, vocabulary_size, num_layers, num_heads, head_dim, ...},
      "tokenizer": true,                      # whether the tokenizer files are here
      "onnx": {"opset": 17, "graphs": {"model": {"file": "model.onnx",
                "inputs": [...], "outputs": [...]}}, ...},
      "saved_model": {"directory": "saved_model", "signatures": [...]}
    }

`make_config` makes that config for a model, `write_tokenizers` writes the tokenizer files it
names, and `check_export_arguments` checks the exporters' arguments before either; an
export is written and moved in by `staged_export.StagedExport`.
"""

from __future__ import annotations

import logging
import numbers
import os

from transformer_zoo.errors import with_article
from transformer_zoo.models.family import (
    default_task,
    dimensions_of,
    family_of,
    float32_copy,
    refuse_quantized,
)
from transformer_zoo.run_directory import ModelDimensions, RunConfig
from transformer_zoo.text import (
    TARGET_TOKENIZER_FILE,
    TOKENIZER_FILE,
    Tokenizer,
    copy_tokenizers,
    save_tokenizers,
)
from transformer_zoo.text.byte_level_bpe import ByteLevelBPETokenizer
from transformer_zoo.text.marian import MarianTokenizer
from transformer_zoo.text.wordpiece import VOCAB_FILENAME, WordPieceTokenizer

log = logging.getLogger("transformer_zoo.export")

# The tokenizer objects an export writes (`save_tokenizers`).
TOKENIZER_TYPES = (Tokenizer, WordPieceTokenizer, ByteLevelBPETokenizer, MarianTokenizer)


def check_export_arguments(
    model, out_dir, tokenizer=None, target_tokenizer=None, tokenizer_dir=None, atol=0.0
) -> None:
    """The exporters' checks of their arguments' types, before a float32 copy is made or
    anything converted or written (`make_config` checks what they hold).

    Raises:
        ValueError: naming the argument at fault: a `model` that is a path or a preset
            name (or no model of the zoo's), an `out_dir` that is no path, a tokenizer
            that is no tokenizer object, tokenizers given both as objects and as
            `tokenizer_dir`, an `atol` that is not a number ≥ 0.
    """
    if isinstance(model, (str, bytes, os.PathLike)):
        raise ValueError(
            f"`model` must be a model, not a path or a preset name. Received: model={model!r}. "
            "Load a run directory with `load_run_model(path)` first (or export it with "
            "`transformer-zoo export RUN_DIR OUT_DIR`), a preset with `from_preset(name)`."
        )
    family_of(model)  # before `float32_model` reads its weights
    for name, value in (("out_dir", out_dir), ("tokenizer_dir", tokenizer_dir)):
        if not isinstance(value, (str, os.PathLike)) and (name == "out_dir" or value is not None):
            order = " (the arguments are model, out_dir, tokenizer)" if name == "out_dir" else ""
            raise ValueError(
                f"`{name}` must be a directory, a str or os.PathLike{order}. "
                f"Received: {name} of type {type(value).__name__}"
            )
    for name, value in (("tokenizer", tokenizer), ("target_tokenizer", target_tokenizer)):
        if value is not None and not isinstance(value, TOKENIZER_TYPES):
            kinds = ", ".join(kind.__name__ for kind in TOKENIZER_TYPES)
            hint = ""
            if isinstance(value, (str, os.PathLike)):
                hint = (
                    ": load tokenizer files with `load_tokenizers(directory)`, or copy a run "
                    "directory's with `tokenizer_dir=`"
                )
            raise ValueError(
                f"`{name}` must be a tokenizer ({kinds}) or None. "
                f"Received: {type(value).__name__} {value!r:.60}{hint}"
            )
    if tokenizer_dir is not None and (tokenizer is not None or target_tokenizer is not None):
        raise ValueError(
            "Give the tokenizers as objects (`tokenizer`, `target_tokenizer`) or as a run "
            f"directory's files (`tokenizer_dir`), not both. Received: tokenizer_dir={tokenizer_dir!r}"
        )
    if isinstance(atol, bool) or not isinstance(atol, numbers.Real) or not atol >= 0:
        raise ValueError(
            "`atol` must be a number ≥ 0, the largest difference from the model validation "
            f"accepts. Received: atol={atol!r}"
        )


def float32_model(model):
    """`model`, or its float32 copy (`float32_copy`) when it was built under a mixed
    precision policy: what every format exports and validates, as training saves it.

    Raises:
        ValueError: as `refuse_quantized`.
    """
    refuse_quantized(model)
    if model.compute_dtype == "float32":
        return model
    log.info("exporting a float32 copy of the %s model", model.compute_dtype)
    return float32_copy(model)


def make_config(
    model,
    config: RunConfig | None = None,
    tokenizer: Tokenizer | WordPieceTokenizer | None = None,
    target_tokenizer: Tokenizer | None = None,
    label_names=None,
) -> RunConfig:
    """The run config of `model`: `config` checked against it, or one made from scratch
    (preset `"custom"`, the family's default task, the tokenizer's special ids, and a
    classifier's `label_names`, "0", "1", ... when not given).

    Raises:
        ValueError: a `config` of another family; a tokenizer with more tokens than the
            model's vocabulary (`_check_vocabularies`); `label_names` for a model that is
            no classifier, beside a `config` (whose `label_names` count), a str, or not one
            per class.
    """
    family = family_of(model)
    dims = dimensions_of(model)
    _check_vocabularies(family, dims, tokenizer, target_tokenizer)
    task = default_task(model)
    if label_names is not None and (config is not None or task != "classification"):
        why = f"this model is {with_article(type(model).__name__)}, no classifier"
        if task == "classification":
            why = "a `config` is given, whose own `label_names` count"
        raise ValueError(
            f"`label_names` names a classifier's classes (with no `config`); {why}. "
            f"Received: label_names={label_names!r:.60}"
        )
    if config is not None:
        if not isinstance(config, RunConfig):
            raise ValueError(f"`config` must be a RunConfig. Received: {type(config).__name__}")
        if config.family != family:
            raise ValueError(
                f"`config` describes {with_article(config.family)} model but the model is "
                f"{family}. "
                f"Received: config.family={config.family!r}"
            )
        return RunConfig.from_dict(config.to_dict())  # a copy
    special_ids = {"pad": 0, "unk": 1, "bos": 2, "eos": 3}
    tokenizer_file = TOKENIZER_FILE
    if isinstance(tokenizer, WordPieceTokenizer):
        special_ids, tokenizer_file = tokenizer.special_ids, VOCAB_FILENAME
    elif tokenizer is not None:
        special_ids = tokenizer.special_ids
    separate = target_tokenizer is not None and target_tokenizer is not tokenizer
    return RunConfig(
        family=family,
        preset="custom",
        task=task,
        special_ids=special_ids,
        tokenizer=tokenizer_file,
        target_tokenizer=TARGET_TOKENIZER_FILE if separate else None,
        max_length=dims.max_length,
        label_names=_label_names(label_names, dims.num_classes)
        if task == "classification"
        else None,
    )


def _check_vocabularies(family: str, dims: ModelDimensions, tokenizer, target_tokenizer) -> None:
    """Refuses a tokenizer with more tokens than the model's vocabulary it feeds (or, an
    encoder-decoder's target tokenizer, decodes): its ids past the model's have no row,
    and serving would refuse them only once a text used one. A tokenizer with fewer tokens
    is what a vocabulary padded to a multiple leaves (nanoGPT's 50304 rows for GPT-2's
    50257 tokens) and is exported, as `import-hf` imports it; where the model writes text,
    the ids past the tokenizer's have no text, and a warning says so."""
    if tokenizer is None:
        return
    target = target_tokenizer if target_tokenizer is not None else tokenizer
    sides = [("tokenizer", tokenizer, dims.vocabulary_size, "vocabulary_size")]
    if family == "encoder-decoder":
        name = "tokenizer" if target is tokenizer else "target_tokenizer"
        sides.append((name, target, dims.target_vocabulary_size, "target_vocabulary_size"))
    for name, given, size, setting in sides:
        if given.vocabulary_size > size:
            raise ValueError(
                f"`{name}` has {given.vocabulary_size} tokens, more than the model's "
                f"{setting} of {size}: its ids from {size} on have no row in the model. Export "
                f"the model trained with this tokenizer (or one built with {setting}="
                f"{given.vocabulary_size})."
            )
    writes = family == "encoder-decoder" or family == "decoder-only"
    if writes and target.vocabulary_size < sides[-1][2]:
        log.warning(
            "the model's output vocabulary (%d) is larger than the tokenizer's (%d): ids "
            "from %d on, which it may write, have no text",
            sides[-1][2],
            target.vocabulary_size,
            target.vocabulary_size,
        )


def _label_names(names, num_classes: int) -> list[str]:
    if names is None:
        return [str(i) for i in range(num_classes)]
    if isinstance(names, (str, bytes)):
        raise ValueError(
            "`label_names` must be a list of names, one per class. Received: a single "
            f"{type(names).__name__} {names!r:.60}"
        )
    names = [str(n) for n in names]
    if len(names) != num_classes:
        raise ValueError(
            f"`label_names` needs one name per class: {len(names)} for {num_classes} classes."
        )
    return names


def write_tokenizers(
    out_dir: str,
    config: RunConfig,
    tokenizer: Tokenizer | WordPieceTokenizer | None = None,
    target_tokenizer: Tokenizer | None = None,
    source_dir: str | None = None,
) -> bool:
    """Writes the tokenizer files `config` names: copied from `source_dir` (a run
    directory), or saved from the objects. Returns whether any tokenizer was written."""
    if source_dir is not None:
        copy_tokenizers(source_dir, out_dir, config.tokenizer_files)
        return True
    if tokenizer is None:
        return False
    save_tokenizers(out_dir, tokenizer, target_tokenizer if config.target_tokenizer else None)
    return True
