import numpy as np
import pytest

from transformer_zoo.visualize.curves import plot_curves
from transformer_zoo.visualize.plots import cjk_font_family, plot_attention_heads, plot_causal_mask


def _png(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    return data


def test_attention_heatmaps_are_written_with_chinese_labels(tmp_path):
    weights = np.random.default_rng(0).dirichlet(np.ones(4), size=(2, 3))  # (H=2, T=3, S=4)
    path = plot_attention_heads(
        weights, ["▁March", "▁5", ",", "</s>"], ["2", "年", "月"], str(tmp_path / "a.png")
    )
    _png(tmp_path / "a.png")
    assert path.endswith("a.png")
    assert cjk_font_family() is not None  # the packaged CJK font is registered


def test_causal_mask_picture_accepts_minus_infinity_above_the_diagonal(tmp_path):
    scores = np.where(np.tril(np.ones((5, 5), bool)), -1.0, -np.inf)
    plot_causal_mask(scores, list("abcde"), str(tmp_path / "c.png"))
    _png(tmp_path / "c.png")


def test_shapes_that_do_not_match_the_labels_are_rejected(tmp_path):
    with pytest.raises(ValueError, match="weights.shape"):
        plot_attention_heads(np.zeros((2, 3, 4)), ["a"] * 3, ["b"] * 3, str(tmp_path / "x.png"))
    with pytest.raises(ValueError, match="log_weights"):
        plot_causal_mask(np.zeros((3, 4)), list("abc"), str(tmp_path / "y.png"))


HISTORY = [
    {"epoch": 0.0, "loss": 2.4, "val_loss": 1.5, "val_exact_match": 0.1, "learning_rate": 1e-3},
    {"epoch": 1.0, "loss": 1.9, "val_loss": 1.2, "val_exact_match": 0.3, "learning_rate": 5e-4},
]
# The first bytes of each format, as `file(1)` knows them.
MAGIC = {".png": b"\x89PNG\r\n\x1a\n", ".pdf": b"%PDF-", ".svg": b"<?xml"}


def _draw_all(folder, extension):
    weights = np.random.default_rng(0).dirichlet(np.ones(4), size=(2, 3))
    scores = np.where(np.tril(np.ones((3, 3), bool)), -1.0, -np.inf)
    paths = [folder / f"{name}{extension}" for name in ("curves", "heads", "causal")]
    plot_curves(HISTORY, paths[0], "a run")
    plot_attention_heads(weights, list("abcd"), list("xyz"), str(paths[1]))
    plot_causal_mask(scores, list("xyz"), str(paths[2]))
    return paths


@pytest.mark.parametrize("extension", [".svg", ".pdf", ".png"])
def test_every_picture_takes_the_format_its_extension_names(tmp_path, extension):
    for path in _draw_all(tmp_path, extension):
        data = path.read_bytes()
        assert data.startswith(MAGIC[extension]), (path.name, data[:16])
        if extension == ".svg":
            assert b"<svg" in data


def test_drawing_leaves_the_callers_matplotlib_backend_and_figures_alone(tmp_path):
    import matplotlib
    import matplotlib.pyplot as plt

    before = matplotlib.get_backend()
    try:
        matplotlib.use("svg")
        figures = plt.get_fignums()
        _draw_all(tmp_path, ".png")
        assert matplotlib.get_backend() == "svg" and plt.get_fignums() == figures
    finally:
        matplotlib.use(before)


def test_a_metric_of_the_validation_split_only_has_a_panel_of_its_own(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    drawn = []
    save = Figure.savefig

    def keep(figure, *args, **kwargs):
        drawn.append(figure)
        return save(figure, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    plot_curves(HISTORY, tmp_path / "curves.png")
    metrics = {k.removeprefix("val_") for k in HISTORY[0]} - {"epoch", "learning_rate"}
    panels = {axis.get_title(): axis for axis in drawn[0].axes}
    assert set(panels) == metrics
    for name in metrics:
        curves = {line.get_label(): list(line.get_ydata()) for line in panels[name].lines}
        expected = {
            label: [row[key] for row in HISTORY]
            for key, label in ((name, "train"), (f"val_{name}", "valid"))
            if key in HISTORY[0]
        }
        assert curves == expected
