"""`transformer-zoo import-hf CHECKPOINT_DIR --out RUN_DIR`: a Hugging Face BERT, GPT-2 or
Marian checkpoint as a run directory (`transformer_zoo.models.hf.run`)."""

from __future__ import annotations

import json

from transformer_zoo.cli.parsing import UsageError, positive_int


def register(commands) -> None:
    """Adds `import-hf` to `commands` (an argparse subparsers object)."""
    parser = commands.add_parser(
        "import-hf",
        help="import a Hugging Face BERT, GPT-2 or Marian checkpoint as a run directory",
    )
    parser.add_argument(
        "checkpoint_dir",
        help="config.json, model.safetensors and the tokenizer files (Hugging Face layout)",
    )
    parser.add_argument("--out", required=True, help="the run directory to write (new or empty)")
    parser.add_argument(
        "--max-length",
        type=positive_int,
        help="longest input in tokens (default: sentence_bert_config.json's max_seq_length, "
        "else the checkpoint's positions)",
    )
    parser.set_defaults(handler=_import_hf)


def _import_hf(args) -> int:
    from transformer_zoo.models.hf.run import import_hf_run

    try:
        config = import_hf_run(args.checkpoint_dir, args.out, args.max_length)
    except (OSError, ValueError) as error:  # RunError is a ValueError
        raise UsageError.from_error(error) from None
    summary = {"run_dir": args.out, "task": config.task, "max_length": config.max_length}
    if config.label_names:
        summary["label_names"] = config.label_names
    print(json.dumps(summary, ensure_ascii=False))
    return 0
