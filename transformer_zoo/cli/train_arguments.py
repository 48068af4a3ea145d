"""The `train` command's arguments (`add_train_arguments`) and the `TrainConfig` they
make (`config_from_args`; `parse_overrides` reads `--set`). The help of a setting left
out says what the run makes of it, from `train.config`'s tables of defaults; like
`train.config`, this module imports no TensorFlow.
"""

from __future__ import annotations

import argparse
import json

from transformer_zoo.architectures import preset_names
from transformer_zoo.cli.parsing import non_negative_float, positive_float, positive_int
from transformer_zoo.run_directory import FAMILIES
from transformer_zoo.text.tokenizer_training import MODEL_TYPES as TOKENIZER_KINDS
from transformer_zoo.train.config import (
    BUILTIN_DEFAULTS,
    BUILTIN_FAMILY_DEFAULTS,
    INIT_DEFAULTS,
    OPTIMIZERS,
    PRECISIONS,
    SCORES,
    STRATEGIES,
    USER_DEFAULTS,
    WARMUP_SHARE,
    WINDOWS,
)


def add_train_arguments(train: argparse.ArgumentParser) -> None:
    """Adds the `train` command's arguments to its parser, `train`."""
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
    train.add_argument(
        "--vocabulary-size",
        type=positive_int,
        metavar="N",
        help="unigram/BPE/word vocabulary size of the (source, or shared) tokenizer "
        "(default 8000; a word one keeps the most frequent words)",
    )
    train.add_argument(
        "--target-vocabulary-size",
        type=positive_int,
        metavar="N",
        help="encoder-decoder: the target's",
    )
    train.add_argument(
        "--columns",
        type=_columns,
        metavar="NAMES",
        help="TSV files with a header: the columns to read, by name: SOURCE,TARGET "
        "(encoder-decoder) or TEXT[,TEXT2],LABEL (encoder-only), e.g. sentence,label",
    )
    train.add_argument(
        "--windows",
        choices=WINDOWS,
        help="decoder-only plain text: one token stream cut into context-long windows, "
        "random per batch (default) or an epoch of shuffled windows; or lines (a line is "
        "an example)",
    )
    train.add_argument(
        "--set",
        dest="overrides",
        action="extend",  # --set a=1 --set b=2 keeps both, as one --set a=1 b=2 does
        nargs="+",
        metavar="KEY=VALUE",
        help="replace the preset's model arguments, e.g. --set num_layers=4 hidden_dim=128 "
        '(values are JSON: 4, 0.1, true, "text"; or a .json file of them)',
    )
    train.add_argument(
        "--init",
        metavar="RUN_DIR",
        help="start from this run (trained here or imported with import-hf) and its "
        "tokenizer: encoder-only, its encoder under a fresh classifier head; decoder-only, "
        "the language model, fine-tuned on a plain-text --data (GPT-2 on your text)",
    )
    train.add_argument("--out", help="the run directory (default runs/FAMILY-PRESET)")
    train.add_argument(
        "--epochs",
        type=int,
        help="passes over the data (builtin: 4; files: enough for about 1,000 steps, at most 500)",
    )
    train.add_argument(
        "--steps",
        type=positive_int,
        metavar="N",
        help="train N optimizer steps instead of --epochs, rounded up to a multiple of "
        "--steps-per-execution (--steps 4 trains 10)",
    )
    train.add_argument(
        "--eval-every",
        type=positive_int,
        metavar="K",
        help="with --steps: a validation loss every K steps (default: every pass over the "
        "data, at most 10 a run)",
    )
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
    train.add_argument("--optimizer", choices=OPTIMIZERS, help=_default_help("optimizer"))
    train.add_argument(
        "--learning-rate",
        type=float,
        help="adamw-cosine's peak, or a factor on paper-adam's schedule (default 1); "
        + _default_help("learning_rate").replace("default", "adamw-cosine's default", 1),
    )
    train.add_argument(
        "--warmup-steps",
        type=int,
        help=_default_help("warmup_steps", files=f"{WARMUP_SHARE:.0%} of the planned steps")
        + " (adamw-cosine: at most a fifth of the steps)",
    )
    train.add_argument(
        "--dropout",
        type=float,
        help="replace the preset's dropout; "
        + _default_help("dropout")
        + " (with --init: the initial model's own); also --set dropout=...",
    )
    train.add_argument(
        "--weight-decay", type=non_negative_float, help="AdamW's weight decay (default 0.01)"
    )
    train.add_argument(
        "--min-learning-rate",
        type=non_negative_float,
        metavar="RATE",
        help="adamw-cosine: the floor the cosine ends at, at most the peak (default 0)",
    )
    train.add_argument(
        "--clip-norm", type=positive_float, help="clip the gradients' global norm (default: none)"
    )
    train.add_argument(
        "--label-smoothing",
        type=non_negative_float,
        help="of the translation and language-model loss (default 0.1; 0 on token streams)",
    )
    train.add_argument(
        "--ema",
        type=positive_float,
        metavar="MOMENTUM",
        help="keep a moving average of the weights (for example 0.999) and validate, "
        "checkpoint and save it (default: none)",
    )
    train.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seeds the data, the initial weights, the shuffles and dropout (default 0)",
    )
    train.add_argument(
        "--steps-per-execution",
        type=int,
        default=10,
        help="optimizer steps per compiled call (default 10; 1 over several replicas or "
        "under multiworker, where Keras 3.15 fails with more): an epoch and --steps are "
        "rounded up to whole calls",
    )
    train.add_argument(
        "--max-examples",
        type=int,
        metavar="N",
        help="quick trials: train on the first N examples, and validate and test on a tenth "
        "as many (at least 8); a plain-text token stream is not cut",
    )
    train.add_argument(
        "--backup-every",
        type=int,
        metavar="STEPS",
        help="back up for crash recovery every STEPS steps (default: at the end of every epoch)",
    )
    train.add_argument(
        "--early-stopping",
        type=int,
        metavar="PATIENCE",
        help="stop after PATIENCE epochs without a better validation loss (or "
        "--early-stopping-on score); the best epoch's weights are kept",
    )
    train.add_argument(
        "--early-stopping-on",
        choices=sorted(SCORES),
        help="watch this score of the task on the validation split instead of its loss "
        "(accuracy: encoder-only; wer, per: encoder-decoder; exact_match, bleu: "
        "encoder-decoder, or decoder-only on built-in data), logged as val_<score>",
    )
    train.add_argument(
        "--score-examples",
        type=int,
        metavar="N",
        help="the validation examples that score reads (default 1000; not for accuracy: "
        "Keras' val_accuracy reads every example)",
    )
    train.add_argument(
        "--pretrain-steps",
        type=int,
        help="encoder-only: masked-LM steps before the classifier (builtin data: 1500; "
        "none with --init)",
    )
    train.add_argument(
        "--pretrain-data",
        metavar="FILE",
        help="encoder-only, with --pretrain-steps: a plain-text file (a text per line) that "
        "masked-LM pretraining reads besides the training texts; the tokenizer learns it too",
    )
    train.add_argument("--no-evaluate", action="store_true", help="skip the test evaluation")
    train.add_argument("--verbose", type=int, choices=(0, 1, 2), help="default: 1 on a terminal")


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
        early_stopping_on=args.early_stopping_on,
        score_examples=args.score_examples,
        evaluate=not args.no_evaluate,
        pretrain_steps=args.pretrain_steps,
        pretrain_data=args.pretrain_data,
        valid=args.valid,
        test=args.test,
        tokenizer=_source_tokenizer(args),
        target_tokenizer=args.target_tokenizer,
        vocabulary_size=args.vocabulary_size,
        target_vocabulary_size=args.target_vocabulary_size,
        overrides=parse_overrides(args.overrides) if args.overrides else None,
        steps=args.steps,
        eval_every=args.eval_every,
        windows=args.windows,
        columns=args.columns,
        init=args.init,
        weight_decay=args.weight_decay,
        min_learning_rate=args.min_learning_rate,
        clip_norm=args.clip_norm,
        label_smoothing=args.label_smoothing,
        ema_momentum=args.ema,
    )


def _columns(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"expected comma-separated column names, got {text!r}")
    return names


def _default_help(name: str, files=None) -> str:
    """What a setting left out becomes, from `train.config`'s tables of defaults (the ones
    the run applies): on builtin data, on files of yours and with --init."""
    user = USER_DEFAULTS.get(name, files)
    builtin = BUILTIN_DEFAULTS.get(name, user)
    text = f"default {user}" if builtin == user else f"builtin data: {builtin}; files: {user}"
    for family, defaults in BUILTIN_FAMILY_DEFAULTS.items():
        if name in defaults:
            text += f"; {family} on builtin data: {defaults[name]}"
    init = INIT_DEFAULTS.get(name, user)
    if init is not None and init != user:  # None: the initial model's, said by the caller
        text += f"; with --init: {init}"
    return text.replace("%", "%%")  # argparse formats help with %


def parse_overrides(items: list[str]) -> dict:
    """`--set` arguments as a dict: `KEY=VALUE` pairs whose values are JSON (a bare word
    that is not JSON stays a string), or paths of JSON files holding such a dict; later
    items win.

    Raises:
        ValueError: an item that is neither, in one line.
    """
    overrides: dict = {}
    for item in items:
        if "=" not in item:
            if not item.endswith(".json"):
                raise ValueError(f"--set takes KEY=VALUE pairs or a .json file; got {item!r}")
            try:
                with open(item, encoding="utf-8") as file:
                    loaded = json.load(file)
            except (OSError, json.JSONDecodeError) as error:
                raise ValueError(f"--set {item}: cannot read a JSON object ({error})") from None
            if not isinstance(loaded, dict):
                raise ValueError(f"--set {item}: the file holds no JSON object of arguments")
            overrides.update(loaded)
            continue
        key, _, text = item.partition("=")
        if not key.isidentifier():
            raise ValueError(f"--set {item}: {key!r} is not an argument name")
        try:
            overrides[key] = json.loads(text)
        except json.JSONDecodeError:
            overrides[key] = text
    return overrides


def _source_tokenizer(args) -> str | None:
    if args.tokenizer and args.source_tokenizer and args.tokenizer != args.source_tokenizer:
        raise ValueError("--tokenizer and --source-tokenizer name the same thing; give one")
    return args.source_tokenizer or args.tokenizer
