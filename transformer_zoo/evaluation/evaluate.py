"""The one evaluation of a model on a task split, for every engine: what `metrics.json`,
`transformer-zoo evaluate`, `export --quantize` and the benchmarks report.

The model is a `ServedModel` (the Keras model through `KerasRunner`, a SavedModel, or the
ONNX files), so every engine is scored by the same code on the same inputs:

- encoder-decoder: greedy translation of every distinct source (each may run to 2 × its
  length + 16 tokens, within the context; all stop at `<eos>`), scored against all the
  targets that source has in the split (a G2P word with two pronunciations is right with
  either) → exact match, BLEU (sacreBLEU; its Chinese tokenizer when the targets are
  Chinese, named in `bleu_tokenize`), chrF, `wer` (share of sources matching none of
  their targets) and `per` (symbol edits to the closest target over its length: phones
  where any target is space-separated, else characters, in every output and target
  alike), per category; and teacher-forced token accuracy, `loss` (nats per token, no
  label smoothing) and perplexity of the references;
- decoder-only: greedy completion of every prompt (at most 64 tokens, within the
  context, however the prompts are batched) → exact match and BLEU of the completions
  when the examples have prompts; token accuracy and perplexity over the tokens the loss
  covers (the completion and its `<eos>`, or every token of
  plain text); a token stream is scored on its non-overlapping context-long windows
  (`text.formats.stream_window`, as training reads them);
- encoder-only: classification accuracy, per category.

Inputs are cut to the model's maximum length as the training pipelines cut them
(`transformer_zoo.text.formats`). A scoring of many examples takes minutes (the 12,753
G2P test words: half a minute with the Keras engine for a 0.9 M-parameter model), so each
of its two passes (`passes`), decoding and teacher forcing, shows a progress bar on a
terminal.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
from functools import partial

from transformer_zoo.errors import with_article
from transformer_zoo.evaluation.metrics import (
    OVERALL,
    accuracy,
    bleu,
    check_categories,
    chrf,
    exact_match,
    matches,
    per_category,
    phone_error_rate,
    space_separated,
    word_error_rate,
)
from transformer_zoo.evaluation.passes import predict, token_scores
from transformer_zoo.generation.search import SearchConfig
from transformer_zoo.text.formats import uncut_rows

log = logging.getLogger(__name__)  # examples cut to the context; the command line shows it

CJK = re.compile(r"[\u3400-\u9fff]")
ERRORS_PER_CATEGORY = 5


def evaluate(
    served,
    task,
    split: str = "test",
    limit: int | None = None,
    samples: int = 5,
    search: SearchConfig | None = None,
    progress: bool | None = None,
) -> dict:
    """The metrics of `served` on a split of `task` (see the module docstring).

    Args:
        served: a `ServedModel` of the task's family.
        task: the `Task` (`transformer_zoo.data.load_task`).
        split: `"test"` or `"valid"`.
        limit: score only the first this many examples (of a token stream: windows).
        samples: how many example predictions to include.
        search: how generated outputs are decoded (`Greedy()` by default,
            `BeamSearch(...)`, seeded `Sampling(...)`); the teacher-forced scores do not
            depend on it.
        progress: progress bars on standard error for the decoding and the teacher
            forcing (None: where standard error is a terminal).

    Returns:
        A JSON-ready dict: `split`, `examples`, the family's scores (under "all" over
        every example, and per category where examples have one), `samples` (the first
        predictions), `errors` (a few wrong predictions, likewise) and `seconds`.

    Raises:
        ValueError: an unknown or empty split, a model of another family, or an
            example category named "all".
        DataError: a token stream shorter than one window of the model's context.
    """
    if split not in ("test", "valid"):
        raise ValueError(f"`split` must be 'test' or 'valid'. Received: split={split!r}")
    if served.family != task.family:
        raise ValueError(
            f"{with_article(served.family).capitalize()} model cannot be scored on "
            f"{with_article(task.family)} task."
        )
    started = time.perf_counter()
    examples = list(getattr(task, split))
    if not task.stream:  # a token stream's texts are cut into windows first
        examples = examples[:limit]
    if not examples:
        raise ValueError(f"The {split} split is empty: nothing to evaluate.")
    if not task.stream and task.family != "encoder-only":  # ServedModel.classify says it
        _warn_cut(served, examples, split)
    result: dict = {"split": split, "examples": len(examples)}
    if task.stream:
        task.check_windows(served.tokenizer, served.max_length, (split,))  # names the file
        result.update(token_scores(served, examples, progress, limit))
        result["examples"] = result.pop("windows")
        result["seconds"] = round(time.perf_counter() - started, 2)
        return result
    scored = _distinct_sources(examples) if task.family == "encoder-decoder" else examples
    categories = [e.category for e in scored]  # "": none, scored under "all" only
    check_categories(categories)  # before the decoding, not after
    inputs, references = _inputs_and_references(scored)
    predictions = predict(served, scored, search, progress)
    if task.family == "encoder-only":
        result["accuracy"] = per_category(accuracy, predictions, references, categories)
    else:
        if predictions is not None:
            result.update(_text_scores(predictions, references, categories))
        if task.family == "encoder-decoder":
            result["sources"] = len(scored)
            result["wer"] = per_category(word_error_rate, predictions, references, categories)
            # Phones or characters, decided over the whole test set for every category.
            per = partial(phone_error_rate, spaced=space_separated(references))
            result["per"] = per_category(per, predictions, references, categories)
        result.update(token_scores(served, examples, progress))
    if predictions is not None:
        rows = list(zip(inputs, references, predictions, categories, strict=True))
        result["samples"] = [
            {"input": i, "reference": r, "prediction": p} for i, r, p, _ in rows[:samples]
        ]
        result["errors"] = _errors(rows)
    result["seconds"] = round(time.perf_counter() - started, 2)
    return result


def _warn_cut(served, examples, split: str) -> None:
    """One warning line when examples are longer than the model's context: they are
    scored cut to it, as training reads them (`translate` and `generate` refuse them)."""
    rows = uncut_rows(served.family, served.tokenizer, examples, served.target_tokenizer)
    cut = sum(len(row) > served.max_length for row in rows)
    if cut:
        log.warning(
            "%d of %d %s examples are longer than the model's %d tokens and are scored cut "
            "to it, as training reads them",
            cut,
            len(examples),
            split,
            served.max_length,
        )


def _distinct_sources(examples) -> list:
    """One example per distinct source, in first-seen order, whose `target` is the list of
    every target the source has (one string where it has one)."""
    targets: dict[str, list[str]] = {}
    first: dict[str, object] = {}
    for example in examples:
        targets.setdefault(example.source, []).append(example.target)
        first.setdefault(example.source, example)
    return [
        dataclasses.replace(e, target=t[0] if len(t) == 1 else t)
        for e, t in zip(first.values(), targets.values(), strict=True)
    ]


def _inputs_and_references(examples) -> tuple[list[str], list]:
    first = examples[0]
    if hasattr(first, "source"):
        return [e.source for e in examples], [e.target for e in examples]
    if hasattr(first, "prompt"):
        return [e.prompt for e in examples], [e.completion for e in examples]
    inputs = [e.text if e.text2 is None else f"{e.text}\t{e.text2}" for e in examples]
    return inputs, [e.label for e in examples]


def primary_score(result: dict) -> tuple[str, float]:
    """`(metric name, overall score)` of an `evaluate` result: exact match for generated
    text, else accuracy, else token accuracy (plain-text language models)."""
    for name in ("exact_match", "accuracy"):
        if name in result:
            return name, result[name][OVERALL]
    return "token_accuracy", result["token_accuracy"]


def _text_scores(predictions, references, categories) -> dict:
    tokenize = "zh" if any(CJK.search(str(r)) for r in references) else "13a"

    def corpus_bleu(p, r):
        return bleu(p, r, tokenize=tokenize)

    return {
        "exact_match": per_category(exact_match, predictions, references, categories),
        "bleu": per_category(corpus_bleu, predictions, references, categories),
        # BLEU counts word 4-grams, which short targets (a date, a number) do not have:
        # 0 at 100% exact match. chrF counts character n-grams.
        "bleu_tokenize": tokenize,
        "chrf": per_category(chrf, predictions, references, categories),
    }


def _errors(rows) -> dict[str, list[dict]]:
    """The first few wrong predictions of each category and, as `per_category` has its
    scores, of all examples ("all")."""
    errors: dict[str, list[dict]] = {}
    for given, reference, prediction, category in rows:
        if matches(prediction, reference):
            continue
        error = {"input": given, "reference": reference, "prediction": prediction}
        for group in [OVERALL, category] if category else [OVERALL]:
            wrong = errors.setdefault(group, [])
            if len(wrong) < ERRORS_PER_CATEGORY:
                wrong.append(error)
    return errors


def evaluate_directory(
    directory: str,
    split: str = "test",
    engine: str = "keras",
    test: str | None = None,
    model: str | None = None,
    search: SearchConfig | None = None,
    data: str | None = None,
    valid: str | None = None,
) -> dict:
    """Recomputes the evaluation of a run (or exported) directory on the task its
    `config.json` names (data, seed, example limit), with `engine` (`"keras"` reads the
    run's `model.keras`; `"onnx"` and `"saved_model"` an export).

    Args:
        directory: the run (or exported) directory whose task is scored.
        split: `"test"` or `"valid"`.
        engine: see above.
        test: a file to score instead of the run's test split (read as its data was);
            not with `split="valid"`.
        model: the directory of the model to score (an export of the run); default
            `directory`.
        search: how generated outputs are decoded (default greedy; see `evaluate`).
        data, valid: where the run's data file and `--valid` file are now, when they
            moved from where the run recorded them (`run_task.relocate`).

    Raises:
        RunError / DataError / ModelDirectoryError (ValueErrors): not a trained run or
            an export of one, or its data is unreadable; ValueError: `test` with
            `split="valid"`.
    """
    from transformer_zoo.data.run_task import relocate, run_task
    from transformer_zoo.run_directory import load_run_config
    from transformer_zoo.run_state import run_differences, run_identity
    from transformer_zoo.serving import load_served_model

    if test is not None and split != "test":
        raise ValueError(
            f"--test {test} scores that file, as the test split: it does not go with "
            f"--split {split} (a --valid FILE gives the new place of the run's own --valid file)."
        )
    served = load_served_model(model or directory, engine)
    config = load_run_config(directory) if model else served.config
    if config.family != served.family:
        raise ValueError(
            f"--model {model} holds {with_article(served.family)} model; {directory} "
            f"{with_article(config.family)} one."
        )
    changed = run_differences(run_identity(config), run_identity(served.config)) if model else []
    if changed:  # a score of another model, reported as this run's
        raise ValueError(
            f"--model {model} is an export of another run than {directory} "
            f"({', '.join(changed)} differ): export this run, or evaluate that one."
        )
    task = run_task(relocate(config, data, valid), test, split)
    return evaluate(served, task, "test" if test else split, search=search)


HEADLINE = ("examples", "exact_match", "accuracy", "wer", "per", "bleu", "chrf")


def headline(result: dict) -> dict:
    """The overall figures of an `evaluate` result as one flat dict of numbers:
    `examples`, then as they apply `exact_match`, `accuracy`, `wer` and `per`
    (fractions), `bleu`, `chrf`, `val_loss` (nats per token, no label smoothing),
    `perplexity` and `token_accuracy`."""
    flat = {"split": result["split"]}
    for name in HEADLINE:
        if name in result:
            value = result[name]
            flat[name] = value[OVERALL] if isinstance(value, dict) else value
    if "loss" in result:
        flat["val_loss"] = result["loss"]
    for name in ("perplexity", "token_accuracy", "tokens", "seconds"):
        if name in result:
            flat[name] = result[name]
    return flat
