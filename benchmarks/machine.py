"""What a benchmark records of the machine it ran on, and of the exporter that made its
cached files; and the checks of its inputs (data paths, a peer's python) before any work."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
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


def input_error(script: str, flag: str, value, problem: str) -> SystemExit:
    """The one-line exit of a benchmark (`script`: its `__file__`) whose `flag` names
    something unusable, in argparse's form: `benchmarks/X.py: error: --corpus PATH: no
    such file`."""
    return SystemExit(f"benchmarks/{Path(script).name}: error: {flag} {value}: {problem}")


def check_file(script: str, flag: str, path) -> Path:
    """`path`, a file that exists; else the one-line exit naming `flag`."""
    path = Path(path)
    if not path.is_file():
        raise input_error(script, flag, path, _missing(path, "file"))
    return path


def check_directory(script: str, flag: str, path, holding: tuple[str, ...] = ()) -> Path:
    """`path`, a directory that holds the files `holding` (relative paths); else the
    one-line exit naming `flag` and the first thing missing."""
    path = Path(path)
    if not path.is_dir():
        raise input_error(script, flag, path, _missing(path, "directory"))
    for name in holding:
        if not (path / name).is_file():
            raise input_error(script, flag, path, f"it holds no {name}")
    return path


def check_python(script: str, flag: str, python: str, modules: tuple[str, ...] = ()) -> str:
    """`python` (a path, or a name on PATH), resolved: an interpreter that imports
    `modules`; else the one-line exit naming `flag`. Importing them takes a few seconds,
    spent before the benchmark's minutes of work rather than after them."""
    resolved, problem = _python_problem(python, modules)
    if problem:
        raise input_error(script, flag, python, problem)
    return resolved


def optional_python(
    script: str, flag: str, python: str, modules: tuple[str, ...], skipped: str
) -> str | None:
    """`python`, resolved as `check_python` does, or None after one warning line on
    standard error saying that the rows `skipped` names are skipped, and why."""
    resolved, problem = _python_problem(python, modules)
    if not problem:
        return resolved
    print(
        f"benchmarks/{Path(script).name}: warning: {flag} {python}: {problem}; "
        f"{skipped} are skipped",
        file=sys.stderr,
        flush=True,
    )
    return None


def _missing(path: Path, kind: str) -> str:
    if not path.exists():
        return f"no such {kind}"
    return f"not a {kind}"


def _python_problem(python: str, modules: tuple[str, ...]) -> tuple[str, str | None]:
    """The interpreter `python` resolves to, and what is wrong with it (None: nothing)."""
    resolved = shutil.which(python)
    if resolved is None:
        if os.path.exists(python):
            return python, "not an executable"
        return python, "no such file" if os.sep in python else "not found on PATH"
    if not modules:
        return resolved, None
    try:
        done = subprocess.run(
            [resolved, "-c", f"import {', '.join(modules)}"],
            capture_output=True,
            text=True,
            timeout=300,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return resolved, f"cannot run it ({error})"
    if done.returncode:
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        return resolved, f"it cannot import {', '.join(modules)} ({lines[-1]})"
    return resolved, None
