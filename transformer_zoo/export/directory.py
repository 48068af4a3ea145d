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

The ONNX and SavedModel exporters each merge their entry into the file, so one directory
can hold both formats.
"""

from __future__ import annotations

import os

from transformer_zoo.errors import with_article
from transformer_zoo.models.family import default_task, dimensions_of, family_of
from transformer_zoo.run_directory import (
    CONFIG_FILE,
    ModelDimensions,
    RunConfig,
    RunError,
    load_run_config,
    save_run_config,
)
from transformer_zoo.text import (
    TARGET_TOKENIZER_FILE,
    TOKENIZER_FILE,
    Tokenizer,
    copy_tokenizers,
    save_tokenizers,
)
from transformer_zoo.text.wordpiece import VOCAB_FILENAME, WordPieceTokenizer


def make_config(
    model,
    config: RunConfig | None = None,
    tokenizer: Tokenizer | WordPieceTokenizer | None = None,
    target_tokenizer: Tokenizer | None = None,
    label_names=None,
) -> RunConfig:
    """The run config of `model`: `config` checked against it, or one made from scratch
    (preset `"custom"`, the family's default task, the tokenizer's special ids, and a
    classifier's `label_names`, "0", "1", ... when not given)."""
    family = family_of(model)
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
    dims = dimensions_of(model)
    special_ids = {"pad": 0, "unk": 1, "bos": 2, "eos": 3}
    tokenizer_file = TOKENIZER_FILE
    if isinstance(tokenizer, WordPieceTokenizer):
        special_ids, tokenizer_file = tokenizer.special_ids, VOCAB_FILENAME
    elif tokenizer is not None:
        special_ids = tokenizer.special_ids
    task = default_task(model)
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


def _label_names(names, num_classes: int) -> list[str]:
    if names is None:
        return [str(i) for i in range(num_classes)]
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


def update_export_config(
    out_dir: str, config: RunConfig, key: str, entry: dict, dims: ModelDimensions, tokenizer: bool
) -> None:
    """Merges `entry` under `export[key]`, the model's dimensions under `export.model` and
    whether tokenizer files are there under `export.tokenizer` into `out_dir/config.json`,
    keeping what another exporter wrote there before."""
    export = dict(config.export)
    if os.path.isfile(os.path.join(out_dir, CONFIG_FILE)):
        try:
            previous = load_run_config(out_dir)
        except RunError:
            previous = None
        if previous is not None and previous.family == config.family:
            export = {**previous.export, **export}
    export.update(model=dims.to_dict(), tokenizer=tokenizer)
    export[key] = entry
    config.export = export
    save_run_config(out_dir, config)
