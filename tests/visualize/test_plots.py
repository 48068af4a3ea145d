import numpy as np
import pytest

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
