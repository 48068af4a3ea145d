"""`transformer-zoo demo` (and `make demo`): the whole mission on the built-in task.

1. Train a tiny `EncoderDecoder` on `builtin:dates-zh` (English → Chinese dates, numbers
   and times) with `model.fit` and a progress bar: the whole recipe, unless
   `--time-budget` gives a time budget.
2. Evaluate it on the held-out test split: exact match, BLEU and chrF, per category.
3. Export it to SavedModel and ONNX (each export validates itself against Keras).
4. Translate held-out sentences with the Keras engine and with the TensorFlow-free
   onnxruntime engine, and print both with their per-sentence latency.
5. Draw `curves.png`, `attention.png` and `causal_mask.png` into the run directory.

`transformer-zoo attention RUN_DIR --text "..."` draws the two attention pictures for
any input.
"""

from __future__ import annotations

import os
import time
import unicodedata
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the command line imports this module before TensorFlow loads
    from transformer_zoo.train.config import TrainConfig
    from transformer_zoo.train.prepared import Prepared

DEFAULT_OUT = os.path.join("runs", "demo")
# The whole recipe (4 epochs, about 1,000 steps) took 281 s of training on a 2-core machine
# (the README's AVX2-only EPYC) and takes longer on a busy one; a time budget would cut it
# short there and miss the quality bar, so the demo trains it fully unless --time-budget
# says otherwise.
TIME_BUDGET = None
SHOWN = {"dates": 3, "numbers": 3, "times": 2}


def _width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _cell(text: str, width: int) -> str:
    return text + " " * max(0, width - _width(text))


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(_width(r[i]) for r in [header] + rows) for i in range(len(header))]
    lines = ["  ".join(_cell(h, w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(_cell(c, w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(lines)


def _held_out(task, seed: int):
    """A handful of test examples: the first few of each category."""
    import random

    examples = list(task.test)
    random.Random(seed).shuffle(examples)
    picked = []
    for category, count in SHOWN.items():
        picked += [e for e in examples if e.category == category][:count]
    return picked


def _score_lines(test: dict) -> list[str]:
    """One line per category (all first) of the test split's scores in `metrics.json`:
    exact match, BLEU and chrF."""
    exact, bleus, chrfs = test.get("exact_match", {}), test.get("bleu", {}), test.get("chrf", {})
    nan = float("nan")
    return [
        f"      {category:8s} exact match {exact[category]:7.2%}   "
        f"BLEU {bleus.get(category, nan):5.1f}   chrF {chrfs.get(category, nan):5.1f}"
        for category in ["all"] + [c for c in exact if c != "all"]
    ]


def _timed_translations(served, sources: list[str]) -> tuple[list[str], list[float]]:
    served.translate(sources[:1])  # warm-up: first calls build sessions and trace graphs
    texts, latencies = [], []
    for source in sources:
        start = time.perf_counter()
        texts.append(served.translate([source])[0])
        latencies.append((time.perf_counter() - start) * 1000)
    return texts, latencies


def demo_config(
    out: str = DEFAULT_OUT, time_budget: float | None = TIME_BUDGET, seed: int = 0
) -> TrainConfig:
    """The demo's training run: a tiny `EncoderDecoder` on `builtin:dates-zh`."""
    from transformer_zoo.train.config import TrainConfig

    return TrainConfig(
        family="encoder-decoder",
        preset="tiny",
        data="builtin:dates-zh",
        out=out,
        time_budget=time_budget,
        seed=seed,
    )


def prepare_demo(
    out: str = DEFAULT_OUT, time_budget: float | None = TIME_BUDGET, seed: int = 0
) -> Prepared:
    """`demo_config`'s run checked by `train.prepared.prepare` before anything is trained
    or written, for `run_demo`.

    Raises:
        ValueError (`RunError`): `out` is a file, or holds another run (the demo's with
            another --seed or --time-budget too).
    """
    from transformer_zoo.train.prepared import prepare

    return prepare(demo_config(out, time_budget, seed))


def run_demo(run: Prepared) -> dict:
    """Runs the five steps above for `run` (`prepare_demo`'s) and prints what each gives;
    returns the summary."""
    from transformer_zoo.data.tasks import load_task
    from transformer_zoo.export.run_export import export_run
    from transformer_zoo.serving import load_served_model
    from transformer_zoo.train.trainer import train
    from transformer_zoo.visualize.attention import draw_run_attention

    clock = time.perf_counter()
    out, time_budget, seed = run.config.out, run.config.time_budget, run.config.seed
    budget = f", at most {time_budget:.0f} s" if time_budget else ""
    print(f"[1/5] Training a tiny EncoderDecoder on builtin:dates-zh{budget} → {out}")
    result = train(run)
    if result.already_finished:
        print(f"      {out} already holds this finished run; reusing it (delete it to retrain)")
    metrics = result.metrics or {}
    test = metrics.get("test", metrics)

    print("[2/5] Held-out test split (greedy decoding, whole-string exact match)")
    exact, bleus, chrfs = test.get("exact_match", {}), test.get("bleu", {}), test.get("chrf", {})
    em, bleu, chrf = exact.get("all"), bleus.get("all"), chrfs.get("all")
    print("\n".join(_score_lines(test)))

    export_dir = os.path.join(out, "export")
    print(f"[3/5] Exporting to SavedModel and ONNX (validated against Keras) → {export_dir}")
    reports = export_run(out, export_dir, formats=("saved_model", "onnx"))
    onnx = reports.get("onnx", {})
    for name, report in onnx.items():
        print(
            f"      {name}: {report['nodes']} nodes (onnxruntime's fused operators), "
            f"max |ONNX − Keras| = {report['max_abs_diff']:.1e}"
        )
    saved = reports.get("saved_model", {})
    print(
        f"      saved_model/: signatures {', '.join(saved.get('signatures', []))}, "
        f"max |SavedModel − Keras| = {saved.get('max_abs_diff', float('nan')):.1e}"
    )

    print(
        "[4/5] Translating held-out sentences: Keras engine vs TensorFlow-free onnxruntime engine"
    )
    task = load_task("builtin:dates-zh", "encoder-decoder", seed=seed)
    examples = _held_out(task, seed)
    sources = [e.source for e in examples]
    keras_model = load_served_model(out, "keras")
    keras_texts, keras_ms = _timed_translations(keras_model, sources)
    onnx_texts, onnx_ms = _timed_translations(load_served_model(export_dir, "onnx"), sources)
    rows = [
        [e.source, e.target, k, o, f"{km:.1f}", f"{om:.1f}"]
        for e, k, o, km, om in zip(
            examples, keras_texts, onnx_texts, keras_ms, onnx_ms, strict=True
        )
    ]
    print(_table(["source", "reference", "Keras", "ONNX", "Keras ms", "ONNX ms"], rows))
    agree = sum(k == o for k, o in zip(keras_texts, onnx_texts, strict=True))
    correct = sum(o == e.target for o, e in zip(onnx_texts, examples, strict=True))
    print(
        f"      ONNX and Keras agree on {agree} of {len(rows)}; {correct} of {len(rows)} match the reference"
    )

    print("[5/5] Pictures")
    pictures = draw_run_attention(out, sources[0], model=keras_model.runner.model)
    curves = os.path.join(out, "curves.png")
    for path in (curves, pictures["attention"], pictures["causal_mask"]):
        print(f"      {path}")

    summary = {
        "run_dir": out,
        "train_seconds": (metrics.get("training") or {}).get("train_seconds"),
        "exact_match": em,
        "bleu": bleu,
        "chrf": chrf,
        "per_category": {"exact_match": exact, "bleu": bleus, "chrf": chrfs},
        "onnx_keras_agree": f"{agree}/{len(rows)}",
        "keras_ms_median": sorted(keras_ms)[len(keras_ms) // 2],
        "onnx_ms_median": sorted(onnx_ms)[len(onnx_ms) // 2],
        "pictures": [curves, pictures["attention"], pictures["causal_mask"]],
        "total_seconds": round(time.perf_counter() - clock, 1),
    }
    print(
        f"Summary: trained {summary['train_seconds'] or 0:.0f} s, test exact match {em:.2%}, "
        f"BLEU {bleu:.1f}, chrF {chrf:.1f}; ONNX = Keras on {summary['onnx_keras_agree']}; median latency "
        f"Keras {summary['keras_ms_median']:.1f} ms, ONNX {summary['onnx_ms_median']:.1f} ms; "
        f"{summary['total_seconds']:.0f} s in all."
    )
    return summary
