"""The one progress bar of long work on many inputs: `evaluate`'s two passes and the
serving commands (`generate`, `translate`, `embed`, `classify`) over a file of inputs.

A bar counts inputs a batch at a time on standard error, is shown where standard error
is a terminal unless the caller says otherwise, and is cleared when done: the scores or
the outputs are the result, not the bar.
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
