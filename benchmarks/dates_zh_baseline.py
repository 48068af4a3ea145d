"""Train one family's `tiny` preset on `builtin:dates-zh` for a fixed time and evaluate it
on the held-out test split, per category.

This measures the data side (task, tokenizers, pipelines, loss, schedule) with plain
`model.fit`; the `transformer-zoo train` command wraps the same pieces.

    .venv/bin/python benchmarks/dates_zh_baseline.py --family encoder-decoder --seconds 150

Writes benchmarks/results/dates_zh_<family>.json and prints it.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402

from transformer_zoo.data import load_task
from transformer_zoo.data.masked_lm import masked_lm_dataset
from transformer_zoo.data.pipelines import (
    classification_dataset,
    language_model_dataset,
    translation_dataset,
)
from transformer_zoo.evaluation.evaluate import evaluate  # noqa: E402
from transformer_zoo.generation.keras_runner import KerasRunner  # noqa: E402
from transformer_zoo.models import (  # noqa: E402
    EncoderOnlyClassifier,
    EncoderOnlyMaskedLM,
    from_preset,
)
from transformer_zoo.models.family import float32_copy  # noqa: E402
from transformer_zoo.run_directory import RunConfig  # noqa: E402
from transformer_zoo.serving import ServedModel  # noqa: E402
from transformer_zoo.train.recipe import (
    MaskedAccuracy,
    MaskedSparseCategoricalCrossentropy,
    adamw_cosine,
    paper_adam,
)

RESULTS = Path(__file__).resolve().parent / "results"


class StopAfter(keras.callbacks.Callback):
    """Stops training once `seconds` of wall time or `steps` optimizer steps have passed
    (checked every `steps_per_execution` batches)."""

    def __init__(self, seconds: float, steps: int | None):
        super().__init__()
        self.seconds, self.steps = seconds, steps

    def on_train_begin(self, logs=None):
        self.start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        done = self.steps is not None and int(self.model.optimizer.iterations) >= self.steps
        if done or time.perf_counter() - self.start > self.seconds:
            self.model.stop_training = True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--family", required=True, choices=("encoder-decoder", "decoder-only", "encoder-only")
    )
    parser.add_argument(
        "--seconds", type=float, help="training time budget (default 150, none with --steps)"
    )
    parser.add_argument("--steps", type=int, help="stop after this many steps instead")
    parser.add_argument("--dropout", type=float, help="override the preset's dropout")
    parser.add_argument(
        "--pretrain-steps", type=int, default=0, help="encoder-only: masked-LM steps first"
    )
    parser.add_argument("--pretrain-learning-rate", type=float, default=1e-3)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--optimizer", choices=("paper", "adamw-cosine"), default="paper")
    parser.add_argument("--learning-rate", type=float, default=2e-3, help="adamw-cosine peak")
    parser.add_argument("--warmup", type=int, default=400)
    parser.add_argument("--precision", default="mixed_bfloat16")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    keras.utils.set_random_seed(args.seed)
    keras.config.set_dtype_policy(args.precision)

    started = time.perf_counter()
    task = load_task("builtin:dates-zh", args.family, seed=args.seed)
    tokenizer, target_tokenizer = task.fit_tokenizers()
    prepared = time.perf_counter() - started
    common = dict(batch_size=args.batch_size, shuffle=True, seed=args.seed)
    pretrain_seconds = 0.0
    overrides = {} if args.dropout is None else {"dropout": args.dropout}
    if args.family == "encoder-decoder":
        model = from_preset(
            "tiny",
            family=args.family,
            vocabulary_size=tokenizer.vocabulary_size,
            target_vocabulary_size=target_tokenizer.vocabulary_size,
            **overrides,
        )
        train = translation_dataset(task.train, tokenizer, target_tokenizer, **common)
        valid = translation_dataset(task.valid, tokenizer, target_tokenizer, batch_size=256)
    elif args.family == "decoder-only":
        model = from_preset(
            "tiny", family=args.family, vocabulary_size=tokenizer.vocabulary_size, **overrides
        )
        train = language_model_dataset(task.train, tokenizer, **common)
        valid = language_model_dataset(task.valid, tokenizer, batch_size=256)
    else:
        backbone = from_preset(
            "tiny", family=args.family, vocabulary_size=tokenizer.vocabulary_size, **overrides
        )
        pretrain_seconds = _pretrain_masked_lm(backbone, task, tokenizer, args, common)
        model = EncoderOnlyClassifier(backbone, num_classes=len(task.label_names))
        train = classification_dataset(task.train, tokenizer, task.label_names, **common)
        valid = classification_dataset(task.valid, tokenizer, task.label_names, batch_size=256)
    if args.family == "encoder-only":
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        metrics = ["sparse_categorical_accuracy"]
    else:
        loss, metrics = MaskedSparseCategoricalCrossentropy(label_smoothing=0.1), [MaskedAccuracy()]
    hidden_dim = backbone.hidden_dim if args.family == "encoder-only" else model.hidden_dim
    if args.optimizer == "paper":
        optimizer = paper_adam(hidden_dim, warmup_steps=args.warmup)
    else:
        if args.steps is None:
            parser.error("--optimizer adamw-cosine needs --steps (the length of the cosine)")
        optimizer = adamw_cosine(args.learning_rate, args.steps, warmup_steps=args.warmup)
    model.compile(
        optimizer=optimizer,
        loss=loss,
        metrics=metrics,
        steps_per_execution=10,
    )
    fit_start = time.perf_counter()
    history = model.fit(
        train,
        validation_data=valid,
        epochs=1000,
        # --steps alone trains that many steps: with the 150 s default still in force, the
        # README's --steps commands stopped at 150 s.
        callbacks=[StopAfter(args.seconds or (float("inf") if args.steps else 150.0), args.steps)],
        verbose=2,
    )
    train_seconds = time.perf_counter() - fit_start

    eval_start = time.perf_counter()
    keras.config.set_dtype_policy("float32")
    runner = KerasRunner(float32_copy(model))
    config = RunConfig(
        family=args.family,
        preset="tiny",
        task={"encoder-decoder": "translation", "decoder-only": "language-model"}.get(
            args.family, "classification"
        ),
        target_tokenizer="target_tokenizer.model" if target_tokenizer is not tokenizer else None,
        label_names=list(task.label_names) or None,
    )
    served = ServedModel(config, runner.dims, runner, tokenizer, target_tokenizer)
    scores = evaluate(served, task)
    result = {
        "family": args.family,
        "preset": "tiny",
        "parameters": int(model.count_params()),
        "precision": args.precision,
        "batch_size": args.batch_size,
        "optimizer": args.optimizer,
        "learning_rate": args.learning_rate if args.optimizer != "paper" else None,
        "warmup_steps": args.warmup,
        "dropout": args.dropout,
        "steps": int(model.optimizer.iterations),
        "train_examples": len(task.train),
        "test_examples": len(task.test),
        "epochs": len(history.history["loss"]),
        "train_seconds": round(train_seconds, 1),
        "pretrain_steps": args.pretrain_steps,
        "pretrain_learning_rate": args.pretrain_learning_rate if args.pretrain_steps else None,
        "pretrain_seconds": round(pretrain_seconds, 1),
        "prepare_seconds": round(prepared, 1),
        "evaluate_seconds": round(time.perf_counter() - eval_start, 1),
        "final_train_loss": round(history.history["loss"][-1], 4),
        "shared_test_targets": task.shared_targets,
        "vocabulary_sizes": [tokenizer.vocabulary_size, target_tokenizer.vocabulary_size],
        **scores,
    }
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"dates_zh_{args.family}.json"
    path.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print(json.dumps(result, indent=2, ensure_ascii=False))


def _pretrain_masked_lm(backbone, task, tokenizer, args, common) -> float:
    """Masked-LM pretraining of the backbone on the correct pairs; returns its seconds."""
    if not args.pretrain_steps:
        return 0.0
    texts = [(e.text, e.text2) for e in task.train if e.label == "correct"]
    model = EncoderOnlyMaskedLM(backbone)
    model.compile(
        optimizer=adamw_cosine(
            args.pretrain_learning_rate, args.pretrain_steps, warmup_steps=args.warmup
        ),
        loss=MaskedSparseCategoricalCrossentropy(label_smoothing=0.0),
        metrics=[MaskedAccuracy()],
        steps_per_execution=10,
    )
    start = time.perf_counter()
    model.fit(
        masked_lm_dataset(texts, tokenizer, **common),
        epochs=1000,
        callbacks=[StopAfter(float("inf"), args.pretrain_steps)],
        verbose=2,
    )
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
