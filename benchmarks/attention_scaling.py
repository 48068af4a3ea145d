"""Attention cost against sequence length: one training step at a fixed number of tokens.

With B·T = tokens fixed, every projection and FFN costs the same at every length, while
the attention scores cost B·H·T²·Dh = tokens·T·D: the O(N²) term of the paper's Table 1
appears as step time and memory growing linearly in T. Each length runs in its own
subprocess so that its peak resident memory (ru_maxrss) is its own.

Usage:
    .venv/bin/python benchmarks/attention_scaling.py [--tokens 4096] [--lengths 128,...,4096]

Writes benchmarks/results/attention_scaling.{json,md,png}.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
MODEL = dict(vocab=8000, d_model=512, heads=8, layers=2, d_ff=2048)


def one_length(length: int, tokens: int, steps: int) -> dict:
    """Runs in the child: time of one training step at (tokens // length, length)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import numpy as np

    from transformer_zoo.models import DecoderOnly

    batch = max(1, tokens // length)
    model = DecoderOnly(
        MODEL["vocab"], num_layers=MODEL["layers"], num_heads=MODEL["heads"],
        hidden_dim=MODEL["d_model"], intermediate_dim=MODEL["d_ff"], max_length=length,
    )  # fmt: skip
    model.compile(
        optimizer=keras.optimizers.Adam(1e-4),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    ids = np.random.default_rng(0).integers(1, MODEL["vocab"], (batch, length + 1)).astype("int32")
    model.train_on_batch(ids[:, :-1], ids[:, 1:])  # trace
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        model.train_on_batch(ids[:, :-1], ids[:, 1:])
        times.append(time.perf_counter() - start)
    return {
        "length": length,
        "batch": batch,
        "step_s": min(times),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    lengths = np.array([r["length"] for r in rows], float)
    times = np.array([r["step_s"] for r in rows])
    memory = np.array([r["peak_rss_mb"] for r in rows])
    slope, intercept = np.polyfit(lengths, times, 1)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    left.plot(lengths, times, "o-", label="measured")
    left.plot(
        lengths,
        intercept + slope * lengths,
        "--",
        label=f"{intercept:.2f} s + {slope * 1000:.2f} ms·T",
    )
    left.set_xscale("log", base=2)
    left.set_xlabel("sequence length T (batch = tokens / T)")
    left.set_ylabel("training step (s)")
    left.set_title("Step time at a fixed number of tokens")
    left.legend()
    right.plot(lengths, memory / 1024, "o-", color="tab:red")
    right.set_xscale("log", base=2)
    right.set_xlabel("sequence length T")
    right.set_ylabel("peak resident memory (GiB)")
    right.set_title("Memory: the (B, H, T, T) scores grow as T")
    fig.suptitle("Attention is O(T²) per sequence: linear in T at fixed tokens per batch")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--lengths", default="128,256,512,1024,2048,4096")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one_length(args.child, args.tokens, args.steps)))
        return
    rows = []
    for length in map(int, args.lengths.split(",")):
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(length), "--tokens", str(args.tokens),
             "--steps", str(args.steps)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        row = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(
            f"T={row['length']:5d} B={row['batch']:3d}: step {row['step_s']:.2f} s, "
            f"peak {row['peak_rss_mb']:.0f} MB",
            flush=True,
        )
    RESULTS.mkdir(exist_ok=True)
    report = {
        "model": MODEL,
        "tokens_per_batch": args.tokens,
        "rows": rows,
        "load": os.getloadavg(),
    }
    (RESULTS / "attention_scaling.json").write_text(json.dumps(report, indent=2))
    table = ["| T | batch | step (s) | peak memory (MB) |", "| --- | --- | --- | --- |"]
    table += [
        f"| {r['length']} | {r['batch']} | {r['step_s']:.2f} | {r['peak_rss_mb']:.0f} |"
        for r in rows
    ]
    (RESULTS / "attention_scaling.md").write_text("\n".join(table) + "\n")
    plot(rows, RESULTS / "attention_scaling.png")
    print("\n".join(table))
    print(f"wrote {RESULTS / 'attention_scaling.png'}")


if __name__ == "__main__":
    main()
