"""The GPU check behind benchmarks/gpu_check.sh (see there)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from transformer_zoo.models import DecoderOnly  # noqa: E402

GPU_CONFIG = dict(
    vocab=8000, seq=256, d_model=512, heads=8, layers=6, d_ff=2048, batch=32, steps=20
)
CPU_CONFIG = dict(vocab=1000, seq=64, d_model=128, heads=4, layers=2, d_ff=512, batch=8, steps=3)


def build(c, strategy=None):
    scope = strategy.scope() if strategy else contextlib.nullcontext()
    with scope:
        model = DecoderOnly(
            c["vocab"], num_layers=c["layers"], num_heads=c["heads"], hidden_dim=c["d_model"],
            intermediate_dim=c["d_ff"], max_length=max(1024, c["seq"]),
        )  # fmt: skip
        model.compile(
            optimizer=keras.optimizers.Adam(1e-4),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            jit_compile=c.get("jit", False),
        )
    return model


def data(c, batch):
    ids = np.random.default_rng(0).integers(1, c["vocab"], (batch * c["steps"], c["seq"] + 1))
    ds = tf.data.Dataset.from_tensor_slices(
        (ids[:, :-1].astype("int32"), ids[:, 1:].astype("int32"))
    )
    return ds.batch(batch, drop_remainder=True).cache().repeat()


def throughput(c, policy: str, jit: bool, strategy=None) -> dict:
    keras.config.set_dtype_policy(policy)
    c = dict(c, jit=jit)
    batch = c["batch"] * (strategy.num_replicas_in_sync if strategy else 1)
    model = build(c, strategy)
    ds = data(c, batch)
    start = time.perf_counter()
    model.fit(ds, epochs=1, steps_per_epoch=2, verbose=0, shuffle=False)  # compile + warm-up
    warm = time.perf_counter() - start
    start = time.perf_counter()
    history = model.fit(ds, epochs=1, steps_per_epoch=c["steps"], verbose=0, shuffle=False)
    seconds = time.perf_counter() - start
    keras.config.set_dtype_policy("float32")
    return {
        "policy": policy,
        "jit_compile": jit,
        "replicas": strategy.num_replicas_in_sync if strategy else 1,
        "tokens_per_s": batch * c["seq"] * c["steps"] / seconds,
        "warmup_s": warm,
        "loss": float(history.history["loss"][-1]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="benchmarks/results/gpu_check.json")
    args = parser.parse_args()
    gpus = tf.config.list_physical_devices("GPU")
    report = {"gpus": [g.name for g in gpus], "tensorflow": tf.__version__, "runs": []}
    if gpus:
        details = tf.config.experimental.get_device_details(gpus[0])
        report["device"] = details.get("device_name")
        print(f"found {len(gpus)} GPU(s): {report['device']}")
        config = GPU_CONFIG
    else:
        print("no GPU found: running the small CPU version of the check")
        config = CPU_CONFIG
    report["config"] = config
    policies = ["float32", "mixed_bfloat16"] + (["mixed_float16"] if gpus else [])
    for policy in policies:
        for jit in (False, True):
            run = throughput(config, policy, jit)
            report["runs"].append(run)
            print(
                f"{policy:15s} XLA {'on ' if jit else 'off'}: {run['tokens_per_s']:9.0f} tokens/s "
                f"(warm-up {run['warmup_s']:.1f} s, loss {run['loss']:.3f})",
                flush=True,
            )
    if len(gpus) > 1:
        strategy = tf.distribute.MirroredStrategy()
        run = throughput(config, "mixed_bfloat16", False, strategy)
        report["mirrored"] = run
        print(f"MirroredStrategy over {run['replicas']} GPUs: {run['tokens_per_s']:.0f} tokens/s")
    else:
        report["mirrored"] = None
        print("MirroredStrategy smoke run skipped: fewer than two GPUs visible")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
