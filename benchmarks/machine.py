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
