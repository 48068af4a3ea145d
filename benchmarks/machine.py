"""What a benchmark records of the machine it ran on, and of the exporter that made its
cached files."""

from __future__ import annotations

import hashlib
from pathlib import Path

EXPORTER = Path(__file__).resolve().parent.parent / "transformer_zoo" / "export"
STAMP = ".exporter"  # in a cached export directory: the exporter_stamp() that made it


def exporter_stamp() -> str:
    """A hash of the exporter's source (`transformer_zoo/export/**.py`): a benchmark's
    cached export made by other code is made again, not timed as if it were current."""
    digest = hashlib.sha256()
    for path in sorted(EXPORTER.rglob("*.py")):
        digest.update(path.relative_to(EXPORTER).as_posix().encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def is_current_export(directory: Path) -> bool:
    """Whether `directory` holds an export stamped by the current exporter."""
    stamp = Path(directory) / STAMP
    return stamp.is_file() and stamp.read_text() == exporter_stamp()


def stamp_export(directory: Path) -> None:
    (Path(directory) / STAMP).write_text(exporter_stamp())


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


def gpu_devices() -> tuple[list[str], str | None]:
    """The GPUs that Keras's current backend sees, and the first one's name."""
    import keras

    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        found = [d for d in jax.devices() if d.platform == "gpu"]
        return [str(d) for d in found], (found[0].device_kind if found else None)
    if backend == "torch":
        import torch

        count = torch.cuda.device_count()
        return [f"cuda:{i}" for i in range(count)], (torch.cuda.get_device_name(0) if count else None)  # fmt: skip
    import tensorflow as tf

    found = tf.config.list_physical_devices("GPU")
    name = tf.config.experimental.get_device_details(found[0]).get("device_name") if found else None  # fmt: skip
    return [g.name for g in found], name
