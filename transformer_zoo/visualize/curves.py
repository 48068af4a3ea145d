"""Loss and metric curves of a run, from its `history.csv`, drawn with matplotlib."""

from __future__ import annotations

import csv
import math
import os

from transformer_zoo.files import atomic_path


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


def plot_curves(history: list[dict[str, float]], path: str | os.PathLike, title: str = "") -> None:
    """One panel per metric (loss first), training and validation curves over epochs;
    written atomically to `path`, in the format its extension names (PNG, SVG, PDF, ...).

    A metric measured on the validation split only (`val_exact_match`, the task's score
    that early stopping watches) has a panel of its own, with its one curve.

    Args:
        history: rows as `read_history` returns them.
        path: the picture to write.
        title: the figure title.
    """
    from matplotlib.figure import Figure

    keys = {k for row in history[:1] for k in row} - {"epoch", "learning_rate"}
    names = sorted({k.removeprefix("val_") for k in keys}, key=lambda n: (n != "loss", n))
    names = names or ["loss"]
    # A Figure of its own, not pyplot's: the caller's backend and figures stay as they are.
    figure = Figure(figsize=(4.5 * len(names), 3.6))
    axes = figure.subplots(1, len(names), squeeze=False)
    epochs = [row.get("epoch", i) + 1 for i, row in enumerate(history)]
    for axis, name in zip(axes[0], names, strict=True):
        for key, label in ((name, "train"), (f"val_{name}", "valid")):
            values = [row.get(key, math.nan) for row in history]
            if any(math.isfinite(v) for v in values):
                axis.plot(epochs, values, marker="o", markersize=3, label=label)
        axis.set_xlabel("epoch")
        axis.set_title(name)
        if name in ("loss", "perplexity"):
            axis.set_yscale("log")
        axis.grid(alpha=0.3)
        axis.legend()
    if title:
        figure.suptitle(title)
    figure.tight_layout()
    with atomic_path(path) as temporary:
        figure.savefig(temporary, dpi=100)
