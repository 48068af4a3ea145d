"""Cached vs uncached greedy decoding speed of a `DecoderOnly`, measured in one run.

The model: d_model 512, 6 layers, 8 heads, d_ff 2048, a 32,000-token vocabulary; a
16-token prompt, batch 1, 256 new tokens (no EOS, so every run makes all 256). Both
engines run compiled `tf.function` steps traced once before timing. Uncached decoding
recomputes the plain forward pass over the whole sequence for every new token
(`UncachedEngine`); cached decoding is the Keras engine (`CachedEngine` over
`KerasRunner`). (XLA, `jit_compile=True`, compiles the step again for every new cache
length, 2.5-4 s per token when measured: that is why the runner uses plain `tf.function`.)

Usage:
    .venv/bin/python benchmarks/generation.py [--new-tokens 256]

Writes benchmarks/results/generation.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from transformer_zoo.generation import UncachedEngine  # noqa: E402
from transformer_zoo.generation.decoding import keras_engine  # noqa: E402
from transformer_zoo.generation.greedy import greedy_search  # noqa: E402
from transformer_zoo.models import DecoderOnly  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def time_greedy(engine, prompt, new_tokens, repeats):
    """Best wall time of `repeats` greedy decodes, and the tokens of the last one."""
    greedy_search(engine, prompt, 2)  # traces the compiled functions
    best, tokens = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        tokens = greedy_search(engine, prompt, new_tokens).tokens
        best = min(best, time.perf_counter() - start)
    return best, tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--prompt-length", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()

    keras.utils.set_random_seed(0)
    model = DecoderOnly(
        32000, num_layers=6, num_heads=8, hidden_dim=512, intermediate_dim=2048, max_length=512
    )
    prompt = {"token_ids": np.random.default_rng(0).integers(1, 32000, (1, args.prompt_length))}

    cached_s, cached_tokens = time_greedy(
        keras_engine(model), prompt, args.new_tokens, args.repeats
    )
    uncached_s, uncached_tokens = time_greedy(
        UncachedEngine(model), prompt, args.new_tokens, args.repeats
    )
    result = {
        "model": "DecoderOnly d512 L6 H8 ff2048 V32000",
        "params": int(model.count_params()),
        "batch": 1,
        "prompt_length": args.prompt_length,
        "new_tokens": args.new_tokens,
        "cached_s": round(cached_s, 3),
        "uncached_s": round(uncached_s, 3),
        "cached_ms_per_token": round(1000 * cached_s / args.new_tokens, 2),
        "uncached_ms_per_token": round(1000 * uncached_s / args.new_tokens, 2),
        "speedup": round(uncached_s / cached_s, 2),
        "same_tokens": bool(np.array_equal(cached_tokens, uncached_tokens)),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "generation.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    print(f"cached vs uncached greedy speed-up: {result['speedup']}x")


if __name__ == "__main__":
    main()
