"""Evaluating a trained model on a task split: what `metrics.json` and
`transformer-zoo evaluate` report.

- encoder-decoder: greedy translation of every source (batched, whole string) → exact
  match and BLEU (sacreBLEU; its Chinese tokenizer when the targets are Chinese), per
  category, plus the teacher-forced token accuracy and perplexity;
- decoder-only: greedy completion of every prompt → exact match and BLEU of the
  completions (when the examples have prompts), plus perplexity;
- encoder-only: classification accuracy, per category.
"""

from __future__ import annotations

import re
import time
import warnings

import keras
import numpy as np

from transformer_zoo.generation import generate
from transformer_zoo.text import Tokenizer, pair_ids, prompt_ids, source_ids
from transformer_zoo.train.evaluation import accuracy, bleu, exact_match, per_category
from transformer_zoo.train.family_setup import EVAL_BATCH_SIZE, FamilySetup

DECODE_BATCH_SIZE = 512
CJK = re.compile(r"[\u3400-\u9fff]")


def _padded(rows: list[list[int]]) -> np.ndarray:
    out = np.zeros((len(rows), max(map(len, rows))), np.int32)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


def greedy_texts(
    model,
    rows: list[list[int]],
    tokenizer: Tokenizer,
    encoder_decoder: bool,
    batch_size: int = DECODE_BATCH_SIZE,
) -> list[str]:
    """Greedy continuations of id rows (sources or prompts), decoded with `tokenizer`.

    Rows are sorted by length so that a batch pads little; results come back in the
    order of `rows`. A translation may run to 2 × its source + 16 tokens, a completion
    to the model's maximum (both stop at `<eos>`).
    """
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
    texts: list[str] = [""] * len(rows)
    prefix = "encoder_" if encoder_decoder else ""
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        ids = _padded([rows[i] for i in chunk])
        longest = ids.shape[1]
        if encoder_decoder:
            room = min(model.max_length - 1, 2 * longest + 16)
            extra = {"decoder_start_id": tokenizer.bos_id}
        else:
            room = min(64, model.max_length - longest)
            extra = {}
        if room < 1:
            continue
        inputs = {f"{prefix}token_ids": ids, f"{prefix}padding_mask": ids != 0}
        result = generate(model, inputs, room, eos_id=tokenizer.eos_id, **extra)
        for i, tokens in zip(chunk, result.tokens, strict=True):
            texts[i] = tokenizer.decode(tokens)
    return texts


def _token_metrics(model, setup: FamilySetup, split: str) -> dict[str, float]:
    """Teacher-forced token accuracy and perplexity (no label smoothing)."""
    loss, metrics = setup.loss_and_metrics()
    model.compile(loss=loss, metrics=metrics)
    data = setup.dataset(split, model, EVAL_BATCH_SIZE)
    with warnings.catch_warnings():
        # Bucketed batches have no known count; reaching their end is not an error.
        warnings.filterwarnings("ignore", message="Your input ran out of data")
        scores = model.evaluate(data, verbose=0, return_dict=True)
    return {
        "token_accuracy": float(scores["masked_accuracy"]),
        "perplexity": float(scores["perplexity"]),
    }


def _text_scores(predictions, references, categories) -> dict:
    tokenize = "zh" if any(CJK.search(r) for r in references) else "13a"

    def corpus_bleu(p, r):
        return bleu(p, r, tokenize=tokenize)

    return {
        "exact_match": per_category(exact_match, predictions, references, categories),
        "bleu": per_category(corpus_bleu, predictions, references, categories),
    }


def evaluate_model(
    model: keras.Model, setup: FamilySetup, split: str = "test", samples: int = 5
) -> dict:
    """The metrics of `model` on a split of `setup.task` (see the module docstring).

    Args:
        model: the trained model (an `EncoderDecoder`, `DecoderOnly` or
            `EncoderOnlyClassifier`), float32 for exact figures.
        setup: the task and tokenizers it was trained with.
        split: `"test"` or `"valid"`.
        samples: how many example predictions to include.

    Returns:
        A JSON-ready dict: `split`, `examples`, the family's scores (per category where
        the examples have categories), `samples` and `seconds`.
    """
    started = time.perf_counter()
    examples = getattr(setup.task, split)
    if not examples:
        raise ValueError(f"The {split} split is empty: nothing to evaluate.")
    categories = [e.category or "all" for e in examples]
    result: dict = {"split": split, "examples": len(examples)}
    tokenizer, target = setup.tokenizer, setup.target_tokenizer
    if setup.family == "encoder-only":
        predictions = _classify(model, setup, examples)
        references = [e.label for e in examples]
        result["accuracy"] = per_category(accuracy, predictions, references, categories)
    else:
        encoder_decoder = setup.family == "encoder-decoder"
        if encoder_decoder:
            rows = [source_ids(tokenizer, e.source, model.max_length) for e in examples]
            references = [e.target for e in examples]
        else:
            rows = [prompt_ids(tokenizer, e.prompt, model.max_length) for e in examples]
            references = [e.completion for e in examples]
        if encoder_decoder or any(e.prompt for e in examples):
            predictions = greedy_texts(model, rows, target, encoder_decoder)
            result.update(_text_scores(predictions, references, categories))
        else:  # plain text: nothing to complete, perplexity says it all
            predictions = None
        result.update(_token_metrics(model, setup, split))
    if predictions is not None:
        result["samples"] = [
            {"input": _input_text(e), "reference": r, "prediction": p}
            for e, r, p in list(zip(examples, references, predictions, strict=True))[:samples]
        ]
    result["seconds"] = round(time.perf_counter() - started, 2)
    return result


def _input_text(example) -> str:
    for name in ("source", "prompt"):
        if hasattr(example, name):
            return getattr(example, name)
    return example.text if example.text2 is None else f"{example.text}\t{example.text2}"


def _classify(model, setup: FamilySetup, examples) -> list[str]:
    max_length = setup.backbone(model).max_length
    predicted: list[str] = []
    for start in range(0, len(examples), DECODE_BATCH_SIZE):
        chunk = examples[start : start + DECODE_BATCH_SIZE]
        packed = [pair_ids(setup.tokenizer, e.text, e.text2, max_length) for e in chunk]
        ids, segments = _padded([p[0] for p in packed]), _padded([p[1] for p in packed])
        logits = model.predict_on_batch(
            {"token_ids": ids, "padding_mask": ids != 0, "segment_ids": segments}
        )
        labels = np.argmax(np.asarray(logits, np.float32), axis=-1)
        predicted += [setup.task.label_names[i] for i in labels]
    return predicted


def evaluate_run(run_dir: str, split: str = "test") -> dict:
    """Recomputes the evaluation of a run directory written by `transformer-zoo train`:
    the same task (data, seed, example limit) and tokenizers, the saved `model.keras`.

    Raises:
        RunError / DataError (ValueErrors): not a finished run, or its data is unreadable.
    """
    import os

    from transformer_zoo.run import MODEL_FILE, RunError, check_run_files, load_run_config
    from transformer_zoo.text import load_tokenizers

    config = load_run_config(run_dir)
    settings = config.extra.get("train")
    if not isinstance(settings, dict):
        raise RunError(f"{run_dir!r} was not written by `transformer-zoo train`.")
    check_run_files(run_dir, config, MODEL_FILE)
    if split not in ("test", "valid"):
        raise ValueError(f"`split` must be 'test' or 'valid'. Received: split={split!r}")
    setup = FamilySetup.create(run_task(config), config.preset, load_tokenizers(run_dir))
    model = keras.saving.load_model(os.path.join(run_dir, MODEL_FILE), compile=False)
    return evaluate_model(model, setup, split)


def run_task(config):
    """The task a run was trained on, as its `RunConfig` names it: data, seed and the
    `train` example limit."""
    from transformer_zoo.train.family_setup import limit_task
    from transformer_zoo.train.task import load_task

    task = load_task(config.data, config.family, seed=config.seed or 0)
    return limit_task(task, (config.extra.get("train") or {}).get("max_examples"))
