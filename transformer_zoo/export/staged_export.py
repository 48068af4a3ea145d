"""One export into an exported directory (`directory`), and what it may be written over.

Each export is staged (`StagedExport`): its files are written to a staging folder in
`out_dir` and moved in together once complete and validated, so a failure leaves the
previous export as it was. The ONNX and SavedModel exporters each add their entry to the
file, so one directory can hold both formats of one model: the other format's entry (and
its files) stays only when it was written from the same weights (`export.weights`, a
digest); otherwise it is stale and is removed. `check_export_target` refuses, before the
model loads, an `out_dir` an export would damage or mix up (a run, another run's export,
other files).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile

from transformer_zoo.export import FORMATS, WEIGHT_TYPES
from transformer_zoo.export.hf import exported_run
from transformer_zoo.export.onnx.genai_config import GENAI_CONFIG_FILE
from transformer_zoo.files import STAGING_PREFIX, remove_stale_staging
from transformer_zoo.run_directory import (
    CONFIG_FILE,
    MODEL_FILE,
    ModelDimensions,
    RunConfig,
    RunError,
    load_run_config,
    save_run_config,
)
from transformer_zoo.run_state import copy_source, run_differences, run_identity, without_places
from transformer_zoo.text.files import check_tokenizer_files

log = logging.getLogger("transformer_zoo.export")


def weights_digest(model) -> str:
    """A digest of `model`'s weights: whether two exports into one directory are of one
    model (`StagedExport.write_config`)."""
    digest = hashlib.sha256()
    for weight in model.get_weights():
        digest.update(str((weight.dtype, weight.shape)).encode())
        digest.update(weight.tobytes())
    return digest.hexdigest()


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
        the same weights and graph kind (fused or `--plain`): then they stay until a new
        copy replaces each (`quantize_onnx`), so an interrupted or refused quantization
        loses none."""
        previous = _previous_config(self.out_dir)
        export = {"model": dims.to_dict(), "tokenizer": tokenizer, "weights": weights}
        if previous is not None:
            same = previous.export.get("weights") == weights
            for name in FORMATS:
                if name in previous.export and name != key and same:
                    export[name] = previous.export[name]
                elif name in previous.export:
                    files = _entry_files(name, previous.export[name])
                    kind = previous.export[name].get("graph_kind")
                    if name == key == "onnx" and same and kind == entry.get("graph_kind"):
                        files -= set(WEIGHT_TYPES)  # copies of these very graphs
                    self.stale |= files
            if "weights" not in previous.export:
                self._say_undigested_dropped()
            if previous.export.get("tokenizer"):
                self.stale |= set(previous.tokenizer_files)
        export[key] = entry
        self.config.export = export
        save_run_config(self.staging, without_places(self.config))

    def _say_undigested_dropped(self) -> None:
        """Warns of what the move-in removes from an export that records no weights digest
        (written before 5c6b869, 2026-12-04): whether it was of these weights cannot be
        told, so its other format and quantized copies go, as another model's would."""
        dropped = [
            f"{name}/" if os.path.isdir(os.path.join(self.out_dir, name)) else name
            for name in sorted(self.stale)
            if os.path.lexists(os.path.join(self.out_dir, name))
            and not os.path.lexists(self.path(name))
        ]
        if dropped:
            log.warning(
                "%s holds an export written before 5c6b869 (2026-12-04), which records no "
                "digest of its weights, so its %s cannot be known to be of this model: they "
                "are removed, and only those that this command writes come back",
                self.out_dir,
                ", ".join(dropped),
            )


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
            existing = load_run_config(out_dir)
        except RunError:
            raise ValueError(
                refuse + "is not empty and holds no export of ours (a Hugging Face export, "
                "or other files): choose a new or empty directory."
            ) from None
        quantized = (existing.export.get("onnx") or {}).get("quantization")
        if quantized:  # its float32 files would replace the copy's, under its name
            raise ValueError(
                refuse + f"is the {quantized} copy of {copy_source(out_dir, existing)}: "
                f"export to that directory (with --quantize {quantized} to write this copy "
                "again)."
            )
        previous = run_identity(existing)
    changed = run_differences(run_identity(config), previous)
    if changed:
        raise ValueError(
            refuse + f"holds an export of another run ({', '.join(changed)} differ): "
            "exporting there would mix the two; choose another directory or delete it."
        )
