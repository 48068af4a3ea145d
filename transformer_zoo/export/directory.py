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

Each export is staged (`StagedExport`): its files are written to a staging folder in
`out_dir` and moved in together once complete and validated, so a failure leaves the
previous export as it was. The ONNX and SavedModel exporters each add their entry to the
file, so one directory can hold both formats of one model: the other format's entry (and
its files) stays only when it was written from the same weights (`export.weights`, a
digest); otherwise it is stale and is removed.
"""

from __future__ import annotations

import hashlib
import logging
import numbers
import os
import shutil
import tempfile

from transformer_zoo.errors import with_article
from transformer_zoo.export import FORMATS, WEIGHT_TYPES
from transformer_zoo.export.hf import exported_run
from transformer_zoo.export.onnx.genai_config import GENAI_CONFIG_FILE
from transformer_zoo.files import STAGING_PREFIX, remove_stale_staging
from transformer_zoo.models.family import (
    default_task,
    dimensions_of,
    family_of,
    float32_copy,
    refuse_quantized,
)
from transformer_zoo.run_directory import (
    CONFIG_FILE,
    MODEL_FILE,
    ModelDimensions,
    RunConfig,
    RunError,
    load_run_config,
    run_differences,
    run_identity,
    save_run_config,
)
from transformer_zoo.text import (
    TARGET_TOKENIZER_FILE,
    TOKENIZER_FILE,
    Tokenizer,
    copy_tokenizers,
    save_tokenizers,
)
from transformer_zoo.text.byte_level_bpe import ByteLevelBPETokenizer
from transformer_zoo.text.files import check_tokenizer_files
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


def weights_digest(model) -> str:
    """A digest of `model`'s weights: whether two exports into one directory are of one
    model (`StagedExport.write_config`)."""
    digest = hashlib.sha256()
    for weight in model.get_weights():
        digest.update(str((weight.dtype, weight.shape)).encode())
        digest.update(weight.tobytes())
    return digest.hexdigest()


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


class StagedExport:
    """One export into `out_dir`, written to a staging folder inside it (`path`; on the
    same file system, a mount point too, so each move is a rename) and moved in
    together when the block ends without an error; a failure leaves `out_dir` as it was
    and no staging folder behind.

    `out_dir` is checked first (`check_export_target`): an export of another run or a
    directory of other files is refused, as `transformer-zoo export` refuses it; so is a
    `run_dir` that lacks a tokenizer file `config` names (`write_tokenizers` copies them).

    Example:
        with StagedExport(out_dir, config) as staged:
            ...  # write files under staged.path(name)
            staged.write_config("onnx", entry, dims, has_tokenizer, weights_digest(model))
    """

    def __init__(self, out_dir: str, config: RunConfig, run_dir: str | None = None):
        check_export_target(run_dir, out_dir, config)
        if run_dir is not None:  # the tokenizer files `write_tokenizers` will copy
            check_tokenizer_files(run_dir, config.tokenizer_files)
        self.out_dir = out_dir
        self.config = config
        self.staging = ""
        self.stale: set[str] = set()  # what `out_dir` holds that the new export does not

    def __enter__(self) -> StagedExport:
        os.makedirs(self.out_dir, exist_ok=True)
        remove_stale_staging(self.out_dir)  # of an export that was killed
        self.staging = tempfile.mkdtemp(dir=self.out_dir, prefix=STAGING_PREFIX)
        return self

    def path(self, name: str) -> str:
        """Where the export writes the file (or directory) `out_dir/name`."""
        return os.path.join(self.staging, name)

    def __exit__(self, kind, error, traceback) -> None:
        try:
            if kind is None:
                self._move_in()
        finally:
            shutil.rmtree(self.staging, ignore_errors=True)

    def _move_in(self) -> None:
        """Each new file replaces its old one (the old moved aside into the staging
        folder, so a directory is swapped, not deleted under a reader), the stale go, and
        `config.json`, which describes the rest, comes last."""
        new = set(os.listdir(self.staging)) - {CONFIG_FILE}
        old = self.path(".old")
        os.mkdir(old)
        for name in [*sorted(new), *sorted(self.stale - new - {CONFIG_FILE}), CONFIG_FILE]:
            target = os.path.join(self.out_dir, name)
            if os.path.lexists(target):
                os.replace(target, os.path.join(old, name))
            if os.path.lexists(self.path(name)):
                os.replace(self.path(name), target)

    def write_config(
        self, key: str, entry: dict, dims: ModelDimensions, tokenizer: bool, weights: str
    ) -> None:
        """Writes `config.json`: the export's `config` with `entry` under `export[key]`,
        the model's dimensions under `export.model`, whether tokenizer files are there
        under `export.tokenizer` and `weights` (`weights_digest`). Another format's entry
        of the previous export stays only when it is of the same weights; the files of the
        entries that go and tokenizer files this export does not write again are removed
        when it moves in. The ONNX entry's quantized copies go with it unless they are of
        the same weights: then they stay until a new copy replaces each
        (`quantize_onnx`), so an interrupted or refused quantization loses none."""
        previous = _previous_config(self.out_dir)
        export = {"model": dims.to_dict(), "tokenizer": tokenizer, "weights": weights}
        if previous is not None:
            same = previous.export.get("weights") == weights
            for name in FORMATS:
                if name in previous.export and name != key and same:
                    export[name] = previous.export[name]
                elif name in previous.export:
                    files = _entry_files(name, previous.export[name])
                    if name == key == "onnx" and same:
                        files -= set(WEIGHT_TYPES)
                    self.stale |= files
            if previous.export.get("tokenizer"):
                self.stale |= set(previous.tokenizer_files)
        export[key] = entry
        self.config.export = export
        save_run_config(self.staging, self.config)


def _previous_config(out_dir: str) -> RunConfig | None:
    try:
        return load_run_config(out_dir)
    except RunError:  # a new or empty directory (`check_export_target` refused the rest)
        return None


def _entry_files(key: str, entry: dict) -> set[str]:
    """The files and directories of `out_dir` that the `export[key]` entry describes."""
    if key == "saved_model":
        return {entry.get("directory", "saved_model")}
    files = {graph["file"] for graph in entry.get("graphs", {}).values()}
    return files | {GENAI_CONFIG_FILE, *WEIGHT_TYPES}  # and the quantized copies


# The files a `--format hf` directory holds (transformers' layout).
HF_FILES = {
    "config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
    "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt",
    "vocab.txt", "tokenizer.model",
}  # fmt: skip


def check_export_target(run_dir: str | None, out_dir: str, config, hf: bool = False) -> None:
    """Refuses an `out_dir` an export would damage or mix up, before the model loads: a
    file, the run directory or another run's (its `model.keras`), an export of another
    run, or a directory of other files. An export of this same run (to add a format or
    export again) and a new or empty directory are fine; with `hf`, the same for a
    Hugging Face export (its config.json names its run: `hf.RUN_ENTRY`). `run_dir` is
    None for a model exported from Python (`config`: the run it names, or "custom").

    Raises:
        ValueError: the `out_dir` at fault, named.
    """
    if not out_dir:
        raise ValueError("`out_dir` is empty: name the directory to export to.")
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise ValueError(f"The export directory {out_dir} is a file: choose a directory.")
    if run_dir is not None and os.path.abspath(run_dir) == os.path.abspath(out_dir):
        raise ValueError(f"`out_dir` must differ from the run directory. Received: {out_dir}")
    names = set(os.listdir(out_dir)) if os.path.isdir(out_dir) else set()
    names = {name for name in names if not name.startswith(STAGING_PREFIX)}
    if not names:
        return
    refuse = f"The export directory {out_dir} "
    if MODEL_FILE in names:
        raise ValueError(
            refuse + f"holds a run ({MODEL_FILE}): exporting there would overwrite it; "
            "choose another directory."
        )
    if hf:
        previous = exported_run(out_dir) if names <= HF_FILES else None
        if previous is None:
            raise ValueError(
                refuse + "is not empty and holds no Hugging Face export of ours (one that "
                "names its run: other files, a checkpoint, or an export of an older "
                "version): choose a new or empty directory."
            )
    else:
        try:
            previous = run_identity(load_run_config(out_dir))
        except RunError:
            raise ValueError(
                refuse + "is not empty and holds no export of ours (a Hugging Face export, "
                "or other files): choose a new or empty directory."
            ) from None
    changed = run_differences(run_identity(config), previous)
    if changed:
        raise ValueError(
            refuse + f"holds an export of another run ({', '.join(changed)} differ): "
            "exporting there would mix the two; choose another directory or delete it."
        )
