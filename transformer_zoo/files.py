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
import json
import os
import shutil
import stat
import tempfile

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
