"""The training commands of `transformer-zoo`: `train` and `evaluate`.

`transformer_zoo.cli` registers them with `register(commands)`. Bad input (flags,
presets, data, an `--out` holding another run) is reported in one line with exit code 2
(`UsageError`); a NaN loss in one line with exit code 1. TensorFlow is imported only once
the arguments are known to be well-formed (`train.config` imports none).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from transformer_zoo.architectures import preset_names
from transformer_zoo.cli.parsing import UsageError, positive_float
from transformer_zoo.run_directory import BACKUP_DIR, FAMILIES
from transformer_zoo.text.tokenizer import MODEL_TYPES as TOKENIZER_KINDS
from transformer_zoo.train.config import OPTIMIZERS, PRECISIONS, STRATEGIES


def register(commands) -> None:
    """Adds `train` and `evaluate` to `commands` (an argparse subparsers object)."""
    train = commands.add_parser(
        "train",
        help="train a model with model.fit and write a run directory",
        description="Train one family on built-in or user data; rerunning the same "
        "command on the same --out resumes an interrupted run.",
    )
    train.add_argument("--family", required=True, choices=FAMILIES)
    train.add_argument(
        "--preset",
        default="tiny",
        choices=preset_names(),
        metavar="PRESET",
        help=f"the architecture: {', '.join(preset_names())} (default: tiny, sized to the family)",
    )
    train.add_argument(
        "--data",
        default="builtin:dates-zh",
        help="builtin:dates-zh (default), or a file: TSV source<TAB>target (encoder-decoder), "
        "TSV label<TAB>text[<TAB>text2] (encoder-only), plain text (decoder-only)",
    )
    train.add_argument("--valid", help="a file for the validation split (default: cut from --data)")
    train.add_argument("--test", help="a file for the test split (default: cut from --data)")
    train.add_argument(
        "--tokenizer",
        choices=TOKENIZER_KINDS,
        help="how text becomes pieces (the source's, for encoder-decoder): unigram (default), "
        "bpe, char, or word (whitespace-separated symbols)",
    )
    train.add_argument(
        "--source-tokenizer", choices=TOKENIZER_KINDS, help="encoder-decoder: the source's"
    )
    train.add_argument(
        "--target-tokenizer", choices=TOKENIZER_KINDS, help="encoder-decoder: the target's"
    )
    train.add_argument("--out", help="the run directory (default runs/FAMILY-PRESET)")
    train.add_argument("--epochs", type=int, help="passes over the data (builtin: 4, files: 10)")
    train.add_argument(
        "--time-budget",
        type=positive_float,
        metavar="SECONDS",
        help="stop model.fit after SECONDS (compilation included; the last epoch's "
        "validation, the test evaluation and saving come after it)",
    )
    train.add_argument("--batch-size", type=int, default=128)
    train.add_argument("--precision", choices=PRECISIONS, default="mixed_bfloat16")
    train.add_argument("--jit", action="store_true", help="compile the train step with XLA")
    train.add_argument("--strategy", choices=STRATEGIES, default="default")
    train.add_argument(
        "--optimizer", choices=OPTIMIZERS, help="builtin data: adamw-cosine; files: paper-adam"
    )
    train.add_argument(
        "--learning-rate", type=float, help="adamw-cosine's peak, or a factor on paper-adam's"
    )
    train.add_argument("--warmup-steps", type=int, help="builtin data: 100; files: 400")
    train.add_argument(
        "--dropout", type=float, help="replace the preset's dropout (builtin data: 0)"
    )
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--steps-per-execution", type=int, default=10)
    train.add_argument("--max-examples", type=int, help="train on this many examples only")
    train.add_argument("--backup-every", type=int, metavar="STEPS", help="default: every epoch")
    train.add_argument("--early-stopping", type=int, metavar="PATIENCE")
    train.add_argument(
        "--pretrain-steps",
        type=int,
        help="encoder-only: masked-LM steps before the classifier (builtin data: 1500)",
    )
    train.add_argument("--no-evaluate", action="store_true", help="skip the test evaluation")
    train.add_argument("--verbose", type=int, choices=(0, 1, 2), help="default: 1 on a terminal")
    train.set_defaults(handler=_train)

    evaluate = commands.add_parser("evaluate", help="recompute the test metrics of a run directory")
    evaluate.add_argument("run_dir")
    evaluate.add_argument("--split", choices=("test", "valid"), default="test")
    evaluate.set_defaults(handler=_evaluate)


def config_from_args(args: argparse.Namespace):
    """The `TrainConfig` of parsed `train` arguments (raises ValueError on bad values)."""
    from transformer_zoo.train.config import TrainConfig

    return TrainConfig(
        family=args.family,
        preset=args.preset,
        data=args.data,
        out=args.out,
        epochs=args.epochs,
        time_budget=args.time_budget,
        batch_size=args.batch_size,
        precision=args.precision,
        jit_compile=args.jit,
        strategy=args.strategy,
        optimizer=args.optimizer,
        learning_rate=args.learning_rate,
        warmup_steps=args.warmup_steps,
        dropout=args.dropout,
        seed=args.seed,
        steps_per_execution=args.steps_per_execution,
        max_examples=args.max_examples,
        backup_every=args.backup_every,
        early_stopping_patience=args.early_stopping,
        evaluate=not args.no_evaluate,
        pretrain_steps=args.pretrain_steps,
        valid=args.valid,
        test=args.test,
        tokenizer=_source_tokenizer(args),
        target_tokenizer=args.target_tokenizer,
    )


def _source_tokenizer(args) -> str | None:
    if args.tokenizer and args.source_tokenizer and args.tokenizer != args.source_tokenizer:
        raise ValueError("--tokenizer and --source-tokenizer name the same thing; give one")
    return args.source_tokenizer or args.tokenizer


def _train(args: argparse.Namespace) -> int:
    try:
        config = config_from_args(args)
    except ValueError as error:
        raise UsageError.from_error(error) from None
    from transformer_zoo.train.callbacks.nan_guard import NaNLossError
    from transformer_zoo.train.trainer import prepare, train

    try:
        prepared = prepare(config)
    except (ValueError, OSError) as error:  # DataError, RunError, unknown preset
        raise UsageError.from_error(error) from None
    try:
        result = train(prepared, verbose=args.verbose)
    except NaNLossError as error:
        print(f"transformer-zoo train: error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        from transformer_zoo.train.callbacks.backup import backup_epoch

        epoch = (backup_epoch(os.path.join(config.out, BACKUP_DIR)) or 0) + 1
        print(
            f"\ntransformer-zoo train: interrupted; rerun the same command to resume from "
            f"epoch {epoch}",
            file=sys.stderr,
        )
        return 130
    if result.already_finished:
        print(f"{result.run_dir} already holds this run, finished; its metrics.json:")
    print(summary_line(result.run_dir, result.metrics))
    return 0


def summary_line(run_dir: str, metrics: dict | None) -> str:
    """One line of the run's headline figures."""
    if metrics is None:
        return f"worker finished; the chief writes {run_dir}"
    training = metrics.get("training", {})
    parts = [
        f"{training.get('epochs')} epochs, {training.get('steps')} steps, "
        f"{training.get('train_seconds')} s"
    ]
    test = metrics.get("test") or {}
    for name in ("exact_match", "accuracy"):
        if name in test:
            scores = test[name]
            detail = ", ".join(f"{k} {v:.2%}" for k, v in scores.items() if k != "all")
            parts.append(
                f"test {name.replace('_', ' ')} {scores['all']:.2%}"
                + (f" ({detail})" if detail else "")
            )
    if "bleu" in test:
        parts.append(f"BLEU {test['bleu']['all']:.1f} ({test.get('bleu_tokenize', '13a')})")
    if "chrf" in test:
        parts.append(f"chrF {test['chrf']['all']:.1f}")
    if "wer" in test:
        parts.append(f"WER {test['wer']['all']:.2%}, PER {test['per']['all']:.2%}")
    if "perplexity" in test:
        parts.append(f"perplexity {test['perplexity']:.3f}")
    return f"{run_dir}: " + "; ".join(parts)


def _evaluate(args: argparse.Namespace) -> int:
    from transformer_zoo.evaluation.evaluate import evaluate_directory
    from transformer_zoo.files import read_json, write_json
    from transformer_zoo.run_directory import METRICS_FILE

    try:
        scores = evaluate_directory(args.run_dir, args.split)
    except (ValueError, OSError) as error:  # RunError, DataError, a missing file
        raise UsageError.from_error(error) from None
    path = os.path.join(args.run_dir, METRICS_FILE)
    metrics = read_json(path) if os.path.isfile(path) else {}
    metrics[args.split] = scores
    write_json(path, metrics)
    print(json.dumps(scores, ensure_ascii=False))
    return 0
