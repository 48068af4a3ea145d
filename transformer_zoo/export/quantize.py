"""`quantize_onnx`: an ONNX export directory → a copy with int8 or int4 weights, measured
on the model's task next to the float32 original and refused if it is too much worse.

**int8** (`weights="int8"`): the weights of every MatMul with a constant right-hand side (all Dense layers and the LM
head) and of the embedding Gathers become int8 through onnxruntime's
`quantize_dynamic`; activations are quantized per call (uint8), so no calibration data
is needed. Attention's activation × activation products stay float32.

One activation scale per call (onnxruntime's `DynamicQuantizeLinear`, per tensor) spans every
row of a batch, so an int8 row's output can change with the rows batched beside it (a
token where two were nearly tied); float32 and int4 rows (int4 quantizes activations per
row and block) do not. onnxruntime's `MatMulNBits` with 8 bits would quantize per row too,
but took longer over several tokens (2026-12-05, AVX-512 VNNI EPYC, `benchmarks/graph_ab.py`
against this int8 file: a decoder step 0.97× its time, the same-file control 0.99×; an
encoder 1.36× on one sentence of 16 tokens, 1.64× on 16 sentences), so int8 stays
`quantize_dynamic`'s.

Weights use 7 of the 8 bits (`reduce_range=True`): onnxruntime's u8×s8 kernels on CPUs
without VNNI (AVX2 only) add pairs of products in 16 bits, which full-range weights
overflow. Measured on an AVX2-only EPYC: largest difference from float32 0.46 with full
range, 0.047 with 7 bits (of outputs up to 2.5). An int8 file is built once and may be
served on any CPU, so it is built for both.

**int4** (`weights="int4"`): the weights of every MatMul with a constant right-hand side
become onnxruntime's `MatMulNBits` (4 bits, blocks of `INT4_BLOCK_SIZE` values along the
input dimension, one float scale per block, symmetric), through onnxruntime's
`MatMulNBitsQuantizer` (round to nearest, no calibration data). Its CPU kernels quantize
the activations to int8 per block (`accuracy_level` 4), as onnxruntime-genai's model
builder does for CPUs. The embedding tables stay float32.

The check: both directories serve the task's first `examples` test examples through
`transformer_zoo.serving` (the same code as `transformer-zoo translate|generate|
classify`):

- encoder-decoder: greedy translations, exact match;
- decoder-only: greedy completions of the prompts, exact match (plain-text tasks, which
  have no prompts: teacher-forced token accuracy);
- encoder-only: classification accuracy;

each scored by `transformer_zoo.evaluation.evaluate`, the scoring of `metrics.json`.

If the quantized score is more than `max_accuracy_drop` (absolute, 0-1) below the float32
score, `QuantizationError` is raised and nothing is written. The report (sizes, seconds,
scores) goes into the directory as `quantization.json`.
"""

from __future__ import annotations

import logging
import os
import shutil

from transformer_zoo.data.run_task import relocate, run_task, scores_files
from transformer_zoo.errors import ModelDirectoryError, first_line
from transformer_zoo.evaluation.evaluate import evaluate, primary_score
from transformer_zoo.export import WEIGHT_TYPES
from transformer_zoo.export.validation import ExportError
from transformer_zoo.files import atomic_path, write_json
from transformer_zoo.generation.onnx_runner import make_session
from transformer_zoo.run_directory import (
    CONFIG_FILE,
    RunConfig,
    RunError,
    load_run_config,
    save_run_config,
)
from transformer_zoo.serving import load_onnx

REPORT_FILE = "quantization.json"
log = logging.getLogger(__name__)  # stages; `transformer-zoo export --quantize` shows them
DEFAULT_MAX_ACCURACY_DROP = 0.01
DEFAULT_EXAMPLES = 1000
# Blocks of 128 (GPTQ's and AWQ's group size) rather than onnxruntime-genai's CPU default of
# 32: with int8 compute, onnxruntime's kernels pay per block, and the decoder of
# benchmarks/serving.py decoded 1.67x int8's tokens/s with 128 against 1.19x with 32 (AVX-512
# VNNI EPYC, 2026-12-02), with 2.7% fewer bytes; the G2P model of "Real data" kept its exact
# match on 1,000 test words with either (53.1% and 53.2% against 53.0% in float32).
INT4_BLOCK_SIZE = 128


class QuantizationError(ExportError):
    """The quantized model scores too far below the float32 one (nothing was written)."""


def quantize_onnx(
    onnx_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    task=None,
    max_accuracy_drop: float | None = DEFAULT_MAX_ACCURACY_DROP,
    examples: int = DEFAULT_EXAMPLES,
    per_channel: bool = False,
    weights: str = "int8",
    float32_scores: dict | None = None,
) -> dict:
    """Writes an int8 or int4 copy of the ONNX export in `onnx_dir` to `out_dir`.

    Args:
        onnx_dir: an ONNX export directory (float32).
        out_dir: the directory to write: new, empty, or a `weights` copy of the same
            weights written earlier, which the new one replaces once it passes.
        task: the `transformer_zoo.data.tasks.Task` to measure on; None loads the one
            `config.json` names (`data`, `seed`), as `transformer-zoo evaluate` does.
        max_accuracy_drop: the largest accepted fall of the score (0.01: one point of
            accuracy); None skips the measurement (the only way for a model without a
            task, such as an imported embedding model).
        examples: how many test examples to score (the first ones).
        per_channel: one scale per output column instead of one per matrix.
        float32_scores: the float32 model's scores from an earlier report of the same
            export, task and `examples` (`"metric"`, `"float32"`, `"float32_seconds"`,
            `"examples"`), so that a second weight type does not score it again.

    Returns:
        The report also written to `out_dir/quantization.json`: per graph file the
        float32 and quantized sizes (`"float32_bytes"`, `"int8_bytes"` or `"int4_bytes"`),
        and (when measured) the metric, both scores (`"float32"` and `weights`), the drop
        and the seconds each model took to serve the examples.

    Raises:
        ModelDirectoryError: `onnx_dir` is not an ONNX export, or `out_dir` is not empty,
            or there is no test split to measure on.
        ValueError: a bad argument, or int4 weights for a plain export.
        QuantizationError: the quantized score fell by more than `max_accuracy_drop`.
        ExportError: onnxruntime cannot quantize or load the graphs.
    """
    if weights not in WEIGHT_TYPES:
        raise ValueError(f"`weights` must be one of {WEIGHT_TYPES}. Received: weights={weights!r}")
    onnx_dir, out_dir = os.fspath(onnx_dir), os.fspath(out_dir)
    config = load_run_config(onnx_dir)
    entry = config.export.get("onnx")
    if not entry:
        raise ModelDirectoryError(f"{onnx_dir!r} holds no ONNX export to quantize.")
    if entry.get("quantization"):
        raise ModelDirectoryError(f"{onnx_dir!r} is already quantized ({entry['quantization']}).")
    if _occupied(out_dir):
        refusal = _why_not_replaced(out_dir, weights, config, onnx_dir)
        if refusal is not None:
            raise ModelDirectoryError(refusal)
    check_graph_kind(entry, weights)
    if max_accuracy_drop is not None and (
        isinstance(max_accuracy_drop, bool)
        or not isinstance(max_accuracy_drop, int | float)
        or not 0 <= max_accuracy_drop <= 1
    ):
        raise ValueError(
            f"`max_accuracy_drop` must be in [0, 1] or None. Received: {max_accuracy_drop!r}"
        )
    if isinstance(examples, bool) or not isinstance(examples, int) or examples < 1:
        raise ValueError(f"`examples` must be a positive integer. Received: {examples!r}")
    if max_accuracy_drop is not None and task is None:
        try:
            task = require_task(config)
        except ModelDirectoryError:
            raise
        except RunError as error:  # a data file not at hand: its words are the CLI's
            raise RunError(
                f"{error}. From Python: pass the run's task, "
                "task=run_task(load_run_config(RUN_DIR)) (transformer_zoo.data.run_task; "
                "relocate() gives moved files their place), or max_accuracy_drop=None."
            ) from None

    with atomic_path(out_dir) as staging:  # nothing is written unless the copy passes
        os.makedirs(staging)
        if weights == "int8":
            report = {"weights": weights, "method": "quantize_dynamic", "per_channel": per_channel}
        else:
            report = {"weights": weights, "method": "MatMulNBits", "block_size": INT4_BLOCK_SIZE}
        files = {}
        for name in os.listdir(onnx_dir):
            source = os.path.join(onnx_dir, name)
            if name.endswith(".onnx"):
                target = os.path.join(staging, name)
                log.info("%s: quantizing %s", weights, name)
                root = logging.getLogger()
                level = root.level
                root.setLevel(logging.ERROR)  # its advice to run shape inference first
                try:
                    QUANTIZERS[weights](source, target, per_channel)
                    make_session(target, 1)  # fails here, not when served
                except Exception as error:  # onnxruntime raises its own types
                    raise ExportError(f"Cannot quantize {name}: {first_line(error)}") from None
                finally:
                    root.setLevel(level)
                files[name] = {"float32_bytes": os.path.getsize(source)}
                files[name][f"{weights}_bytes"] = os.path.getsize(target)
            elif os.path.isfile(source) and name not in (CONFIG_FILE, REPORT_FILE):
                shutil.copy2(source, staging)  # tokenizers, genai_config.json
        report["files"] = files
        quantized = RunConfig.from_dict(config.to_dict())
        quantized.export = {
            key: value
            for key, value in config.export.items()
            if key != "saved_model"  # the SavedModel stays in onnx_dir, float32
        }
        quantized.export["onnx"] = {**entry, "quantization": weights}
        save_run_config(staging, quantized)
        if max_accuracy_drop is not None:
            report.update(
                compare_on_task(onnx_dir, staging, task, examples, weights, float32_scores)
            )
            report["max_accuracy_drop"] = max_accuracy_drop
            if report["drop"] > max_accuracy_drop:
                raise QuantizationError(
                    f"{weights} {report['metric']} is {report[weights]:.4f} against "
                    f"{report['float32']:.4f} in float32 on {report['examples']} test "
                    f"examples: a drop of {report['drop']:.4f} > max_accuracy_drop="
                    f"{max_accuracy_drop}. The {weights} copy was not written."
                )
        write_json(os.path.join(staging, REPORT_FILE), report)
    return report


def _occupied(path: str) -> bool:
    return os.path.exists(path) and (not os.path.isdir(path) or bool(os.listdir(path)))


def _why_not_replaced(path: str, weights: str, config: RunConfig, onnx_dir: str) -> str | None:
    """None where the occupied `path` holds a `weights` copy that `quantize_onnx` wrote
    from an export of the same weights as `config`'s (`export.weights`, a digest), which a
    new copy replaces; else why `path` is refused."""
    try:
        earlier = load_run_config(path).export
    except (RunError, OSError):
        earlier = {}
    copy = earlier.get("onnx", {}).get("quantization") == weights
    digest = config.export.get("weights")
    # Exports record the digest since 5c6b869 (2026-12-04), and a copy has its export's.
    if copy and digest is not None and earlier.get("weights") == digest:
        return None
    if copy and digest is None:
        why = (
            f"{onnx_dir} records no digest of its weights (an export written before 5c6b869), "
            "so the copy cannot be known to be of these weights: export the run again, or "
            "delete the copy"
        )
    elif copy and earlier.get("weights") is None:
        why = (
            "the copy records no digest of its weights (written before 5c6b869), so it cannot "
            "be known to be of these weights: delete it"
        )
    else:
        return (
            f"`out_dir` must be new or empty (or an earlier {weights} copy of these weights). "
            f"Received: {path}"
        )
    return (
        f"{path} holds an earlier {weights} copy, but {why} (or choose another `out_dir`) "
        "to quantize again."
    )


def require_task(
    config: RunConfig, data: str | None = None, valid: str | None = None, test: str | None = None
):
    """The task `config` names to measure on (`run_task`), read now so that `export
    --quantize` fails before it exports rather than after: its data and `--valid` files
    read where they are now when they moved (`relocate`), or `test`, a file to score on
    instead of its test split.

    Raises:
        ModelDirectoryError: `config` names no task, or its test split is empty.
        DataError: the task's data is unreadable.
        RunError: a data file is not where the run recorded it, or `data` / `valid` is
            not the run's file.
    """
    if not config.data and (test is None or not scores_files(config)):
        ways = (
            "pass a task (a file to score: `--test FILE`), or"
            if scores_files(config)
            else "it has no labels to score a file of yours (`--test FILE`) on: pass"
        )
        raise ModelDirectoryError(
            "This model names no task (config.json has no `data`), so the quantized accuracy "
            f"cannot be measured; {ways} max_accuracy_drop=None (`--max-accuracy-drop none`) "
            "to quantize unmeasured."
        )
    task = run_task(relocate(config, data, valid), test)
    if not task.test:
        raise ModelDirectoryError(
            f"The test split of {test or config.data} is empty, so the quantized accuracy "
            "cannot be measured; pass a task, or max_accuracy_drop=None "
            "(`--max-accuracy-drop none`) to quantize unmeasured."
        )
    return task


def check_graph_kind(entry: dict, weights: str) -> None:
    """Raises `ValueError` for int4 weights in a plain export (`graph_kind` "plain":
    standard ONNX operators only): `MatMulNBits` is onnxruntime's com.microsoft operator.
    (int8's `quantize_dynamic` writes standard operators: MatMulInteger,
    DynamicQuantizeLinear, DequantizeLinear.)"""
    if weights == "int4" and entry.get("graph_kind") == "plain":
        raise ValueError(
            "int4 weights are onnxruntime's com.microsoft MatMulNBits operator, which a plain "
            "export (standard ONNX operators only) must not hold: quantize it to int8, or "
            "export without --plain for int4."
        )


def _float_graph(source: str):
    """The float32 graph as the quantizers take it (`rewrites.untie_lm_heads`)."""
    import onnx

    from transformer_zoo.export.onnx.rewrites import untie_lm_heads

    model = onnx.load(source)
    untie_lm_heads(model)
    return model


def _int8(source: str, target: str, per_channel: bool) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(
        _float_graph(source),
        target,
        # What the docstring promises, not quantize_dynamic's default list: that also
        # rewrites an `Attention` node into a `QAttention` whose second input it takes for
        # a weight (com.microsoft's layout; ONNX's own `Attention` has the keys there).
        op_types_to_quantize=["MatMul", "Gather"],
        weight_type=QuantType.QInt8,
        per_channel=per_channel,
        reduce_range=True,
        # ONNX's shape inference does not type the outputs of the fused graphs'
        # com.microsoft operators; every activation there is float32.
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )


def _int4(source: str, target: str, per_channel: bool) -> None:
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    # It logs every node it visits at INFO.
    logging.getLogger("onnxruntime.quantization.matmul_nbits_quantizer").setLevel(logging.WARNING)
    quantizer = MatMulNBitsQuantizer(
        _float_graph(source),
        bits=4,
        block_size=INT4_BLOCK_SIZE,
        is_symmetric=True,
        accuracy_level=4,
        op_types_to_quantize=("MatMul",),
    )
    quantizer.process()
    quantizer.model.save_model_to_file(target, use_external_data_format=False)


QUANTIZERS = {"int8": _int8, "int4": _int4}


FLOAT32_SCORES = ("metric", "float32", "float32_seconds", "examples")


def compare_on_task(
    float_dir: str,
    quantized_dir: str,
    task,
    examples: int,
    weights: str = "int8",
    float32_scores: dict | None = None,
) -> dict:
    """Both directories' score on the first `examples` test examples of `task` (of a
    plain-text task, windows of its test text) (`evaluation.evaluate`, the same scoring as
    `metrics.json`), and the seconds each took; the float32 one taken from
    `float32_scores` when given."""
    result = {}
    # A plain-text task's test split is its text, scored window by window.
    unit = "windows" if task.stream else "examples"
    if task.stream:
        what = f"at most {examples} windows of the test text"
    else:
        what = f"{min(examples, len(task.test))} test examples"
    models = [("float32", float_dir), (weights, quantized_dir)]
    if float32_scores is not None:
        result.update({key: float32_scores[key] for key in FLOAT32_SCORES})
        models = models[1:]
    for name, directory in models:
        served = load_onnx(directory)
        log.info("%s: scoring the %s model on %s", weights, name, what)
        scores = evaluate(served, task, limit=examples)
        result["metric"], score = primary_score(scores)
        result[name] = round(score, 6)
        result[f"{name}_seconds"] = scores["seconds"]
        result["examples"] = scores["examples"]
    result["drop"] = round(result["float32"] - result[weights], 6)
    log.info(
        "%s: %s %.4f against %.4f in float32 (a drop of %.4f) on %d %s",
        weights,
        result["metric"],
        result[weights],
        result["float32"],
        result["drop"],
        result["examples"],
        unit,
    )
    return result
