import re

import numpy as np
import pytest

from transformer_zoo.visualize.curves import epoch_axis_label, plot_curves
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


def _drawn_figure(monkeypatch, draw):
    from matplotlib.figure import Figure

    drawn = []
    save = Figure.savefig

    def keep(figure, *args, **kwargs):
        drawn.append(figure)
        return save(figure, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    draw()
    return drawn[0]


def test_a_metric_of_the_validation_split_only_has_a_panel_of_its_own(tmp_path, monkeypatch):
    figure = _drawn_figure(monkeypatch, lambda: plot_curves(HISTORY, tmp_path / "curves.png"))
    metrics = {k.removeprefix("val_") for k in HISTORY[0]} - {"epoch", "learning_rate"}
    panels = {axis.get_title(): axis for axis in figure.axes}
    assert set(panels) == metrics
    for name in metrics:
        curves = {line.get_label(): list(line.get_ydata()) for line in panels[name].lines}
        expected = {
            label: [row[key] for row in HISTORY]
            for key, label in ((name, "train"), (f"val_{name}", "valid"))
            if key in HISTORY[0]
        }
        assert curves == expected


def test_curves_read_in_plain_numbers_whole_epochs_and_fixed_colours(tmp_path, monkeypatch):
    """The log axes were labelled 8.2×10⁻¹ over a narrow range, the epochs 1.2, 1.4, and a
    validation-only panel drew 'valid' in the training colour."""
    history = [
        {"epoch": float(i), "loss": 60.0 / (i + 1) ** 3, "val_loss": 50.0 / (i + 1) ** 3,
         "perplexity": 4.2 - 0.1 * i, "val_perplexity": 4.0 - 0.1 * i, "val_wer": 0.5 - 0.1 * i}
        for i in range(4)
    ]  # fmt: skip
    figure = _drawn_figure(
        monkeypatch,
        lambda: plot_curves(history, tmp_path / "c.png", "t", "epoch (30 steps each)"),
    )
    panels = {axis.get_title(): axis for axis in figure.axes}
    loss, perplexity, wer = panels["loss"], panels["perplexity"], panels["wer"]
    assert loss.get_yscale() == "log"  # 60 → 0.8 spans more than a factor of 10
    assert perplexity.get_yscale() == "linear"  # 4.2 → 3.7 does not
    low, high = loss.get_ylim()  # matplotlib 3.10 also labels ticks outside the view
    labels = [
        tick.label1.get_text()
        for tick in loss.yaxis.get_major_ticks()
        if low <= tick.get_loc() <= high and tick.label1.get_text()
    ]
    assert labels and all("10" not in t or t in ("10", "100") for t in labels), labels
    assert not [t for t in loss.yaxis.get_ticklabels(minor=True) if t.get_text()]
    ticks = [t for t in loss.get_xticks() if 1 <= t <= 4]
    assert ticks and all(float(t).is_integer() for t in ticks), ticks
    assert loss.get_xlabel() == "epoch (30 steps each)"
    colours = {line.get_label(): line.get_color() for ax in figure.axes for line in ax.lines}
    assert colours == {"train": "C0", "valid": "C1"}  # the valid-only wer panel too
    assert [line.get_color() for line in wer.lines] == ["C1"]


def test_attention_heads_of_a_long_sentence_make_a_grid_not_a_strip(tmp_path, monkeypatch):
    """Four heads of a 28-piece source in one row made a 15:1 picture."""
    weights = np.random.default_rng(0).dirichlet(np.ones(28), size=(4, 8))  # (H, T, S)
    source, target = [f"s{i}" for i in range(28)], [f"t{i}" for i in range(8)]
    figure = _drawn_figure(
        monkeypatch,
        lambda: plot_attention_heads(weights, source, target, str(tmp_path / "a.png")),
    )
    width, height = figure.get_size_inches()
    assert 1 <= width / height <= 3, (width, height)
    assert len([ax for ax in figure.axes if ax.images]) == 4


def test_a_picture_path_without_a_format_or_a_directory_is_named_in_one_line(tmp_path):
    """matplotlib adds ".png" to a name without an extension, so the atomic write had
    failed with a FileNotFoundError naming its temporary `.partial-…` path, and a
    directory likewise; nothing is written, no staging folder is left."""
    weights = np.full((1, 2, 2), 0.5)
    no_extension = tmp_path / "heads"
    calls = {
        "heads": lambda path: plot_attention_heads(weights, list("ab"), list("xy"), path),
        "causal": lambda path: plot_causal_mask(np.zeros((2, 2)), list("ab"), path),
        "curves": lambda path: plot_curves(HISTORY, path),
    }
    for call in calls.values():
        with pytest.raises(ValueError, match=r"`path` must end in an extension .*png.*heads'$"):
            call(no_extension)
        with pytest.raises(
            ValueError, match=rf"^{re.escape(str(tmp_path))} is a directory: .*picture\.png$"
        ):
            call(tmp_path)
        with pytest.raises(ValueError, match=r"Received: path='.*h\.foo'"):
            call(str(tmp_path / "h.foo"))
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    calls["curves"](tmp_path / "CURVES.PNG")  # the extension's case does not matter
    _png(tmp_path / "CURVES.PNG")


def test_plot_curves_refuses_a_history_file_name_with_what_to_pass(tmp_path):
    """It had raised AttributeError: 'str' object has no attribute 'get'."""
    name = str(tmp_path / "history.csv")
    with pytest.raises(
        ValueError, match=r"plot_curves\(read_history\('.*history\.csv'\), \.\.\.\)"
    ):
        plot_curves(name, tmp_path / "c.png")
    with pytest.raises(ValueError, match="`history` must be a list of rows"):
        plot_curves(HISTORY[0], tmp_path / "c.png")
    assert not (tmp_path / "c.png").exists()


def test_the_epoch_axis_says_how_many_steps_the_budget_left_the_last_epoch():
    """curves.png said "epoch (50 steps each)" of a run whose budget cut its last epoch to
    20 steps. The steps of each epoch are counted here in a fit that a step budget cuts."""
    import keras

    from transformer_zoo.train.callbacks.budget import Budget

    ends = []

    class Count(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            ends.append(int(self.model.optimizer.iterations.numpy()))

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    x, y = np.zeros((40, 2)), np.zeros((40, 1))
    model.fit(x, y, batch_size=4, epochs=3, verbose=0, callbacks=[Budget(steps=23), Count()])
    per_epoch = np.diff([0, *ends])  # 10, 10, 3
    assert per_epoch[-1] < per_epoch[0]
    label = epoch_axis_label(int(per_epoch[0]), ends[-1], len(ends))
    assert label == f"epoch ({per_epoch[0]} steps each; the last {per_epoch[-1]})"
    assert epoch_axis_label(10, 30, 3) == "epoch (10 steps each)"  # a whole last epoch
