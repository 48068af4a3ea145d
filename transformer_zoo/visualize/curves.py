"""Loss and metric curves of a run, from its `history.csv`, drawn with matplotlib."""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Mapping

from transformer_zoo.files import atomic_path
from transformer_zoo.visualize.plots import picture_path


def read_history(path: str | os.PathLike) -> list[dict[str, float]]:
    """The rows of a Keras `CSVLogger` file as floats (`epoch` counts from 0)."""
    with open(path, newline="", encoding="utf-8") as file:
        rows = list(csv.DictReader(file))
    return [{k: _float(v) for k, v in row.items() if k} for row in rows]


def _float(text: str) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


def epoch_axis_label(steps_per_epoch: int, steps: int, epochs: int) -> str:
    """The x axis of a run's curves: its epochs' length in optimizer steps, and the last
    epoch's where a budget (`--time-budget`, `--steps`) cut it short.

    >>> epoch_axis_label(50, 120, 3)
    'epoch (50 steps each; the last 20)'
    """
    last = steps - (epochs - 1) * steps_per_epoch
    if 0 < last < steps_per_epoch:
        return f"epoch ({steps_per_epoch} steps each; the last {last})"
    return f"epoch ({steps_per_epoch} steps each)"


def plot_curves(
    history: list[dict[str, float]],
    path: str | os.PathLike,
    title: str = "",
    xlabel: str = "epoch",
) -> None:
    """One panel per metric (loss first), training and validation curves over epochs;
    written atomically to `path`, in the format its extension names (PNG, SVG, PDF, ...).

    A metric measured on the validation split only (`val_exact_match`, the task's score
    that early stopping watches) has a panel of its own, with its one curve, in the
    validation curves' colour. Loss and perplexity are drawn on a log scale where they
    span more than a factor of 10, labelled in plain numbers (0.5, 1, 2); epochs are
    whole numbers.

    Args:
        history: rows as `read_history` returns them.
        path: the picture to write.
        title: the figure title.
        xlabel: what an epoch is (`"epoch (30 steps each)"`).

    Raises:
        ValueError: `history` is not a list of rows (a file name: read it with
            `read_history`), or `path` is not a picture file name (`plots.picture_path`).
    """
    if isinstance(history, (str, bytes, os.PathLike)):
        raise ValueError(
            "`history` must be the rows of a history file, as `read_history(path)` returns "
            f"them, not its name: plot_curves(read_history({os.fsdecode(history)!r}), ...)"
        )
    if isinstance(history, Mapping) or not all(isinstance(row, Mapping) for row in history):
        raise ValueError(
            "`history` must be a list of rows, each a dict of metric → value, as "
            f"`read_history` returns them. Received: {type(history).__name__} {history!r:.60}"
        )
    path = picture_path(path)
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

    keys = {k for row in history[:1] for k in row} - {"epoch", "learning_rate"}
    names = sorted({k.removeprefix("val_") for k in keys}, key=lambda n: (n != "loss", n))
    names = names or ["loss"]
    # A Figure of its own, not pyplot's: the caller's backend and figures stay as they are.
    figure = Figure(figsize=(4.5 * len(names), 3.6), layout="constrained")
    axes = figure.subplots(1, len(names), squeeze=False)
    epochs = [row.get("epoch", i) + 1 for i, row in enumerate(history)]
    plain = FuncFormatter(lambda value, _: f"{value:g}")
    for axis, name in zip(axes[0], names, strict=True):
        drawn = []
        # Fixed colours: train blue and valid orange in every panel, a valid-only one too.
        for key, label, color in ((name, "train", "C0"), (f"val_{name}", "valid", "C1")):
            values = [row.get(key, math.nan) for row in history]
            if any(math.isfinite(v) for v in values):
                axis.plot(epochs, values, marker="o", markersize=3, label=label, color=color)
                drawn += [v for v in values if math.isfinite(v)]
        axis.set_xlabel(xlabel)
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
        axis.set_title(name)
        positive = [v for v in drawn if v > 0]
        if name in ("loss", "perplexity") and positive and max(positive) > 10 * min(positive):
            axis.set_yscale("log")
            axis.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
            axis.yaxis.set_major_formatter(plain)
            axis.yaxis.set_minor_formatter(NullFormatter())
        axis.grid(alpha=0.3)
        axis.legend()
    if title:
        figure.suptitle(title)
    with atomic_path(path) as temporary:
        figure.savefig(temporary, dpi=100)
