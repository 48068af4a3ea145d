"""The quality bar: each family's `tiny` preset trained on `builtin:dates-zh` with the
default `transformer-zoo train` settings, evaluated on the held-out test split.

- encoder-decoder: exact match of greedy translations (whole string) and BLEU, per
  category (dates, numbers, times); the bar is ≥99% exact match within ~3 minutes of
  training on the 2-core development machine;
- decoder-only: exact match and BLEU of greedy completions of "source =>";
- encoder-only: accuracy of "is this Chinese a correct translation?" (near misses).

Each run is exactly `transformer-zoo train --family F --out runs/quality/F [FLAGS]`
(the command is recorded); the machine's load average is recorded with the timings,
since the machine may be shared.

    .venv/bin/python benchmarks/quality.py [--family encoder-decoder ...] [-- --time-budget 180]

Writes benchmarks/results/quality.json (one entry per family, kept across calls) and
quality.md, and prints the entry of each family run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

RESULTS = Path(__file__).resolve().parent / "results"
FAMILIES = ("encoder-decoder", "decoder-only", "encoder-only")
BAR = 0.99


def _percent(value) -> str:
    return "–" if value is None else f"{100 * value:.2f}%"


def run_family(family: str, out_root: str, flags: list[str]) -> dict:
    """Trains and evaluates one family through the CLI's own code path."""
    from transformer_zoo.cli import build_parser
    from transformer_zoo.cli.train_arguments import config_from_args
    from transformer_zoo.train.trainer import train

    out = os.path.join(out_root, family)
    argv = ["train", "--family", family, "--out", out, *flags]
    config = config_from_args(build_parser().parse_args(argv))
    if os.path.exists(out):
        shutil.rmtree(out)  # a benchmark measures a fresh run
    load_before = os.getloadavg()
    started = time.perf_counter()
    result = train(config)
    wall = time.perf_counter() - started
    metrics = result.metrics
    with open(os.path.join(out, "config.json"), encoding="utf-8") as file:
        run_config = json.load(file)
    test = metrics["test"]
    entry = {
        "command": "transformer-zoo " + shlex.join(argv),
        "settings": config.identity(),
        "parameters": run_config["extra"]["parameters"],
        "vocabulary_sizes": run_config["extra"]["vocabulary_sizes"],
        "training": metrics["training"],
        "wall_seconds": round(wall, 1),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "test_examples": test["examples"],
        "evaluate_seconds": test["seconds"],
        "shared_test_targets": run_config["extra"].get("shared_test_targets"),
    }
    for key in ("exact_match", "bleu", "accuracy", "perplexity", "token_accuracy"):
        if key in test:
            entry[key] = test[key]
    entry["samples"] = test.get("samples", [])[:3]
    return entry


def markdown(results: dict) -> str:
    lines = [
        "# Quality bar: `tiny` presets on `builtin:dates-zh`",
        "",
        "Held-out test split (no source shared with training). Exact match is greedy "
        "decoding, whole string. Train time excludes data preparation and evaluation; "
        "the load average (1 minute, before → after) shows how busy the shared 2-core "
        "machine was.",
        "",
        "| family | metric | all | dates | numbers | times | BLEU | steps | train s | load |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for family in FAMILIES:
        entry = results.get(family)
        if not entry:
            continue
        name = "exact match" if "exact_match" in entry else "accuracy"
        scores = entry.get("exact_match") or entry.get("accuracy")
        bleu = entry.get("bleu", {}).get("all")
        training = entry["training"]
        load = f"{entry['load_average_before'][0]} → {entry['load_average_after'][0]}"
        steps, seconds = str(training["steps"]), str(training["train_seconds"])
        pretraining = training.get("pretraining")
        if pretraining:  # masked-LM steps first
            steps = f"{pretraining['steps']} MLM + {steps}"
            seconds = f"{pretraining['seconds']} + {seconds}"
        lines.append(
            f"| {family} | {name} | {_percent(scores['all'])} | "
            + " | ".join(_percent(scores.get(c)) for c in ("dates", "numbers", "times"))
            + f" | {'–' if bleu is None else f'{bleu:.2f}'} | {steps} | {seconds} | {load} |"
        )
    lines += ["", "Commands (each writes its run directory):", ""]
    for family in FAMILIES:
        if family in results:
            entry = results[family]
            lines.append(f"- {family}: `{entry['command']}`")
    translation = results.get("encoder-decoder")
    if translation:
        em = translation["exact_match"]["all"]
        shared = translation.get("shared_test_targets") or {}
        lines += [
            "",
            f"Encoder-decoder: {'meets' if em >= BAR else 'misses'} the bar of "
            f"{BAR:.0%} exact match ({_percent(em)}) after "
            f"{translation['training']['train_seconds']} s of training; greedy decoding of "
            f"the {translation['test_examples']} test sources took "
            f"{translation['evaluate_seconds']} s.",
            "",
            "Test targets that also occur as training targets (sources never do): "
            + ", ".join(f"{k} {v}" for k, v in shared.items())
            + " of "
            + str(translation["test_examples"])
            + ".",
        ]
    lines += ["", f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", action="append", choices=FAMILIES, help="default: all")
    parser.add_argument("--out-root", default=os.path.join("runs", "quality"))
    parser.add_argument("--report", action="store_true", help="only rewrite quality.md")
    parser.add_argument("flags", nargs="*", help="more `train` flags, after --")
    args = parser.parse_args()
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "quality.json"
    results = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    if args.report:
        (RESULTS / "quality.md").write_text(markdown(results), encoding="utf-8")
        return
    for family in args.family or FAMILIES:
        entry = run_family(family, args.out_root, args.flags)
        results[family] = entry
        path.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        (RESULTS / "quality.md").write_text(markdown(results), encoding="utf-8")
        print(json.dumps(entry, indent=2, ensure_ascii=False), flush=True)


if __name__ == "__main__":
    main()
