"""The HF BERT name table: every checkpoint tensor accounted for, layouts converted right."""

import json

import numpy as np
import pytest
from safetensors.numpy import save_file

from tests.helpers import minilm_dir, minilm_reference, np_layer_norm, np_softmax
from transformer_zoo.models.hf.bert import (
    BUFFERS,
    bert_weight_table,
    map_bert_weights,
    read_bert_checkpoint,
)
from transformer_zoo.models.hf.checkpoint_files import list_tensors

TINY = {
    "vocab_size": 11,
    "hidden_size": 8,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 12,
    "max_position_embeddings": 16,
    "type_vocab_size": 2,
}


def tiny_checkpoint(seed=0):
    """Random tensors under the names and torch layouts of a BertModel state dict."""
    rng = np.random.default_rng(seed)
    d, f = TINY["hidden_size"], TINY["intermediate_size"]

    def r(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    tensors = {
        "embeddings.word_embeddings.weight": r(TINY["vocab_size"], d),
        "embeddings.position_embeddings.weight": r(TINY["max_position_embeddings"], d),
        "embeddings.token_type_embeddings.weight": r(TINY["type_vocab_size"], d),
        "embeddings.LayerNorm.weight": r(d),
        "embeddings.LayerNorm.bias": r(d),
        "embeddings.position_ids": np.arange(TINY["max_position_embeddings"])[None],
        "pooler.dense.weight": r(d, d),
        "pooler.dense.bias": r(d),
    }
    for i in range(TINY["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        for name in ("query", "key", "value"):
            tensors[f"{p}attention.self.{name}.weight"] = r(d, d)  # (out, in)
            tensors[f"{p}attention.self.{name}.bias"] = r(d)
        tensors[f"{p}attention.output.dense.weight"] = r(d, d)
        tensors[f"{p}intermediate.dense.weight"] = r(f, d)
        tensors[f"{p}intermediate.dense.bias"] = r(f)
        tensors[f"{p}output.dense.weight"] = r(d, f)
        for name in ("attention.output.dense.bias", "output.dense.bias"):
            tensors[p + name] = r(d)
        for name in ("attention.output.LayerNorm", "output.LayerNorm"):
            tensors[f"{p}{name}.weight"] = r(d)
            tensors[f"{p}{name}.bias"] = r(d)
    return tensors


def test_reads_a_safetensors_file_and_converts_torch_layouts(tmp_path):
    tensors = tiny_checkpoint()
    save_file(tensors, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    config, slots = read_bert_checkpoint(tmp_path)
    assert config == TINY
    assert len(slots) == 5 + 14 * 2 + 2
    assert all(v.dtype == np.float32 for v in slots.values())
    t = tensors
    np.testing.assert_array_equal(slots["embeddings.token"], t["embeddings.word_embeddings.weight"])
    np.testing.assert_array_equal(slots["pooler.kernel"], t["pooler.dense.weight"].T)
    # A torch Linear computes x Wᵀ + b; the slot's Dense computes x K + b.
    x = np.random.default_rng(1).standard_normal((3, 8)).astype(np.float32)
    layer = "encoder.layer.1."

    def linear(name):
        return x @ t[layer + name + ".weight"].T + t[layer + name + ".bias"]

    def dense(slot):
        return x @ slots[f"blocks.1.{slot}.kernel"] + slots[f"blocks.1.{slot}.bias"]

    np.testing.assert_allclose(
        dense("self_attention.query"), linear("attention.self.query"), rtol=1e-6
    )
    key, value = np.split(dense("self_attention.key_value"), 2, axis=-1)  # keys first
    np.testing.assert_allclose(key, linear("attention.self.key"), rtol=1e-6)
    np.testing.assert_allclose(value, linear("attention.self.value"), rtol=1e-6)
    np.testing.assert_allclose(
        dense("self_attention.output"), linear("attention.output.dense"), rtol=1e-6
    )
    np.testing.assert_allclose(
        dense("feed_forward.intermediate")[:, :12], linear("intermediate.dense"), rtol=1e-6
    )
    np.testing.assert_array_equal(
        slots["blocks.1.feed_forward_norm.gamma"], t[layer + "output.LayerNorm.weight"]
    )


def test_missing_weight_is_an_error_naming_it():
    tensors = tiny_checkpoint()
    del tensors["encoder.layer.1.attention.self.value.bias"]
    with pytest.raises(
        ValueError, match=r"Missing: \['encoder.layer.1.attention.self.value.bias'\]"
    ):
        map_bert_weights(tensors, TINY)


def test_unused_weight_is_an_error_unless_ignored_on_purpose():
    tensors = tiny_checkpoint()
    tensors["cls.predictions.bias"] = np.zeros(11, np.float32)
    with pytest.raises(ValueError, match=r"Unused: \['cls.predictions.bias'\]"):
        map_bert_weights(tensors, TINY)
    assert len(map_bert_weights(tensors, TINY, ignore=("cls.",))) == 35


def test_bert_prefix_and_gamma_beta_names_are_read():
    tensors = tiny_checkpoint()
    renamed = {
        "bert." + k.replace("LayerNorm.weight", "LayerNorm.gamma"): v for k, v in tensors.items()
    }
    expected = map_bert_weights(tensors, TINY)
    got = map_bert_weights(renamed, TINY)
    assert list(got) == list(expected)
    assert all(np.array_equal(got[k], expected[k]) for k in expected)


def test_shape_that_does_not_fit_the_config_is_an_error():
    with pytest.raises(ValueError, match=r"blocks.0.feed_forward.intermediate.kernel.*\(8, 13\)"):
        map_bert_weights(tiny_checkpoint(), {**TINY, "intermediate_size": 13})
    with pytest.raises(ValueError, match="num_attention_heads"):
        map_bert_weights(tiny_checkpoint(), {**TINY, "num_attention_heads": 3})


def test_position_ids_buffer_must_be_the_identity():
    tensors = tiny_checkpoint()
    tensors["embeddings.position_ids"] = tensors["embeddings.position_ids"][:, ::-1]
    with pytest.raises(ValueError, match="position_ids"):
        map_bert_weights(tensors, TINY)
    del tensors["embeddings.position_ids"]  # transformers may leave the buffer out
    assert len(map_bert_weights(tensors, TINY)) == 35


def test_pooler_follows_the_checkpoint_unless_required():
    tensors = {k: v for k, v in tiny_checkpoint().items() if not k.startswith("pooler.")}
    assert "pooler.kernel" not in map_bert_weights(tensors, TINY)
    with pytest.raises(ValueError, match="pooler.dense.weight"):
        map_bert_weights(tensors, TINY, pooler=True)


def test_real_checkpoint_consumes_every_tensor():
    config = json.loads((minilm_dir() / "config.json").read_text())
    names = list_tensors(minilm_dir() / "model.safetensors")
    table = bert_weight_table(config)
    sources = {name for slot in table for name in slot.sources}
    assert set(names) == sources | set(BUFFERS)
    assert len(names) == 104 and len(table) == 91
    # The published parameter count of minilm_l6 (DESIGN.md).
    assert sum(int(np.prod(s)) for row in table for s in row.shapes) == 22_713_216


def erf(x):
    """Abramowitz & Stegun 7.1.26, |error| < 1.5e-7: vectorised, unlike `math.erf`, which
    would take seconds over a 256-token sequence."""
    sign, x = np.sign(x), np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    return sign * (1.0 - poly * np.exp(-x * x))


def gelu(x):
    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))  # exact GELU, BERT's "gelu"


def np_bert_embeddings(slots, config, ids):
    """BERT (Devlin et al. 2019) on the slots, written from the paper with numpy; mean
    pooling and L2 normalisation as sentence-transformers. `ids` is one unpadded sequence."""
    heads, eps = config["num_attention_heads"], config["layer_norm_eps"]
    s = slots
    x = (
        s["embeddings.token"][ids]
        + s["embeddings.position"][: len(ids)]
        + s["embeddings.segment"][0]
    )
    x = np_layer_norm(x, s["embeddings_norm.gamma"], s["embeddings_norm.beta"], eps)  # (T, D)
    t, d = x.shape
    for i in range(config["num_hidden_layers"]):
        b = f"blocks.{i}."

        def dense(h, name, b=b):
            return h @ s[b + name + ".kernel"] + s[b + name + ".bias"]

        q = dense(x, "self_attention.query").reshape(t, heads, -1).transpose(1, 0, 2)  # (H, T, Dh)
        k, v = (
            m.reshape(t, heads, -1).transpose(1, 0, 2)
            for m in np.split(dense(x, "self_attention.key_value"), 2, -1)
        )
        attention = np_softmax(q @ k.transpose(0, 2, 1) / np.sqrt(d // heads)) @ v  # (H, T, Dh)
        a = dense(attention.transpose(1, 0, 2).reshape(t, d), "self_attention.output")
        x = np_layer_norm(
            x + a, s[b + "self_attention_norm.gamma"], s[b + "self_attention_norm.beta"], eps
        )
        f = dense(gelu(dense(x, "feed_forward.intermediate")), "feed_forward.output")
        x = np_layer_norm(
            x + f, s[b + "feed_forward_norm.gamma"], s[b + "feed_forward_norm.beta"], eps
        )
    pooled = x.mean(axis=0)
    return pooled / np.linalg.norm(pooled)


def test_real_checkpoint_through_the_table_reproduces_the_reference_embeddings():
    config, slots = read_bert_checkpoint(minilm_dir())
    assert config["hidden_act"] == "gelu"  # exact GELU
    sentences, reference_ids, reference = minilm_reference()
    # Every weight takes part in every sentence, so a few suffice: the shortest ones and
    # the one truncated at 256 tokens (all positions in use).
    by_length = sorted(range(len(reference_ids)), key=lambda i: len(reference_ids[i]))
    for i in by_length[:6] + by_length[-1:]:
        ours = np_bert_embeddings(slots, config, np.array(reference_ids[i]))
        assert float(ours @ reference[i]) >= 0.99999, sentences[i]
