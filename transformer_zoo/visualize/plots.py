"""Pictures: attention heatmaps and the causal mask. matplotlib only, no TensorFlow.

Chinese tokens need a CJK font; the `cvttf-notosanscjk-regular` package ships Noto Sans
CJK, which is registered with matplotlib when present.
"""

from __future__ import annotations

import importlib.util
import math
import os
from collections.abc import Sequence

import numpy as np

from transformer_zoo.files import atomic_path

_FONT_FAMILY = None


def _figure(width: float, height: float, layout: str | None = None):
    """A Figure of its own, not pyplot's: the caller's backend and figures stay as they
    are, and `savefig` writes the format the file's extension names. `layout`:
    matplotlib's ("constrained" keeps a title clear of the panels' own)."""
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout=layout)


def picture_path(path: str | os.PathLike) -> str:
    """`path` as a str, once it names a picture file matplotlib can write: not a
    directory, and an extension that names the format (`.png`, `.svg`, `.pdf`, ...).
    matplotlib adds `.png` to a name without one (a directory's too), so the atomic
    write would not find the file it wrote and name its own temporary path.

    Raises:
        ValueError: a path that is not a str, a directory, or one without a known extension.
    """
    from matplotlib.backend_bases import FigureCanvasBase

    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(
            f"`path` must be the picture's file name. Received: {type(path).__name__} {path!r:.60}"
        )
    path = os.fspath(path)
    formats = sorted(FigureCanvasBase.get_supported_filetypes())
    extension = os.path.splitext(path)[1][1:].lower()
    if os.path.isdir(path):
        raise ValueError(
            f"{path} is a directory: `path` names the picture file to write, e.g. "
            f"{os.path.join(path, 'picture.png')}"
        )
    if extension not in formats:
        raise ValueError(
            f"`path` must end in an extension naming the picture's format ({', '.join(formats)}). "
            f"Received: path={path!r}"
        )
    return path


def cjk_font_family() -> str | None:
    """Register the packaged Noto Sans CJK font with matplotlib; its family name or None."""
    global _FONT_FAMILY
    if _FONT_FAMILY is None:
        spec = importlib.util.find_spec("cvttf_NotoSansCJK_Regular")
        _FONT_FAMILY = ""
        if spec is not None and spec.submodule_search_locations:
            from matplotlib import font_manager

            folder = list(spec.submodule_search_locations)[0]
            for name in os.listdir(folder):
                if name.lower().endswith((".otf", ".ttf")):
                    path = os.path.join(folder, name)
                    font_manager.fontManager.addfont(path)
                    _FONT_FAMILY = font_manager.FontProperties(fname=path).get_name()
                    break
    return _FONT_FAMILY or None


def _font_kwargs() -> dict:
    family = cjk_font_family()
    return {"fontfamily": [family, "DejaVu Sans"]} if family else {}


def _columns(panels: int, aspect: float, most: int = 4) -> int:
    """Columns of a grid of `panels` panels of width/height `aspect` whose whole comes
    closest to a 16:10 landscape (four wide panels of a long sentence in one row made a
    15:1 strip), `most` at most."""

    def whole(columns: int) -> float:  # the grid's width over its height
        return aspect * columns / math.ceil(panels / columns)

    return min(range(1, min(panels, most) + 1), key=lambda c: abs(math.log(whole(c) / 1.6)))


def plot_attention_heads(
    weights: np.ndarray,
    source_tokens: Sequence[str],
    target_tokens: Sequence[str],
    path: str | os.PathLike,
    title: str = "Cross-attention of the last decoder layer",
) -> str:
    """One heatmap per head: target tokens (rows) attending to source tokens (columns).

    Args:
        weights: (H, T, S) attention probabilities.
        source_tokens: S labels for the columns.
        target_tokens: T labels for the rows.
        path: the picture to write, in the format its extension names (`.png`, `.svg`,
            `.pdf`, ...).
        title: the figure title.

    Returns:
        `path`.
    """
    path = picture_path(path)
    weights = np.asarray(weights)
    if weights.ndim != 3 or weights.shape[1:] != (len(target_tokens), len(source_tokens)):
        raise ValueError(
            "`weights` must be (H, T, S) with T target and S source labels. Received: "
            f"weights.shape={weights.shape}, {len(target_tokens)} target and "
            f"{len(source_tokens)} source labels."
        )
    heads = weights.shape[0]
    cell = 0.32
    width = max(3.0, cell * len(source_tokens) + 1.5)
    height = max(2.5, cell * len(target_tokens) + 1.2)
    columns = _columns(heads, width / height)
    rows = math.ceil(heads / columns)
    fig = _figure(width * columns, height * rows, layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False)
    font = _font_kwargs()
    for head, ax in enumerate(axes.flat):
        if head >= heads:
            ax.axis("off")
            continue
        image = ax.imshow(weights[head], cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
        ax.set_title(f"head {head + 1}", fontsize=10)
        ax.set_xticks(range(len(source_tokens)))
        ax.set_xticklabels(source_tokens, rotation=90, fontsize=8, **font)
        ax.set_yticks(range(len(target_tokens)))
        ax.set_yticklabels(target_tokens, fontsize=9, **font)
        ax.set_xlabel("source token")
        if head % columns == 0:
            ax.set_ylabel("generated target token")
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8, label="attention weight")
    fig.suptitle(title, **font)
    with atomic_path(path) as temporary:
        fig.savefig(temporary, dpi=110, bbox_inches="tight")
    return path


def plot_causal_mask(
    log_weights: np.ndarray,
    tokens: Sequence[str],
    path: str | os.PathLike,
    title: str = "Masked self-attention (decoder, layer 1, head 1)",
) -> str:
    """The masked self-attention matrix: scores where a token may look, −∞ above the
    diagonal where the causal mask forbids looking ahead (paper §3.2.3).

    Args:
        log_weights: (T, T) log attention probabilities, i.e. the masked scores up to a
            per-row constant; entries above the diagonal are −∞.
        tokens: T labels (the decoder inputs).
        path: the picture to write, in the format its extension names (`.png`, `.svg`,
            `.pdf`, ...).
        title: the figure title.

    Returns:
        `path`.
    """
    path = picture_path(path)
    log_weights = np.asarray(log_weights, np.float64)
    size = len(tokens)
    if log_weights.shape != (size, size):
        raise ValueError(
            f"`log_weights` must be (T, T) for {size} tokens. Received: {log_weights.shape}"
        )
    from matplotlib import colormaps

    masked = np.ma.masked_invalid(np.where(np.isneginf(log_weights), np.nan, log_weights))
    cmap = colormaps["magma"].with_extremes(bad="#d9d9d9")
    side = max(4.0, 0.5 * size + 1.5)
    fig = _figure(side + 1.2, side)
    ax = fig.subplots()
    image = ax.imshow(masked, cmap=cmap, aspect="equal")
    font = _font_kwargs()
    for i in range(size):
        for j in range(size):
            if np.isneginf(log_weights[i, j]):
                ax.text(j, i, "−∞", ha="center", va="center", fontsize=8, color="#555555")
    ax.set_xticks(range(size))
    ax.set_xticklabels(tokens, rotation=90, fontsize=9, **font)
    ax.set_yticks(range(size))
    ax.set_yticklabels(tokens, fontsize=9, **font)
    ax.set_xlabel("key position (attended to)")
    ax.set_ylabel("query position")
    fig.colorbar(image, ax=ax, shrink=0.8, label="masked score (log softmax)")
    ax.set_title(title, **font)
    with atomic_path(path) as temporary:
        fig.savefig(temporary, dpi=110, bbox_inches="tight")
    return path
