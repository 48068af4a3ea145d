#!/usr/bin/env bash
# GPU check: mixed-precision and XLA training throughput of DecoderOnly (float32,
# mixed_bfloat16 and mixed_float16; XLA off and on where the backend has both). Under 2
# minutes on one NVIDIA GPU. On a machine without one it says "no GPU found" and runs a
# small CPU version. It runs on the backend KERAS_BACKEND names (TensorFlow by default;
# KERAS_BACKEND=jax on a GPU machine with JAX and no TensorFlow).
#
# Usage: benchmarks/gpu_check.sh [OUT_JSON]   (default benchmarks/results/gpu_check.json)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python3
exec "$PYTHON" benchmarks/gpu_check.py --out "${1:-benchmarks/results/gpu_check.json}"
