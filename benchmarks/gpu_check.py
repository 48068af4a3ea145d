"""The GPU check behind benchmarks/gpu_check.sh (see there).

It uses Keras alone (no `tf.data`, no `tf.config`), so it runs on whichever backend
`KERAS_BACKEND` names: TensorFlow by default, or JAX on a GPU machine that has JAX and not
TensorFlow. The models are `keras.ops` only, so they train on either.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.machine import gpu_devices  # noqa: E402
from transformer_zoo.models import DecoderOnly  # noqa: E402

GPU_CONFIG = dict(
    vocab=8000, seq=256, d_model=512, heads=8, layers=6, d_ff=2048, batch=32, steps=40
)
CPU_CONFIG = dict(vocab=1000, seq=64, d_model=128, heads=4, layers=2, d_ff=512, batch=8, steps=3)
STEPS_PER_EXECUTION = 10  # on a GPU, Python's per-step work would otherwise show in the rate


def jit_modes() -> tuple[bool, ...]:
    """XLA off and on where the backend has both; JAX always compiles with XLA (its "off"
    is op-by-op dispatch, which no one trains with) and torch's "on" is torch.compile."""
    return {"jax": (True,), "torch": (False,)}.get(keras.backend.backend(), (False, True))


def build(c: dict) -> keras.Model:
    model = DecoderOnly(
        c["vocab"], num_layers=c["layers"], num_heads=c["heads"], hidden_dim=c["d_model"],
        intermediate_dim=c["d_ff"], max_length=max(1024, c["seq"]),
    )  # fmt: skip
    model.compile(
        optimizer=keras.optimizers.Adam(1e-4),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=c["jit"],
        steps_per_execution=min(STEPS_PER_EXECUTION, c["steps"]),
    )
    return model


def throughput(c: dict, policy: str, jit: bool) -> dict:
    keras.config.set_dtype_policy(policy)
    c = dict(c, jit=jit)
    keras.utils.set_random_seed(0)
    ids = np.random.default_rng(0).integers(1, c["vocab"], (c["batch"] * c["steps"], c["seq"] + 1))
    x, y = ids[:, :-1].astype("int32"), ids[:, 1:].astype("int32")
    model = build(c)
    start = time.perf_counter()
    # Compilation and warm-up: one execution's worth of steps.
    warm_rows = c["batch"] * min(STEPS_PER_EXECUTION, c["steps"])
    model.fit(x[:warm_rows], y[:warm_rows], batch_size=c["batch"], epochs=1, verbose=0, shuffle=False)  # fmt: skip
    warm = time.perf_counter() - start
    start = time.perf_counter()
    history = model.fit(x, y, batch_size=c["batch"], epochs=1, verbose=0, shuffle=False)
    seconds = time.perf_counter() - start
    keras.config.set_dtype_policy("float32")
    return {
        "policy": policy,
        "jit_compile": jit,
        "tokens_per_s": c["batch"] * c["seq"] * c["steps"] / seconds,
        "step_ms": seconds / c["steps"] * 1000,
        "warmup_s": warm,
        "loss": float(history.history["loss"][-1]),
        "parameters": int(model.count_params()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="benchmarks/results/gpu_check.json")
    args = parser.parse_args()
    found, name = gpu_devices()
    report = {
        "backend": keras.backend.backend(),
        "keras": keras.__version__,
        "python": platform.python_version(),
        "gpus": found,
        "device": name,
        "runs": [],
    }
    print(f"Keras {keras.__version__} on the {report['backend']} backend")
    if found:
        print(f"found {len(found)} GPU(s): {name}")
        config = GPU_CONFIG
    else:
        print("no GPU found: running the small CPU version of the check")
        config = CPU_CONFIG
    report["config"] = config
    policies = ["float32", "mixed_bfloat16"] + (["mixed_float16"] if found else [])
    for policy in policies:
        for jit in jit_modes():
            run = throughput(config, policy, jit)
            report["runs"].append(run)
            print(
                f"{policy:15s} XLA {'on ' if jit else 'off'}: {run['tokens_per_s']:9.0f} tokens/s "
                f"({run['step_ms']:.1f} ms a step; warm-up {run['warmup_s']:.1f} s, "
                f"loss {run['loss']:.3f})",
                flush=True,
            )
    base = report["runs"][0]["tokens_per_s"]
    for run in report["runs"][1:]:
        print(f"{run['policy']} XLA {'on' if run['jit_compile'] else 'off'} / float32 "
              f"{'XLA on' if report['runs'][0]['jit_compile'] else 'XLA off'}: "
              f"{run['tokens_per_s'] / base:.2f}x")  # fmt: skip
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
