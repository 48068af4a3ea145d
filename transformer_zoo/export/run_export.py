"""`export_run`: a run directory (what `transformer-zoo train` writes) → an export directory."""

from __future__ import annotations

import os

from transformer_zoo.export import FORMATS, HF_FORMAT
from transformer_zoo.export.quantize import (
    DEFAULT_EXAMPLES,
    DEFAULT_MAX_ACCURACY_DROP,
    FLOAT32_SCORES,
    WEIGHT_TYPES,
    QuantizationError,
    check_graph_kind,
    quantize_onnx,
    require_task,
)
from transformer_zoo.export.staged_export import check_export_target
from transformer_zoo.models.saving import load_run_model
from transformer_zoo.run_directory import MODEL_FILE, check_run_files, load_run_config


def export_run(
    run_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    formats=FORMATS,
    quantize: str | tuple[str, ...] | None = None,
    max_accuracy_drop: float | None = DEFAULT_MAX_ACCURACY_DROP,
    quantize_examples: int = DEFAULT_EXAMPLES,
    data: str | None = None,
    valid: str | None = None,
    test: str | None = None,
    **options,
) -> dict:
    """Exports the run's `model.keras` in each of `formats` into `out_dir`, with its
    `config.json` and tokenizer files.

    Args:
        run_dir: a run directory (`model.keras`, `config.json`, tokenizer files).
        out_dir: the export directory (created if needed; may not be `run_dir`).
        formats: any of `"onnx"`, `"saved_model"`; or `("hf",)` alone: Hugging Face
            layout (`export.hf.export_hf`), whose `config.json` is transformers'.
        quantize: `"int8"` and / or `"int4"` (one or a tuple): also write `out_dir/int8/`,
            `out_dir/int4/`, ONNX exports with int8 / int4 weights (`quantize_onnx`),
            each measured on the run's task next to the float32 one.
        max_accuracy_drop: refuse a quantized copy if its score falls by more (None: do
            not measure).
        quantize_examples: how many test examples the measurement uses.
        data, valid: where the run's data file and `--valid` file are now, when they
            moved from where the run recorded them (`run_task.relocate`).
        test: a file to measure on instead of the run's test split (read as its data was).
        **options: passed to `export_onnx` (e.g. `fuse_layer_norm`, `opset`).

    Returns:
        Per format, the exporter's report (and `"int8"` / `"int4"`: the quantization
        reports).

    Raises:
        RunError / ModelDirectoryError: the run directory is missing or incomplete.
        QuantizationError: a quantized copy scored too low, after every weight type was
            tried: the float32 export is kept, with the copies that passed and, for a
            refused one, the earlier copy of these weights if there was one. Its
            `report` is the report of what was written.
    """

    from transformer_zoo.export.onnx.export import export_onnx
    from transformer_zoo.export.saved_model.export import export_saved_model

    run_dir, out_dir = os.fspath(run_dir), os.fspath(out_dir)
    if HF_FORMAT in formats:
        return _export_hf(run_dir, out_dir, formats, quantize)
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        raise ValueError(f"`formats` must be a non-empty subset of {FORMATS}. Received: {formats}")
    quantize = (quantize,) if isinstance(quantize, str) else tuple(quantize or ())
    if any(weights not in WEIGHT_TYPES for weights in quantize):
        raise ValueError(
            f"`quantize` must be None or among {WEIGHT_TYPES}. Received: quantize={quantize!r}"
        )
    if quantize and "onnx" not in formats:
        raise ValueError(
            "`quantize` needs the ONNX format: add 'onnx' to `formats` (on the command line, "
            "--format onnx or all)."
        )
    for weights in quantize:  # int4 in a plain export: refused before the export
        check_graph_kind({"graph_kind": options.get("graphs", "fused")}, weights)
    config = load_run_config(run_dir)
    check_export_target(run_dir, out_dir, config)
    task = None
    if quantize and max_accuracy_drop is not None:
        task = require_task(config, data, valid, test)  # before the export, and once
    check_run_files(run_dir, config, MODEL_FILE)
    model = load_run_model(run_dir)
    report = {}
    if "onnx" in formats:
        report["onnx"] = export_onnx(
            model, out_dir, config=config, tokenizer_dir=run_dir, **options
        )
    if "saved_model" in formats:
        report["saved_model"] = export_saved_model(
            model, out_dir, config=config, tokenizer_dir=run_dir
        )
    float32_scores = None  # scored once, for the first weight type
    refused = []
    for weights in quantize:  # each tried, whatever became of the one before
        try:
            report[weights] = quantize_onnx(
                out_dir,
                os.path.join(out_dir, weights),  # out_dir/int8, out_dir/int4
                task=task,
                max_accuracy_drop=max_accuracy_drop,
                examples=quantize_examples,
                weights=weights,
                float32_scores=float32_scores,
            )
        except QuantizationError as error:
            refused.append(str(error))
            continue
        if "float32" in report[weights]:
            float32_scores = {key: report[weights][key] for key in FLOAT32_SCORES}
    if refused:
        error = QuantizationError(" ".join(refused))
        error.report = report  # what was written, for the command's report
        raise error
    return report


def _export_hf(run_dir: str, out_dir: str, formats, quantize) -> dict:
    from transformer_zoo.export.hf import export_hf

    if tuple(formats) != (HF_FORMAT,) or quantize:
        raise ValueError(
            "`hf` is a directory of its own (transformers' config.json): export it alone, "
            f"without other formats or --quantize. Received: formats={tuple(formats)}"
        )
    config = load_run_config(run_dir)
    check_export_target(run_dir, out_dir, config, hf=True)
    check_run_files(run_dir, config, MODEL_FILE)
    return {HF_FORMAT: export_hf(load_run_model(run_dir), out_dir, config, run_dir)}
