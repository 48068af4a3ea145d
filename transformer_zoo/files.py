"""Writing files so that a reader never sees half of one: the one atomic-write helper.

Everything the project writes (configs, tokenizers, metrics, checkpoints, ONNX files,
SavedModel directories) goes through `atomic_path`: the writer fills a path in a private
staging folder next to the target, and the result takes the target's name with one
`os.replace` once it is complete. A crash or an exception leaves the previous file (or
nothing) in place, never a truncated one.

Files get the usual mode (0o666 minus the umask, 0o777 for directories), as `open`
gives them: the staging folder is private, the file inside it is not. (`tempfile.mkstemp`
would make every file 0o600, which breaks serving as another user.) A file a writer made
0o600 itself (safetensors' `save_file` does) is given that mode before it is renamed.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import signal
import stat
import sys
import tempfile
import threading

STAGING_PREFIX = ".partial-"


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike):
    """A path for the block to write `path`'s new content to (a file or a directory).

    The yielded path has `path`'s name inside a fresh staging folder of the same parent,
    so suffix checks (Keras wants `.keras`) still pass. When the block ends without an
    error, it replaces `path` (a directory there is removed first); otherwise it is
    deleted and `path` is left as it was.

    Example:
    >>> import tempfile, os
    >>> folder = tempfile.mkdtemp()
    >>> with atomic_path(os.path.join(folder, "a.txt")) as temporary:
    ...     _ = open(temporary, "w").write("done")
    >>> open(os.path.join(folder, "a.txt")).read()
    'done'
    """
    path = os.fspath(path)
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(dir=parent, prefix=STAGING_PREFIX)
    temporary = os.path.join(staging, os.path.basename(path))
    try:
        yield temporary
        if os.path.isfile(temporary):
            os.chmod(temporary, _new_file_mode(staging))
        if os.path.isdir(temporary) and os.path.isdir(path):
            shutil.rmtree(path)
        os.replace(temporary, path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


@contextlib.contextmanager
def interruptions_deferred():
    """Ctrl-C (and SIGTERM, where a handler is set for it) during the block take effect
    when it ends: the file it writes is finished first. Keras' saving catches a
    KeyboardInterrupt in places with a bare `except` and goes on, and a run so
    interrupted trained on to its end. On the main thread only (elsewhere no signal
    handler runs)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    numbers = [signal.SIGINT, signal.SIGTERM]
    previous = {n: signal.getsignal(n) for n in numbers}
    deferred = [n for n in numbers if callable(previous[n])]  # not SIG_DFL or SIG_IGN
    came: list[int] = []
    for number in deferred:
        signal.signal(number, lambda signum, frame: came.append(signum))
    try:
        yield
    finally:
        for number in deferred:
            signal.signal(number, previous[number])
    if came:
        previous[came[0]](came[0], None)  # the handler that was set: it raises


@contextlib.contextmanager
def native_stderr_silenced():
    """The process's standard error (file descriptor 2) sent to the null device while the
    block runs: the lines C++ libraries write there straight, below Python's `sys.stderr`
    (TensorFlow's start-up, tensorflow_text's SentencePiece `LOG(INFO)`)."""
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def check_free_space(path: str | os.PathLike, needed: int, what: str) -> None:
    """Raises `OSError` (ENOSPC, one line naming `what` and the sizes) when the file
    system of `path` (or of its nearest existing parent) has fewer than `needed` bytes
    free, plus a margin: checked before a large write, since h5py and Keras, once the
    disk fills under them, fail with pages of tracebacks or a crash, not an error."""
    existing = _nearest_existing(path)
    free = shutil.disk_usage(existing).free
    wanted = int(needed * 1.1) + 2**20  # the format's own overhead
    if free < wanted:
        raise OSError(
            errno.ENOSPC,
            f"No space left on device for {what}: it needs about {wanted / 2**20:.1f} MB and "
            f"{free / 2**20:.1f} MB are free under {existing}",
        )


def check_writable(directory: str | os.PathLike) -> None:
    """Raises `OSError` (one line) unless `directory`, or the nearest parent of it that
    exists, is a directory this process may write in: checked before long work whose
    result goes there (a read-only mount, another user's folder)."""
    existing = _nearest_existing(directory)
    if not os.path.isdir(existing):
        raise OSError(errno.ENOTDIR, f"{existing} is a file, not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OSError(errno.EACCES, f"{existing} cannot be written to (read-only or not yours)")


def _nearest_existing(path: str | os.PathLike) -> str:
    """`path`, absolute, or its nearest parent that exists (what a write would create
    its folders under)."""
    existing = os.path.abspath(os.fspath(path))
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    return existing


def variables_bytes(model) -> int:
    """The bytes of `model`'s variables and its optimizer's: about what a `.keras` or
    `.weights.h5` file of it holds."""
    import numpy as np  # here, not at the top: this module is standard library only

    variables = list(model.variables)
    if getattr(model, "optimizer", None) is not None:
        variables += list(model.optimizer.variables)
    return sum(int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize for v in variables)


def _new_file_mode(folder: str) -> int:
    """0o666 less the umask: the mode of a file `open` creates, read off one made in
    `folder` (reading the umask means setting it, process-wide, which other threads
    writing files would see)."""
    probe = os.path.join(folder, ".mode")
    os.close(os.open(probe, os.O_CREAT | os.O_WRONLY, 0o666))
    return stat.S_IMODE(os.stat(probe).st_mode)


def remove_stale_staging(directory: str | os.PathLike) -> list[str]:
    """Deletes the staging folders a killed process left in `directory`; returns them."""
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        return []
    stale = [
        os.path.join(directory, name)
        for name in os.listdir(directory)
        if name.startswith(STAGING_PREFIX)
    ]
    for folder in stale:
        shutil.rmtree(folder, ignore_errors=True)
    return stale


def write_text(path: str | os.PathLike, text: str) -> None:
    """Writes `text` (UTF-8) to `path` atomically."""
    with atomic_path(path) as temporary, open(temporary, "w", encoding="utf-8") as file:
        file.write(text)


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Writes `data` to `path` atomically."""
    with atomic_path(path) as temporary, open(temporary, "wb") as file:
        file.write(data)


def write_json(path: str | os.PathLike, data) -> None:
    """Writes `data` as indented UTF-8 JSON (non-ASCII kept), atomically."""
    write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def read_json(path: str | os.PathLike):
    with open(path, encoding="utf-8") as file:
        return json.load(file)


def read_optional_json(directory: str | os.PathLike, name: str, kind=dict):
    """`directory/name` parsed, or None where there is no such file: a checkpoint's or a
    tokenizer's optional settings (`tokenizer_config.json`, `generation_config.json`, ...).

    Raises:
        ValueError: one line naming the file: unreadable, not JSON, or not a `kind` (a type
            or a tuple of types; a JSON object by default).
    """
    path = os.path.join(os.fspath(directory), name)
    if not os.path.isfile(path):
        return None
    try:
        value = read_json(path)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"Cannot read {path}: {error}") from None
    if not isinstance(value, kind):
        raise ValueError(
            f"Cannot read {path}: it holds a {type(value).__name__}, not the expected JSON"
        )
    return value
