"""tinyshakespeare, character level: our `DecoderOnly` trained with `model.fit` on
nanoGPT's CPU recipe, and nanoGPT's own `train.py` run in the same benchmark, one right
after the other.

nanoGPT's README CPU command: 4 layers, 4 heads, width 128, context 64, batch 12, 2,000
iterations, dropout 0, AdamW (lr 1e-3, 100 warmup steps, cosine to 1e-4, betas 0.9/0.99,
weight decay 0.1 on matrices only, gradient norm clipped at 1). Data: `input.txt`, first 90%
train, last 10% validation, random windows per batch (`get_batch`). Ours is the same model
size and recipe, the same number of tokens seen (2,000 x 12 x 64), through the library's
public API (`DecoderOnly`, `keras.optimizers.AdamW`, `model.fit`, XLA off unless
`--jit-compile on`: at this size XLA's compilation costs more than it saves); characters are
ids 1..65 (0 is our padding id, never a target). Then a second recipe of ours, the best
found for less wall time: the same model and batch, 1,200 steps (60% of the token budget) at
twice the peak rate (`--fast-steps`, `--fast-learning-rate`; 0 steps skips it).

Validation loss (nats per character): nanoGPT's own estimate at step 2,000 (`--eval_iters`
random batches), and ours on the same number of random validation batches plus on 200
batches (a steadier figure). Wall time: the whole training, compilation included, and the
median step time once compiled.

nanoGPT needs torch: `--torch-python` points at a separate venv's python (torch is never a
dependency of this package), `--nanogpt` at nanoGPT's code (default ../shared/peers/nanogpt);
both are checked, with `--corpus`, before any training. Without `--torch-python` only our
run is measured.

Usage:
    .venv/bin/python benchmarks/shakespeare_char.py [--corpus PATH] [--torch-python PY] [--cli]

`--corpus` defaults to ../shared/data/tinyshakespeare/input.txt.

`--cli` also runs the same recipe through `transformer-zoo train` (the issue's command-line
form) and scores it with `transformer-zoo evaluate`.

`--recipe gpu` is nanoGPT's GPU recipe instead (`config/train_shakespeare_char.py`: 6
layers, 6 heads, width 384, context 256, batch 64, dropout 0.2, 5,000 iterations, bf16;
nanoGPT with `torch.compile`, ours with `mixed_bfloat16` and XLA), for a machine with a GPU.
nanoGPT's README: validation loss 1.4697 in about 3 minutes on one A100. Our side runs on the
backend `KERAS_BACKEND` names: JAX on a GPU machine that has JAX and not TensorFlow.
`--steps N` shortens either recipe (the cosine then ends at N) for a quick run.

Writes benchmarks/results/shakespeare_char[_gpu].json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from transformer_zoo.models import DecoderOnly  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.machine import (  # noqa: E402
    check_directory,
    check_file,
    check_python,
    cpu_flags,
    gpu_devices,
)

RESULTS = ROOT / "benchmarks" / "results"
WORK = ROOT / "runs" / "bench_shakespeare_char"
NANOGPT = ROOT.parent / "shared" / "peers" / "nanogpt"
# What run_nanogpt runs of nanoGPT's code, and what that code imports (prepare.py: requests).
NANOGPT_FILES = ("train.py", "config/train_shakespeare_char.py", "data/shakespeare_char/prepare.py")
NANOGPT_MODULES = ("torch", "numpy", "requests")
LR, MIN_LR, WARMUP = 1e-3, 1e-4, 100


@dataclass(frozen=True)
class Recipe:
    """One of nanoGPT's shakespeare_char recipes, as both sides run it."""

    name: str
    sizes: dict
    context: int
    batch: int
    steps: int
    eval_iters: int  # nanoGPT's estimate_loss batches
    dropout: float
    precision: str  # our dtype policy; nanoGPT's own default for its device
    fast_steps: int  # our second, shorter recipe (0: none)
    eval_interval: int  # our estimate_loss every so many steps (0: only at the end)
    published: str


RECIPES = {
    # nanoGPT README's CPU command. The second recipe: the same model, batch and schedule's
    # shape, 60% of the token budget with twice the rate. On the 2-core AVX2 EPYC it reached
    # 1.859 (1.866 on 200 batches) in 1,200 steps; 1,000 steps at 3e-3 gave 1.874 (1.880),
    # 800 at 3e-3 1.945.
    "cpu": Recipe(
        "cpu", dict(num_layers=4, num_heads=4, hidden_dim=128, intermediate_dim=512), 64, 12,
        2000, 20, 0.0, "float32", 1200, 0,
        "Published (nanoGPT README, CPU): validation loss 1.88 in about 3 minutes.",
    ),
    # config/train_shakespeare_char.py as nanoGPT's README runs it on a GPU.
    "gpu": Recipe(
        "gpu", dict(num_layers=6, num_heads=6, hidden_dim=384, intermediate_dim=1536), 256, 64,
        5000, 200, 0.2, "mixed_bfloat16", 0, 250,
        "Published (nanoGPT README, one A100): validation loss 1.4697 in about 3 minutes.",
    ),
}  # fmt: skip
FAST_LR = 2e-3


def splits(corpus: Path) -> tuple[np.ndarray, np.ndarray, list[str]]:
    text = corpus.read_text(encoding="utf-8")
    chars = sorted(set(text))
    index = {c: i + 1 for i, c in enumerate(chars)}  # 0 stays the padding id
    ids = np.array([index[c] for c in text], np.int32)
    cut = int(0.9 * len(ids))
    return ids[:cut], ids[cut:], chars


def windows(ids: np.ndarray, count: int, context: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """`count` random windows: inputs and their next characters (nanoGPT's `get_batch`)."""
    starts = rng.integers(0, len(ids) - context, count)
    offsets = starts[:, None] + np.arange(context)[None, :]
    return ids[offsets], ids[offsets + 1]


class NanoGptSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup, then a cosine from `peak` to `peak / 10` at `steps` (nanoGPT's get_lr;
    its CPU command: 1e-3 to 1e-4 over 2,000 steps)."""

    def __init__(self, steps: int, peak: float = LR):
        self.steps, self.peak, self.floor = steps, peak, peak * MIN_LR / LR

    def __call__(self, step):
        step = keras.ops.cast(step, "float32")
        warm = self.peak * (step + 1) / (WARMUP + 1)
        ratio = keras.ops.clip((step - WARMUP) / (self.steps - WARMUP), 0.0, 1.0)
        cosine = self.floor + 0.5 * (1.0 + keras.ops.cos(np.pi * ratio)) * (self.peak - self.floor)
        return keras.ops.where(step < WARMUP, warm, cosine)

    def get_config(self):
        return {"steps": self.steps, "peak": self.peak}


class StepTimes(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.ends = []

    def on_train_batch_end(self, batch, logs=None):
        self.ends.append(time.perf_counter())


def mean_loss(model, x: np.ndarray, y: np.ndarray, rows: int) -> float:
    """The mean next-character loss over `x`, computed on the device `rows` windows at a
    time (the compiled test step; logits never leave the device)."""
    if hasattr(model, "jax_state_sync"):  # inside fit on JAX, the weights live in its state
        model.jax_state_sync()
    total = 0.0
    for start in range(0, len(x), rows):
        part = slice(start, start + rows)
        total += float(model.test_on_batch(x[part], y[part])) * len(x[part])
    return total / len(x)


class EstimateLoss(keras.callbacks.Callback):
    """nanoGPT's `estimate_loss` every `interval` steps and before the first: the mean loss
    on `batches` fresh random batches of each split. Its time counts in the wall time, as
    nanoGPT's does."""

    def __init__(self, recipe: Recipe, splits: dict, interval: int, seed: int):
        super().__init__()
        self.recipe, self.splits, self.interval = recipe, splits, interval
        self.rng = np.random.default_rng(seed + 2)
        self.curve: list[dict] = []

    def estimate(self, step: int) -> None:
        point = {"step": step}
        for name, ids in self.splits.items():
            x, y = windows(ids, self.recipe.eval_iters * self.recipe.batch, self.recipe.context, self.rng)  # fmt: skip
            point[name] = mean_loss(self.model, x, y, self.recipe.batch * 10)
        self.curve.append(point)

    def on_train_begin(self, logs=None):
        self.estimate(0)

    def on_train_batch_end(self, batch, logs=None):
        if (batch + 1) % self.interval == 0:
            self.estimate(batch + 1)


def train_ours(
    recipe: Recipe, train_ids, valid_ids, vocabulary: int, seed: int, steps_per_execution: int,
    jit: bool, steps: int, peak: float = LR, eval_interval: int = 0,
):  # fmt: skip
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    x, y = windows(train_ids, steps * recipe.batch, recipe.context, rng)
    keras.config.set_dtype_policy(recipe.precision)
    model = DecoderOnly(
        vocabulary, max_length=recipe.context, dropout=recipe.dropout, **recipe.sizes
    )
    keras.config.set_dtype_policy("float32")
    optimizer = keras.optimizers.AdamW(
        learning_rate=NanoGptSchedule(steps, peak), weight_decay=0.1, beta_1=0.9, beta_2=0.99,
        global_clipnorm=1.0,
    )  # fmt: skip
    optimizer.exclude_from_weight_decay(var_names=["bias", "gamma", "beta"])
    model.compile(
        optimizer=optimizer,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit,
        steps_per_execution=steps_per_execution,
    )
    times = StepTimes()
    callbacks = [times]
    if eval_interval:
        if eval_interval % steps_per_execution:
            raise SystemExit("--eval-interval must be a multiple of --steps-per-execution")
        estimates = EstimateLoss(recipe, {"train": train_ids, "val": valid_ids}, eval_interval, seed)  # fmt: skip
        callbacks.append(estimates)
    start = time.perf_counter()
    model.fit(
        x, y, batch_size=recipe.batch, epochs=1, shuffle=False, verbose=0, callbacks=callbacks
    )
    wall = time.perf_counter() - start
    periods = np.diff(times.ends) / steps_per_execution
    loss = {}
    for name, batches in (("same_as_nanogpt", recipe.eval_iters), ("200_batches", 200)):
        vx, vy = windows(valid_ids, batches * recipe.batch, recipe.context, np.random.default_rng(seed + 1))  # fmt: skip
        loss[name] = mean_loss(model, vx, vy, recipe.batch * 10)
    return model, {
        "parameters": int(model.count_params()),
        "wall_s": wall,
        "step_ms_median": float(np.median(periods) * 1000) if len(periods) else None,
        "val_loss": loss,
        "jit_compile": jit,
        "precision": recipe.precision,
        "steps": steps,
        "learning_rate": peak,
        "curve": estimates.curve if eval_interval else [],
    }


def sample(model, chars: list[str], context: int, length: int = 500, seed: int = 0) -> str:
    """Characters sampled at temperature 1 from a newline, the context sliding over the
    last `context` (nanoGPT's `sample.py` at its defaults, without top-k)."""
    rng = np.random.default_rng(seed)
    ids = [chars.index("\n") + 1]
    for _ in range(length):
        # One compiled shape: the window right-padded to the full context (the model is
        # causal, so the padding after the last character changes nothing before it).
        seen = ids[-context:]
        window = np.zeros((1, context), np.int32)
        window[0, : len(seen)] = seen
        logits = np.asarray(model.predict_on_batch(window))[0, len(seen) - 1].astype(np.float64)
        logits[0] = -np.inf
        probs = np.exp(logits - logits.max())
        ids.append(int(rng.choice(len(probs), p=probs / probs.sum())))
    return "".join(chars[i - 1] for i in ids[1:])


def run_cli(recipe: Recipe, corpus: Path, steps: int, steps_per_execution: int, jit: bool) -> dict:
    """The same recipe through the command line, in the form issue 13 gives: the file as
    one character stream, random windows, `--set` for the sizes, `--steps`; scored by
    `transformer-zoo evaluate` on every non-overlapping window of the validation text."""
    out = WORK / "cli"
    shutil.rmtree(out, ignore_errors=True)
    sizes = [f"{k}={v}" for k, v in recipe.sizes.items()] + [f"max_length={recipe.context}"]
    argv = [
        "train", "--family", "decoder-only", "--data", str(corpus), "--tokenizer", "char",
        "--set", *sizes, "--batch-size", str(recipe.batch), "--steps", str(steps),
        "--eval-every", str(steps), "--learning-rate", str(LR), "--min-learning-rate",
        str(MIN_LR), "--warmup-steps", str(WARMUP), "--weight-decay", "0.1", "--clip-norm",
        "1", "--dropout", str(recipe.dropout), "--precision", recipe.precision,
        *(["--jit"] if jit else []), "--steps-per-execution", str(steps_per_execution),
        "--seed", "1337", "--no-evaluate", "--verbose", "0", "--out", str(out),
    ]  # fmt: skip
    cli = [sys.executable, "-m", "transformer_zoo.cli"]
    start = time.perf_counter()
    subprocess.run(cli + argv, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - start
    scored = subprocess.run(
        cli + ["evaluate", str(out)], check=True, capture_output=True, text=True
    )
    scores = json.loads(scored.stdout.strip().splitlines()[-1])
    training = json.loads((out / "metrics.json").read_text())["training"]
    return {
        "command": "transformer-zoo " + " ".join(argv),
        "wall_s": wall,
        "train_seconds": training["train_seconds"],
        "val_loss": scores["val_loss"],
        "windows": scores["examples"],
    }


def run_nanogpt(
    recipe: Recipe, python: str, nanogpt: Path, corpus: Path, steps: int, eval_interval: int
) -> dict:
    work = WORK / f"nanogpt_{recipe.name}"
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(nanogpt, work)
    data = work / "data" / "shakespeare_char"
    shutil.copy(corpus, data / "input.txt")
    subprocess.run([python, "prepare.py"], cwd=data, check=True, capture_output=True)
    sizes = recipe.sizes
    # The CPU command as nanoGPT's README gives it; on a GPU, its config's own settings
    # (torch.compile, bf16, an estimate every 250 steps), as its README runs it.
    device = (
        ["--device=cpu", "--compile=False", "--log_interval=1"] if recipe.name == "cpu"
        else ["--device=cuda", "--compile=True", "--log_interval=10"]
    )  # fmt: skip
    # nanoGPT estimates its loss at step 0 and every `eval_interval` steps, inside its wall
    # time; ours, with no interval, only at the end and outside it. Its config's 250 then
    # cost it 9 estimates of 2 × eval_iters batches (about 8 s of a 150 s CPU run): given
    # the run's length, it estimates at its first and last step only.
    device.append(f"--eval_interval={eval_interval or steps}")
    command = [
        python, "train.py", "config/train_shakespeare_char.py", *device,
        f"--eval_iters={recipe.eval_iters}", f"--block_size={recipe.context}",
        f"--batch_size={recipe.batch}", f"--n_layer={sizes['num_layers']}",
        f"--n_head={sizes['num_heads']}", f"--n_embd={sizes['hidden_dim']}",
        f"--max_iters={steps}", f"--lr_decay_iters={steps}", f"--dropout={recipe.dropout}",
    ]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(command, cwd=work, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"nanoGPT failed ({' '.join(command)}):\n{done.stderr[-3000:]}")
    evals = re.findall(r"step (\d+): train loss ([\d.]+), val loss ([\d.]+)", done.stdout)
    step_ms = [float(t) for t in re.findall(r"iter \d+: loss [\d.]+, time ([\d.]+)ms", done.stdout)]
    final = [e for e in evals if int(e[0]) == steps]
    curve = [{"step": int(n), "train": float(t), "val": float(v)} for n, t, v in evals]
    torch_version = subprocess.run(
        [python, "-c", "import torch; print(torch.__version__, torch.get_num_threads())"],
        capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    return {
        "command": " ".join(command[1:]),
        "wall_s": wall,
        "step_ms_median": float(np.median(step_ms[10:])) if step_ms else None,
        "val_loss": float(final[0][2]) if final else None,
        "curve": curve,
        "torch": torch_version,
    }


def best(curve: list[dict]) -> str:
    """The lowest validation estimate on the way, and its step."""
    if not curve:
        return ""
    point = min(curve, key=lambda p: p["val"])
    return f"{point['val']:.4f} (step {point['step']:,})"


def plot(report: dict, path: Path) -> None:
    """Both sides' loss estimates against steps, train dashed, validation solid."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.2))
    sides = [("ours", report["ours"].get("curve"), "tab:blue")]
    if report.get("nanogpt"):
        sides.append(("nanoGPT", report["nanogpt"]["curve"], "tab:orange"))
    for name, curve, colour in sides:
        if not curve:
            continue
        steps = [p["step"] for p in curve]
        axes.plot(steps, [p["val"] for p in curve], color=colour, label=f"{name}, validation")
        axes.plot(steps, [p["train"] for p in curve], color=colour, linestyle="--", label=f"{name}, train")  # fmt: skip
    # The step-0 estimate (about ln 65) would flatten the rest.
    later = [p[k] for _, curve, _ in sides for p in curve or [] if p["step"] for k in ("train", "val")]  # fmt: skip
    if later:
        axes.set_ylim(min(later) * 0.97, max(later) * 1.02)
    axes.set_xlabel("step")
    axes.set_ylabel("loss (nats per character)")
    axes.set_title(f"tinyshakespeare, {report['recipe']} recipe: {report['machine'].split(',')[0]}")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def markdown(report: dict) -> str:
    ours, theirs = report["ours"], report.get("nanogpt")
    recipe = RECIPES[report["recipe"]]
    steps = ours["steps"]
    xla = "XLA on" if ours["jit_compile"] else "XLA off"
    lines = [
        f"Machine: {report['machine']} ({report['cpu_flags']}); load {report['load_before']} "
        f"-> {report['load_after']}",
        f"Recipe: {recipe.name} ({steps:,} steps, batch {recipe.batch}, context "
        f"{recipe.context}); ours on Keras {report['keras']}'s {report['backend']} backend, "
        f"{ours['precision']}",
        "",
        f"| run | val loss at the end (nanoGPT's estimate, {recipe.eval_iters} batches) "
        "| val loss at the end (200 batches) | best estimate on the way | wall time (s) "
        "| median step (ms) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
        f"| ours: DecoderOnly, model.fit, {xla} | {ours['val_loss']['same_as_nanogpt']:.4f} | "
        f"{ours['val_loss']['200_batches']:.4f} | {best(ours.get('curve'))} | {ours['wall_s']:.1f} "
        f"| {ours['step_ms_median']:.1f} |",
    ]  # fmt: skip
    fast = report.get("fast")
    if fast:
        lines.append(
            f"| ours, {fast['steps']:,} steps at peak rate {fast['learning_rate']:g} "
            f"({fast['steps'] / steps:.0%} of the tokens) | {fast['val_loss']['same_as_nanogpt']:.4f} | "
            f"{fast['val_loss']['200_batches']:.4f} | | {fast['wall_s']:.1f} | {fast['step_ms_median']:.1f} |"
        )
    cli = report.get("cli")
    if cli:
        lines.append(
            f"| ours through the CLI (`train --steps {steps}`, process wall time) | | "
            f"{cli['val_loss']:.4f} (all {cli['windows']} windows) | | {cli['wall_s']:.1f} | |"
        )
    if theirs:
        loss = f"{theirs['val_loss']:.4f}" if theirs["val_loss"] is not None else "n/a"
        lines.append(
            f"| nanoGPT train.py (torch {theirs['torch'][0]}) | {loss} | | "
            f"{best(theirs['curve'])} | {theirs['wall_s']:.1f} | {theirs['step_ms_median']:.1f} |"
        )
        lines += ["", f"nanoGPT's wall time over ours: {theirs['wall_s'] / ours['wall_s']:.2f}x"
                  " (the same recipe)"]  # fmt: skip
        if fast:
            lines.append(
                f"nanoGPT's wall time over our {fast['steps']:,}-step recipe: "
                f"{theirs['wall_s'] / fast['wall_s']:.2f}x"
            )
    lines += ["", recipe.published, "",
              "500 characters sampled from our model:", "", "```", report["sample"], "```"]  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--corpus", type=Path, default=ROOT.parent / "shared/data/tinyshakespeare/input.txt"
    )
    parser.add_argument("--recipe", choices=sorted(RECIPES), default="cpu")
    parser.add_argument("--steps", type=int, help="shorten the recipe (its cosine ends here)")
    parser.add_argument(
        "--torch-python",
        help="a python with torch and requests, to run nanoGPT (without it: ours only)",
    )
    parser.add_argument(
        "--nanogpt", type=Path, default=NANOGPT,
        help="nanoGPT's code, with --torch-python (default ../shared/peers/nanogpt)",
    )  # fmt: skip
    parser.add_argument(
        "--eval-interval", type=int,
        help="both sides estimate the loss every so many steps (default: the recipe's: 250 "
        "on the GPU recipe; on the CPU recipe ours only at the end, nanoGPT every 250)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=1337)
    parser.add_argument("--steps-per-execution", type=int, default=50)
    parser.add_argument(
        "--jit-compile", choices=("on", "off"),
        help="XLA for our train step (default: off for the CPU recipe on TensorFlow, where "
        "compiling costs more than it saves; on otherwise, and always on JAX)",
    )  # fmt: skip
    parser.add_argument("--cli", action="store_true", help="also run the recipe through the CLI")
    parser.add_argument(
        "--fast-steps", type=int,
        help="the second recipe's steps (0: skip it; default: the recipe's); its peak rate "
        "is --fast-learning-rate",
    )  # fmt: skip
    parser.add_argument("--fast-learning-rate", type=float, default=FAST_LR)
    args = parser.parse_args()
    check_file(__file__, "--corpus", args.corpus)
    if args.torch_python:
        args.torch_python = check_python(
            __file__, "--torch-python", args.torch_python, NANOGPT_MODULES
        )
        check_directory(__file__, "--nanogpt", args.nanogpt, NANOGPT_FILES)
    recipe = RECIPES[args.recipe]
    steps = args.steps or recipe.steps
    fast_steps = recipe.fast_steps if args.fast_steps is None else args.fast_steps
    interval = recipe.eval_interval if args.eval_interval is None else args.eval_interval
    backend = keras.backend.backend()
    if args.jit_compile is None:
        jit = backend == "jax" or recipe.name != "cpu"
    else:
        jit = args.jit_compile == "on" or backend == "jax"
    WORK.mkdir(parents=True, exist_ok=True)
    train_ids, valid_ids, chars = splits(args.corpus)
    gpus, gpu_name = gpu_devices()
    report = {
        "recipe": recipe.name,
        "machine": f"{gpu_name}, " if gpus else "",
        "backend": backend,
        "keras": keras.__version__,
        "cpu_flags": cpu_flags(),
        "load_before": [round(x, 2) for x in os.getloadavg()],
        "tokens_seen": steps * recipe.batch * recipe.context,
    }
    report["machine"] += f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs"
    vocabulary = len(chars) + 1
    model, report["ours"] = train_ours(
        recipe, train_ids, valid_ids, vocabulary, args.seed, args.steps_per_execution, jit, steps,
        eval_interval=interval,
    )  # fmt: skip
    report["sample"] = sample(model, chars, recipe.context)
    print(json.dumps(report["ours"]), flush=True)
    if fast_steps:
        _, report["fast"] = train_ours(
            recipe, train_ids, valid_ids, vocabulary, args.seed, args.steps_per_execution, jit,
            fast_steps, args.fast_learning_rate,
        )  # fmt: skip
        print(json.dumps(report["fast"]), flush=True)
    if args.cli:
        report["cli"] = run_cli(recipe, args.corpus, steps, args.steps_per_execution, jit)
        print(json.dumps(report["cli"]), flush=True)
    if args.torch_python:
        report["nanogpt"] = run_nanogpt(
            recipe, args.torch_python, args.nanogpt, args.corpus, steps, interval
        )
        print(json.dumps(report["nanogpt"]), flush=True)
    report["load_after"] = [round(x, 2) for x in os.getloadavg()]
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = "shakespeare_char" + ("" if recipe.name == "cpu" else f"_{recipe.name}")
    (RESULTS / f"{name}.json").write_text(json.dumps(report, indent=2) + "\n")
    (RESULTS / f"{name}.md").write_text(markdown(report))
    if report["ours"]["curve"] or report.get("nanogpt"):
        plot(report, RESULTS / f"{name}.png")
    print(markdown(report))


if __name__ == "__main__":
    main()
