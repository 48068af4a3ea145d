"""The training commands of `transformer-zoo`: `train` and `evaluate`.

`transformer_zoo.cli` registers them with `register(commands)`. Bad input (flags,
presets, data, an `--out` holding another run) is reported in one line with exit code 2
(`UsageError`); a NaN loss in one line with exit code 1. TensorFlow is imported only once
the arguments are known to be well-formed (`train.config` imports none).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

from transformer_zoo.cli.parsing import (
    UsageError,
    add_moved_data_arguments,
    add_search_arguments,
    search_from_arguments,
)
from transformer_zoo.cli.train_arguments import add_train_arguments, config_from_args
from transformer_zoo.errors import RunError, count, first_line
from transformer_zoo.files import check_writable
from transformer_zoo.generation import ENGINES
from transformer_zoo.run_directory import BACKUP_DIR, CONFIG_FILE


def register(commands) -> None:
    """Adds `train` and `evaluate` to `commands` (an argparse subparsers object)."""
    train = commands.add_parser(
        "train",
        help="train a model with model.fit and write a run directory",
        description="Train one family on built-in or user data; rerunning the same "
        "command on the same --out resumes an interrupted run.",
    )
    add_train_arguments(train)
    train.set_defaults(handler=_train)

    evaluate = commands.add_parser(
        "evaluate",
        help="score a run on its test split or a file, with the Keras model or an export",
        description="Scores RUN_DIR's model (or --model, an export of it) on the run's "
        "test split, or on --test FILE read as the run's data was. The run's own "
        "split scored with the Keras model is written to its metrics.json. The last "
        "line of output is one JSON object: examples, and as they apply exact_match, "
        "accuracy, wer, per (fractions), bleu, chrf, val_loss (nats per token), "
        "perplexity, token_accuracy; the engine and the model scored, and the search "
        "unless greedy. Generated outputs are decoded with --strategy (greedy by default; "
        "the teacher-forced scores do not depend on it).",
    )
    evaluate.add_argument("run_dir")
    evaluate.add_argument("--split", choices=("test", "valid"), default="test")
    evaluate.add_argument(
        "--test",
        metavar="FILE",
        help="score this file instead of the test split (not with --split valid)",
    )
    add_moved_data_arguments(evaluate)
    evaluate.add_argument(
        "--engine",
        choices=ENGINES,
        default="keras",
        help="keras (the run's model.keras, default), or onnx / saved_model (an export)",
    )
    evaluate.add_argument(
        "--model", metavar="EXPORT_DIR", help="the export to score (onnx, saved_model)"
    )
    add_search_arguments(evaluate)
    evaluate.set_defaults(handler=_evaluate)


def _train(args: argparse.Namespace) -> int:
    try:
        config = config_from_args(args)
    except ValueError as error:
        raise UsageError.from_error(error) from None
    from transformer_zoo.train.callbacks.nan_guard import NaNLossError
    from transformer_zoo.train.prepared import prepare
    from transformer_zoo.train.trainer import train

    try:
        check_writable(config.out)  # before the data, the tokenizer and the model
    except OSError as error:
        raise UsageError(f"--out {config.out}: {error.strerror}") from None
    try:
        prepared = prepare(config)
    except (ValueError, OSError) as error:  # DataError, RunError, unknown preset
        raise UsageError.from_error(error) from None
    except KeyboardInterrupt:  # reading the data, training the tokenizer
        return _interrupted(config.out)
    try:
        result = train(prepared, verbose=args.verbose)
    except NaNLossError as error:
        print(f"transformer-zoo train: error: {error}", file=sys.stderr)
        return 1
    except RunError as error:  # a backup or model.keras this version cannot read
        raise UsageError.from_error(error) from None
    except OSError as error:  # a full disk: every file written so far is whole
        print(
            f"transformer-zoo train: error: {_os_error_line(error, config.out)}; free some "
            f"space and rerun the same command to {_what_a_rerun_does(config.out)}",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        return _interrupted(config.out)
    if result.already_finished:
        print(f"{result.run_dir} already holds this run, finished; its metrics.json:")
    print(summary_line(result.run_dir, result.metrics))
    return 0


def _interrupted(out: str) -> int:
    """Ctrl-C's one line, with what rerunning the command does; the exit code."""
    print(
        f"\ntransformer-zoo train: interrupted; rerun the same command to "
        f"{_what_a_rerun_does(out)}",
        file=sys.stderr,
    )
    return 130


def _os_error_line(error: BaseException, where: str) -> str:
    """One line for a failed write under `where`: the system's own words (or those of
    `files.check_free_space`), not a staging path's traceback."""
    if isinstance(error, OSError) and error.strerror:
        return f"cannot write to {where}: {error.strerror}"
    return first_line(error)


def _what_a_rerun_does(out: str) -> str:
    """ "resume from epoch N" (the backup's), "start again" without a backup (an
    interruption before the first epoch ended: pretraining too, which a rerun does again) or,
    once the model is trained and saved, "evaluate again"."""
    from transformer_zoo.train.callbacks.backup import backup_epoch
    from transformer_zoo.train.prepared import is_trained

    if os.path.isfile(os.path.join(out, CONFIG_FILE)) and is_trained(out):
        return "evaluate again"
    epoch = backup_epoch(os.path.join(out, BACKUP_DIR))
    if epoch is None:
        return "start again (nothing was backed up yet)"
    return f"resume from epoch {epoch + 1}"


def summary_line(run_dir: str, metrics: dict | None) -> str:
    """One line of the run's headline figures."""
    if metrics is None:
        return f"worker finished; the chief writes {run_dir}"
    training = metrics.get("training", {})
    parts = [
        f"{count(training.get('epochs'), 'epoch')}, {count(training.get('steps'), 'step')}, "
        f"{training.get('train_seconds')} s"
    ]
    test = metrics.get("test") or {}
    if "examples" in test:  # a token stream's result counts windows, and has its tokens
        unit = "test window" if "tokens" in test else "test example"
        parts.append(f"{count(test['examples'], unit)} scored")
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
    if "loss" in test and "exact_match" not in test:
        parts.append(f"test loss {test['loss']:.4f} nats/token")
    if "perplexity" in test:
        parts.append(f"perplexity {test['perplexity']:.3f}")
    return f"{run_dir}: " + "; ".join(parts)


def _scored_undecoded(run_dir: str) -> str | None:
    """How a run is scored when it decodes no outputs, which a search strategy would
    decode: a classifier, or a language model of plain text (a token stream or lines,
    or an imported one: no prompts to complete); None where it decodes some (translations,
    completions of the built-in prompts) or its config.json is unreadable (the evaluation
    then says why)."""
    from transformer_zoo.run_directory import load_run_config

    try:
        config = load_run_config(run_dir)
    except (ValueError, OSError):
        return None
    if config.family == "encoder-only":
        return "a classifier: its accuracy compares the labels it predicts"
    if config.family == "decoder-only" and not str(config.data or "").startswith("builtin:"):
        return "a language model of plain text: its loss, perplexity and token accuracy"
    return None


def _evaluate(args: argparse.Namespace) -> int:
    from transformer_zoo.evaluation.evaluate import evaluate_directory, headline
    from transformer_zoo.files import read_json, write_json
    from transformer_zoo.run_directory import METRICS_FILE

    if args.engine != "keras" and args.model is None:
        raise UsageError(
            f"--engine {args.engine} scores an export: give its directory with --model"
        )
    if args.engine == "keras" and args.model is not None:
        raise UsageError("--model names an export: give --engine onnx or saved_model with it")
    search = search_from_arguments(args)
    greedy = search.name == "greedy"
    scored = None if greedy else _scored_undecoded(args.run_dir)
    if scored:  # a search flag that changes nothing is refused, as train's are
        raise UsageError(
            f"--strategy {search.name} decodes outputs, and {args.run_dir} decodes none "
            f"({scored}): its scores are the same with any strategy; drop --strategy"
        )
    writes = args.engine == "keras" and args.test is None and greedy  # metrics.json
    try:
        if writes:  # before the evaluation, not after it
            check_writable(args.run_dir)
    except OSError as error:
        raise UsageError(
            f"{args.run_dir}: {error.strerror}: evaluate writes the scores to its "
            f"{METRICS_FILE} (with --test FILE it writes nothing)"
        ) from None
    try:
        scores = evaluate_directory(
            args.run_dir,
            args.split,
            args.engine,
            test=args.test,
            model=args.model,
            search=search,
            data=args.data,
            valid=args.valid,
        )
    except (ValueError, OSError) as error:  # RunError, DataError, a missing file
        raise UsageError.from_error(error) from None
    if writes:  # metrics.json: greedy
        path = os.path.join(args.run_dir, METRICS_FILE)
        metrics = read_json(path) if os.path.isfile(path) else {}
        metrics[args.split] = scores
        try:
            write_json(path, metrics)
        except OSError as error:
            raise UsageError(_os_error_line(error, args.run_dir)) from None
    for sample in scores.get("samples", [])[:3]:
        print(
            f"{sample['input']!r} -> {sample['prediction']!r} (reference {sample['reference']!r})"
        )
    flat = {**headline(scores), "engine": args.engine, "model": args.model or args.run_dir}
    if args.test:
        flat["file"] = args.test
    if not greedy:
        flat["search"] = {"strategy": search.name, **dataclasses.asdict(search)}
    print(json.dumps(flat, ensure_ascii=False))
    return 0
