#!/usr/bin/env bash
# GPU check: mixed-precision and XLA training throughput of DecoderOnly, plus a
# MirroredStrategy smoke run when more than one GPU is visible. Under 5 minutes on one
# NVIDIA GPU. On a machine without one it says "no GPU found" and runs a small CPU version.
#
# Usage: benchmarks/gpu_check.sh [OUT_JSON]   (default benchmarks/results/gpu_check.json)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python3
exec "$PYTHON" benchmarks/gpu_check.py --out "${1:-benchmarks/results/gpu_check.json}"
