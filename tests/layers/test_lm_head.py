import numpy as np
import pytest

from tests.helpers import np_gelu, np_layer_norm
from transformer_zoo.layers import LMHead, TokenAndPositionEmbedding

rng = np.random.default_rng(3)


def test_tied_head_projects_with_the_transposed_token_matrix():
    emb = TokenAndPositionEmbedding(30, 8, 6)
    emb(np.ones((1, 2), "int32"))
    head = LMHead(30, embedding=emb)
    h = rng.normal(size=(2, 4, 6)).astype("float32")
    np.testing.assert_allclose(np.asarray(head(h)), h @ np.asarray(emb.embeddings).T, atol=1e-5)
    assert not any("kernel" in w.path for w in head.weights)


def test_untied_head_with_bias():
    head = LMHead(30, use_bias=True)
    h = rng.normal(size=(2, 4, 6)).astype("float32")
    head(h)
    head.bias.assign(rng.normal(size=30).astype("float32"))
    expected = h @ np.asarray(head.kernel) + np.asarray(head.bias)
    np.testing.assert_allclose(np.asarray(head(h)), expected, atol=1e-5)


def test_bert_transform_is_dense_gelu_layernorm_before_the_projection():
    emb = TokenAndPositionEmbedding(30, 8, 6)
    emb(np.ones((1, 2), "int32"))
    head = LMHead(30, embedding=emb, use_bias=True, transform_activation="gelu")
    h = rng.normal(size=(2, 4, 6)).astype("float32")
    head(h)
    w, b = (np.asarray(v) for v in head.transform_dense.weights)
    gamma, beta = (np.asarray(v) for v in head.transform_norm.weights)
    t = np_layer_norm(np_gelu(h @ w + b), gamma, beta, 1e-12)
    expected = t @ np.asarray(emb.embeddings).T + np.asarray(head.bias)
    np.testing.assert_allclose(np.asarray(head(h)), expected, atol=1e-4)


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="vocabulary_size=0"):
        LMHead(0)
    with pytest.raises(ValueError, match="activation='tanh'"):
        LMHead(10, transform_activation="tanh")
    with pytest.raises(ValueError, match="pass the embedding again"):
        LMHead(10, tied=True)
    emb = TokenAndPositionEmbedding(12, 8, 6)
    with pytest.raises(ValueError, match="vocabulary_size=10"):
        LMHead(10, embedding=emb)
