"""`transformer-zoo export RUN_DIR --format onnx|saved_model|all|hf --out DIR [--plain]
[--quantize int8 int4]`.

The stages of the export (conversion, node counts, sizes, the largest difference from the
model, the quantized copies' scores) go to stderr through the `transformer_zoo.export` logger; the
report is one JSON line on stdout.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from transformer_zoo.cli.parsing import (
    UsageError,
    add_moved_data_arguments,
    fraction_or_none,
    positive_int,
)
from transformer_zoo.export import FORMATS, HF_FORMAT, WEIGHT_TYPES

_UNSET = object()  # a flag left out (argparse would parse a string default with its type)


def register(commands) -> None:
    """Adds `export` to `commands` (an argparse subparsers object)."""
    export = commands.add_parser("export", help="export a run directory to ONNX/SavedModel")
    export.add_argument("run_dir", help="a run directory (model.keras, config.json, tokenizer)")
    export.add_argument(
        "--format",
        choices=(*FORMATS, "all", HF_FORMAT),
        default="all",
        help="all: onnx and saved_model (default); hf: Hugging Face layout (GPT-2 for "
        "decoder-only, BERT for encoder-only), which transformers' from_pretrained loads",
    )
    export.add_argument("--out", required=True, help="the export directory to write")
    export.add_argument(
        "--plain",
        action="store_true",
        help="standard ONNX operators only (tf2onnx), for runtimes without onnxruntime's "
        "com.microsoft operators; by default the graphs use onnxruntime's fused operators",
    )
    export.add_argument(
        "--no-fuse-layer-norm",
        action="store_true",
        help="with --plain: keep tf2onnx's 13-node LayerNorm expansions (for measurement)",
    )
    export.add_argument(
        "--no-simplify",
        action="store_true",
        help="with --plain: skip the graph rewrites (one MatMul per Dense, fused QKV, Where)",
    )
    export.add_argument("--opset", type=int, choices=(17, 18), help="the ONNX opset (default 17)")
    export.add_argument(
        "--quantize",
        choices=WEIGHT_TYPES,
        action="extend",  # --quantize int8 --quantize int4 keeps both
        nargs="+",
        help="also write OUT/int8/ and/or OUT/int4/: the ONNX export with int8 or int4 "
        "(MatMulNBits) weights, each scored on the run's task",
    )
    export.add_argument(
        "--max-accuracy-drop",
        type=fraction_or_none,
        default=_UNSET,  # told apart from 'none' (None): refused without --quantize
        help="refuse a quantized copy if its test score falls by more (0-1, default 0.01; "
        "'none': do not measure)",
    )
    export.add_argument(
        "--quantize-examples",
        type=positive_int,
        help="test examples the quantized copies are scored on (default 1000; of a "
        "plain-text run: windows of its test text)",
    )
    add_moved_data_arguments(export, when="with --quantize: ")
    export.add_argument(
        "--test",
        metavar="FILE",
        help="with --quantize: score the copies on this file (read as the run's data was) "
        "instead of the run's test split",
    )
    export.set_defaults(handler=_export)


class _StageHandler(logging.StreamHandler):
    """Writes to the `sys.stderr` of the moment (tests and callers may replace it)."""

    def emit(self, record):
        self.stream = sys.stderr
        super().emit(record)


def _show_stages(logger: str, prefix: str) -> None:
    """Prints the INFO messages of `logger` (the stages of long work) on stderr: the
    `sys.stderr` of the moment of each message, and one handler however often called."""
    target = logging.getLogger(logger)
    target.handlers = [h for h in target.handlers if not isinstance(h, _StageHandler)]
    handler = _StageHandler()
    handler.setFormatter(logging.Formatter(f"{prefix}: %(message)s"))
    target.addHandler(handler)
    target.setLevel(logging.INFO)
    target.propagate = False  # else a root handler (tf2onnx sets one) prints each line again


def _export(args: argparse.Namespace) -> int:
    from transformer_zoo.run_directory import RunError

    formats = FORMATS if args.format == "all" else (args.format,)
    if args.quantize:  # one copy per weight type, however often it is named
        args.quantize = list(dict.fromkeys(args.quantize))
    from transformer_zoo.export.quantize import (
        DEFAULT_EXAMPLES,
        DEFAULT_MAX_ACCURACY_DROP,
        QuantizationError,
    )
    from transformer_zoo.export.run_export import export_run
    from transformer_zoo.export.validation import ExportError

    if (args.no_fuse_layer_norm or args.no_simplify) and not args.plain:
        raise UsageError("--no-fuse-layer-norm and --no-simplify apply to --plain graphs only.")
    if "onnx" not in formats and (args.plain or args.opset is not None):
        raise UsageError(f"--plain and --opset apply to ONNX exports, not --format {args.format}.")
    if not args.quantize and (args.max_accuracy_drop is not _UNSET or args.quantize_examples):
        raise UsageError("--max-accuracy-drop and --quantize-examples apply with --quantize.")
    files = {"data": args.data, "valid": args.valid, "test": args.test}
    if any(files.values()) and (not args.quantize or args.max_accuracy_drop is None):
        raise UsageError(
            "--data, --valid and --test say what the quantized copies are scored on: they "
            "apply with --quantize (and not with --max-accuracy-drop none)."
        )
    options = {
        "graphs": "plain" if args.plain else "fused",
        "fuse_layer_norm": not args.no_fuse_layer_norm,
        "simplify": not args.no_simplify,
        "quantize": args.quantize,
        "max_accuracy_drop": DEFAULT_MAX_ACCURACY_DROP
        if args.max_accuracy_drop is _UNSET
        else args.max_accuracy_drop,
        "quantize_examples": args.quantize_examples or DEFAULT_EXAMPLES,
        **files,
    }
    if args.opset is not None:
        options["opset"] = args.opset
    _show_stages("transformer_zoo.export", "transformer-zoo export")
    try:
        report = export_run(args.run_dir, args.out, formats, **options)
    except (RunError, ValueError) as error:
        raise UsageError.from_error(error) from None
    except OSError as error:  # the previous export, if any, is whole
        reason = error.strerror or str(error)
        print(
            f"transformer-zoo export: error: cannot write to {args.out}: {reason}", file=sys.stderr
        )
        return 1
    except QuantizationError as error:
        written = [w for w in args.quantize if w in getattr(error, "report", {})]
        earlier = [
            w
            for w in args.quantize
            if w not in written and os.path.isdir(os.path.join(args.out, w))
        ]
        also = "".join(f", the {w} copy in {os.path.join(args.out, w)}" for w in written)
        kept = "".join(
            f"; the earlier {w} copy of these weights in {os.path.join(args.out, w)} stays"
            for w in earlier
        )
        print(
            f"transformer-zoo export: quantized copy refused ({error}) The float32 export is "
            f"in {args.out}{also}{kept}.",
            file=sys.stderr,
        )
        print(json.dumps(error.report))
        return 1
    except ExportError as error:
        print(f"transformer-zoo export: export failed validation: {error}", file=sys.stderr)
        return 1
    print(json.dumps(report))
    return 0
