"""What a benchmark records of the machine it ran on."""

from __future__ import annotations

from pathlib import Path


def cpu_flags() -> str:
    """The matmul-relevant CPU features present (AMX, AVX-512 BF16, AVX-512, AVX2)."""
    try:
        flags = Path("/proc/cpuinfo").read_text().split("flags")[1].split("\n")[0]
    except (OSError, IndexError):
        return "unknown"
    found = [f for f in ("amx_bf16", "avx512_bf16", "avx512f", "avx2") if f" {f}" in flags]
    return ", ".join(found) or "none of avx2/avx512/amx"


def cpu_name() -> str:
    """The CPU's model name, as /proc/cpuinfo gives it."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"
