"""The one progress bar of long work on many inputs: `evaluate`'s two passes and the
serving commands (`generate`, `translate`, `embed`, `classify`) over a file of inputs.

A bar counts inputs a batch at a time on standard error, is shown where standard error
is a terminal unless the caller says otherwise, and is cleared when done: the scores or
the outputs are the result, not the bar.

`say`: the library's lines of progress on standard output (training's stages).
"""

from __future__ import annotations

import sys

from tqdm import tqdm


def progress_bar(total: int, what: str, show: bool | None, unit: str = "examples"):
    """A tqdm bar of `total` `unit`s named `what`. `show`: True or False, or None for
    "where standard error is a terminal" (tqdm's `disable=None`)."""
    return tqdm(
        total=total,
        desc=what,
        unit=f" {unit}",
        file=sys.stderr,
        disable=None if show is None else not show,
        leave=False,
        dynamic_ncols=True,
    )


def say(line: str) -> None:
    """Prints `line` on standard output, flushed, whatever its encoding: a character it
    cannot encode (a user's non-ASCII path, "…" under an ASCII or Latin-1 locale) is
    written escaped, where `print` raised `UnicodeEncodeError` and stopped the caller's
    `train` (the command line writes UTF-8 anyway)."""
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    try:
        line.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        line = line.encode("ascii", "backslashreplace").decode("ascii")
    print(line, flush=True)
