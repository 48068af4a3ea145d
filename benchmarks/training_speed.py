"""Training throughput of our `DecoderOnly` against keras-hub's GPT-2, side by side.

Both models have the identical configuration of the issue: vocab 8000, sequence 256,
d_model 512, 8 heads, 6 layers, d_ff 2048, batch 16, dropout 0, Adam, a tied output
head (keras-hub: `GPT2Backbone` + its `ReversibleEmbedding` in reverse). For every
precision (float32, mixed_bfloat16) and `jit_compile` (off, on) both models are built and
compiled in this one process, then trained in alternating rounds (ours, theirs, ours, ...)
so that drift of this shared machine cancels. A round is one `model.fit` of `--steps`
steps; a callback stamps the start of every step, and tokens/s comes from the median
step period over all rounds (the first step of each `fit` call excluded). Timing whole
`fit` calls of a few steps instead measured mostly the call's own overhead: here a 2-step
`fit` took 10.2 s for 7.5 s of steps, and whole calls came out in multiples of about 5.1 s
for both libraries alike, which pulled every ratio towards 1.

Model FLOP utilisation: FLOPs per token = 6·N (N = parameters outside the position table,
a lookup, not a product; the tied head's matmul is counted through the embedding) +
12·L·T·D (attention scores and weighted values, forward and backward: PaLM's convention,
Chowdhery et al. 2022, appendix B), times tokens/s, divided by the peak that this process
measures for a large float32 and a bfloat16 `tf.matmul`. (Until 2026-12-05 N counted the
1,024 × 512 position table too: 2% more FLOPs, MFU 1-2 points higher for both libraries.)

Usage:
    .venv/bin/python benchmarks/training_speed.py [--rounds 3] [--steps 5]

Writes benchmarks/results/training_speed.json and training_speed.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from transformer_zoo.models import DecoderOnly  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
CONFIG = dict(vocab=8000, seq=256, d_model=512, heads=8, layers=6, d_ff=2048, batch=16)
POSITIONS = 1024  # both models' learned position table (GPT-2's size)


def matmul_peak(dtype: str, n: int = 4096, repeats: int = 5) -> float:
    """GFLOP/s of one large n×n matmul, the best of `repeats`."""
    a = tf.random.normal((n, n), dtype=tf.float32)
    a = tf.cast(a, dtype)
    fn = tf.function(lambda x: tf.matmul(x, x))
    fn(a).numpy()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn(a).numpy()
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best / 1e9


def build_ours(c):
    return DecoderOnly(
        c["vocab"], num_layers=c["layers"], num_heads=c["heads"], hidden_dim=c["d_model"],
        intermediate_dim=c["d_ff"], max_length=POSITIONS, dropout=0.0,
    )  # fmt: skip


def build_keras_hub(c):
    backbone = keras_hub.models.GPT2Backbone(
        vocabulary_size=c["vocab"], num_layers=c["layers"], num_heads=c["heads"],
        hidden_dim=c["d_model"], intermediate_dim=c["d_ff"], dropout=0.0,
        max_sequence_length=POSITIONS,
    )  # fmt: skip
    inputs = {
        "token_ids": keras.Input((None,), dtype="int32", name="token_ids"),
        "padding_mask": keras.Input((None,), dtype="int32", name="padding_mask"),
    }
    logits = backbone.token_embedding(backbone(inputs), reverse=True)
    return keras.Model(inputs, logits)


def dataset(c, steps: int, with_padding_mask_int: bool):
    rng = np.random.default_rng(0)
    ids = rng.integers(1, c["vocab"], size=(c["batch"] * steps, c["seq"] + 1)).astype("int32")
    mask = np.ones_like(ids[:, :-1])
    inputs = {
        "token_ids": ids[:, :-1],
        "padding_mask": mask if with_padding_mask_int else mask.astype(bool),
    }
    return tf.data.Dataset.from_tensor_slices((inputs, ids[:, 1:])).batch(c["batch"]).cache()


def compile_(model, jit: bool):
    model.compile(
        optimizer=keras.optimizers.Adam(1e-4),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit,
    )
    return model


class StepTimer(keras.callbacks.Callback):
    """The wall-clock periods between the starts of consecutive training steps of a `fit`
    call, from the second step on (the first period holds the call's start-up)."""

    def __init__(self):
        super().__init__()
        self.periods: list[float] = []
        self._last = None

    def on_train_begin(self, logs=None):
        self._last = None

    def on_train_batch_begin(self, batch, logs=None):
        now = time.perf_counter()
        if self._last is not None and batch > 1:
            self.periods.append(now - self._last)
        self._last = now


def time_fit(model, data, steps: int, timer: StepTimer | None = None) -> None:
    callbacks = [timer] if timer is not None else []
    model.fit(data, epochs=1, steps_per_epoch=steps, verbose=0, shuffle=False, callbacks=callbacks)


def measure_setting(policy: str, jit: bool, rounds: int, steps: int) -> dict:
    keras.config.set_dtype_policy(policy)
    keras.utils.set_random_seed(0)
    c = CONFIG
    models = {"ours": compile_(build_ours(c), jit), "keras_hub": compile_(build_keras_hub(c), jit)}
    data = {
        "ours": dataset(c, steps, False).repeat(),
        "keras_hub": dataset(c, steps, True).repeat(),
    }
    params = {name: m.count_params() for name, m in models.items()}
    for name, model in models.items():  # trace/compile and warm up
        time_fit(model, data[name], 2)
    timers = {name: StepTimer() for name in models}
    for _ in range(rounds):
        for name, model in models.items():
            time_fit(model, data[name], steps, timers[name])
    tokens = c["batch"] * c["seq"]
    result = {"policy": policy, "jit_compile": jit, "params": params}
    for name in models:
        periods = timers[name].periods
        result[f"{name}_tokens_per_s"] = tokens / statistics.median(periods)
        result[f"{name}_step_seconds"] = [round(x, 3) for x in periods]
    result["ratio"] = result["ours_tokens_per_s"] / result["keras_hub_tokens_per_s"]
    keras.config.set_dtype_policy("float32")
    return result


def flops_per_token(params: int, c=CONFIG) -> float:
    matrices = params - POSITIONS * c["d_model"]  # the position table is a lookup
    return 6 * matrices + 12 * c["layers"] * c["seq"] * c["d_model"]


def markdown(report: dict) -> str:
    lines = [
        f"Peak matmul here: {report['peak_gflops']['float32']:.0f} GFLOP/s float32, "
        f"{report['peak_gflops']['bfloat16']:.0f} GFLOP/s bfloat16.",
        "",
        "| precision | XLA | ours tok/s | keras-hub tok/s | ours / keras-hub | ours GFLOP/s | MFU ours | MFU keras-hub |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in report["settings"]:
        lines.append(
            f"| {r['policy']} | {'on' if r['jit_compile'] else 'off'} | "
            f"{r['ours_tokens_per_s']:.0f} | {r['keras_hub_tokens_per_s']:.0f} | "
            f"{r['ratio']:.2f}× | {r['ours_gflops']:.0f} | {r['ours_mfu']:.0%} | {r['keras_hub_mfu']:.0%} |"
        )
    best = report["best"]
    lines += [
        "",
        "Best setting of each library (MFU against the peak of the precision used):",
        "",
        "| precision | ours (setting) | keras-hub (setting) | ratio |",
        "| --- | --- | --- | --- |",
    ]
    for precision, b in best.items():
        lines.append(
            f"| {precision} | {b['ours']:.0f} tok/s (XLA {b['ours_jit']}) | "
            f"{b['keras_hub']:.0f} tok/s (XLA {b['keras_hub_jit']}) | {b['ratio']:.2f}× |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5, help="training steps per timed round")
    parser.add_argument("--policies", default="float32,mixed_bfloat16")
    parser.add_argument("--jit", default="off,on")
    args = parser.parse_args()

    peak = {"float32": matmul_peak("float32"), "bfloat16": matmul_peak("bfloat16")}
    print(f"peak matmul: {peak['float32']:.0f} GFLOP/s fp32, {peak['bfloat16']:.0f} GFLOP/s bf16")
    settings = []
    for policy in args.policies.split(","):
        for jit in args.jit.split(","):
            r = measure_setting(policy, jit == "on", args.rounds, args.steps)
            peak_here = peak["bfloat16" if "bfloat16" in policy else "float32"]
            for name in ("ours", "keras_hub"):
                gflops = r[f"{name}_tokens_per_s"] * flops_per_token(r["params"][name]) / 1e9
                r[f"{name}_gflops"] = gflops
                r[f"{name}_mfu"] = gflops / peak_here
            print(
                f"{policy:15s} XLA {jit:3s}: ours {r['ours_tokens_per_s']:7.0f} tok/s, "
                f"keras-hub {r['keras_hub_tokens_per_s']:7.0f} tok/s, ratio {r['ratio']:.2f}×, "
                f"MFU ours {r['ours_mfu']:.0%} keras-hub {r['keras_hub_mfu']:.0%}",
                flush=True,
            )
            settings.append(r)
    best = {}
    for policy in args.policies.split(","):
        rows = [r for r in settings if r["policy"] == policy]
        ours = max(rows, key=lambda r: r["ours_tokens_per_s"])
        hub = max(rows, key=lambda r: r["keras_hub_tokens_per_s"])
        best[policy] = {
            "ours": ours["ours_tokens_per_s"], "ours_jit": ours["jit_compile"],
            "keras_hub": hub["keras_hub_tokens_per_s"], "keras_hub_jit": hub["jit_compile"],
            "ratio": ours["ours_tokens_per_s"] / hub["keras_hub_tokens_per_s"],
        }  # fmt: skip
    report = {
        "config": CONFIG,
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "load": os.getloadavg(),
        },
        "versions": {
            "tensorflow": tf.__version__,
            "keras": keras.__version__,
            "keras_hub": keras_hub.__version__,
        },
        "peak_gflops": peak,
        "settings": settings,
        "best": best,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "training_speed.json").write_text(json.dumps(report, indent=2))
    (RESULTS / "training_speed.md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
