"""import_hf_bert and `transformer-zoo import-hf` on tiny synthetic checkpoints: every weight
lands in its variable (checked against BERT written in numpy), the config's variants are
respected, and bad checkpoints fail in one line. The real all-MiniLM-L6-v2 weights are
checked end to end, against sentence-transformers, in tests/export/test_minilm_embeddings.py.
"""

import json

import numpy as np
import pytest
from safetensors.numpy import save_file

from tests.models.test_hf_bert_names import TINY, np_bert_embeddings, tiny_checkpoint
from transformer_zoo import cli
from transformer_zoo.models import EncoderOnly, EncoderOnlyClassifier, import_hf_bert
from transformer_zoo.models.hf.bert import assign_weights, read_bert_checkpoint
from transformer_zoo.models.hf.run import import_hf_run
from transformer_zoo.run_directory import RunConfig, load_run_config, save_run_config

CONFIG = {**TINY, "hidden_act": "gelu", "layer_norm_eps": 1e-12, "model_type": "bert"}
# 11 tokens, as TINY's vocab_size.
VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "dog"]
LABELS = {"0": "negative", "1": "neutral", "2": "positive"}


def write_checkpoint(directory, tensors=None, config=None, vocabulary=VOCABULARY):
    """A Hugging Face layout directory: config.json, model.safetensors, vocab.txt."""
    directory.mkdir(parents=True, exist_ok=True)
    save_file(tensors or tiny_checkpoint(), str(directory / "model.safetensors"))
    (directory / "config.json").write_text(json.dumps(config or CONFIG))
    (directory / "vocab.txt").write_text("".join(t + "\n" for t in vocabulary))
    return directory


def classifier_checkpoint(seed=3):
    """A BertForSequenceClassification state dict: `bert.`-prefixed encoder + head."""
    rng = np.random.default_rng(seed)
    tensors = {"bert." + name: value for name, value in tiny_checkpoint().items()}
    tensors["classifier.weight"] = rng.standard_normal((3, 8)).astype(np.float32)  # (C, D)
    tensors["classifier.bias"] = rng.standard_normal(3).astype(np.float32)
    return tensors


def padded_ids():
    rows = [[2, 5, 6, 7, 8, 5, 9, 3], [2, 10, 3], [2, 6, 1, 4, 3]]  # [CLS] … [SEP]
    ids = np.zeros((len(rows), max(map(len, rows))), np.int32)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = row
    return rows, ids


def test_imported_model_computes_bert_written_in_numpy(tmp_path):
    checkpoint = write_checkpoint(tmp_path / "ckpt")
    model = import_hf_bert(checkpoint)
    assert isinstance(model, EncoderOnly) and model.use_pooler
    config, slots = read_bert_checkpoint(checkpoint)
    rows, ids = padded_ids()
    ours = np.asarray(model.embed({"token_ids": ids, "padding_mask": ids != 0}))
    for i, row in enumerate(rows):  # padded rows must equal their unpadded selves
        np.testing.assert_allclose(ours[i], np_bert_embeddings(slots, config, row), atol=2e-5)


def test_every_variable_receives_a_checkpoint_weight(tmp_path):
    model = import_hf_bert(write_checkpoint(tmp_path / "ckpt"))
    _, slots = read_bert_checkpoint(tmp_path / "ckpt")
    # 5 embedding slots, 14 per layer, 2 for the pooler; nothing left at its initial value.
    assert len(model.weights) == len(slots) == 5 + 14 * TINY["num_hidden_layers"] + 2
    fresh = EncoderOnly(**{k: getattr(model, k) for k in ("vocabulary_size", "num_layers",
                        "num_heads", "hidden_dim", "intermediate_dim", "max_length")})  # fmt: skip
    del slots["blocks.1.feed_forward_norm.beta"]
    with pytest.raises(ValueError, match=r"without a slot: \['blocks.1.feed_forward_norm.beta'\]"):
        assign_weights(fresh, slots)


def test_config_variants_are_respected(tmp_path):
    config = {**CONFIG, "layer_norm_eps": 1e-7, "hidden_act": "gelu_new"}
    model = import_hf_bert(write_checkpoint(tmp_path / "a", config=config))
    assert model.layer_norm_epsilon == 1e-7 and model.embeddings_norm.epsilon == 1e-7
    assert model.blocks[0].feed_forward_norm.epsilon == 1e-7
    assert model.activation == "gelu_tanh"
    for name in ("silu", "swish"):  # one function in transformers' ACT2FN, ours "swish"
        silu = import_hf_bert(
            write_checkpoint(tmp_path / name, config={**CONFIG, "hidden_act": name})
        )
        assert silu.activation == "swish"
    assert model.max_length == TINY["max_position_embeddings"]
    assert model.type_vocabulary_size == TINY["type_vocab_size"]
    no_pooler = {k: v for k, v in tiny_checkpoint().items() if not k.startswith("pooler.")}
    model = import_hf_bert(write_checkpoint(tmp_path / "b", tensors=no_pooler))
    assert not model.use_pooler and "pooled_output" not in model(np.array([[2, 5, 3]]))


@pytest.mark.parametrize(
    "change, message",
    [
        ({"hidden_act": "mish"}, "hidden_act"),
        ({"position_embedding_type": "relative_key"}, "position_embedding_type"),
        ({"model_type": "roberta"}, "model_type"),
        ({"is_decoder": True}, "decoder"),
    ],
)
def test_unsupported_architectures_are_refused(tmp_path, change, message):
    with pytest.raises(ValueError, match=message):
        import_hf_bert(write_checkpoint(tmp_path, config={**CONFIG, **change}))


def test_sequence_classification_checkpoint_becomes_a_classifier(tmp_path):
    tensors = classifier_checkpoint()
    checkpoint = write_checkpoint(tmp_path, tensors, {**CONFIG, "id2label": LABELS})
    model = import_hf_bert(checkpoint)
    assert isinstance(model, EncoderOnlyClassifier) and model.num_classes == 3
    _, ids = padded_ids()
    logits = np.asarray(model(ids))
    first = np.asarray(model.backbone(ids)["sequence_output"])[:, 0]  # (B, D), [CLS]
    pooled = np.tanh(
        first @ tensors["bert.pooler.dense.weight"].T + tensors["bert.pooler.dense.bias"]
    )
    expected = pooled @ tensors["classifier.weight"].T + tensors["classifier.bias"]
    np.testing.assert_allclose(logits, expected, atol=1e-5)
    with pytest.raises(ValueError, match=r"Unused: .*'classifier.bias', 'classifier.weight'\]"):
        import_hf_bert(checkpoint, classifier=False)


def test_import_hf_writes_a_run_directory_that_classify_serves(tmp_path, capsys):
    checkpoint = write_checkpoint(
        tmp_path / "ckpt", classifier_checkpoint(), {**CONFIG, "id2label": LABELS}
    )
    run_dir = tmp_path / "run"
    assert cli.main(["import-hf", str(checkpoint), "--out", str(run_dir)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["task"] == "classification"
    config = load_run_config(run_dir)
    assert config.label_names == ["negative", "neutral", "positive"]
    assert config.max_length == TINY["max_position_embeddings"]
    assert config.special_ids == {"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4}
    assert (run_dir / "vocab.txt").read_text() == (checkpoint / "vocab.txt").read_text()

    code = cli.main(["classify", "--model", str(run_dir), "--engine", "keras", "the cat sat"])
    assert code == 0
    label, score = capsys.readouterr().out.strip().split("\t")
    logits = np.asarray(import_hf_bert(checkpoint)(np.array([[2, 5, 6, 7, 3]])))[0]
    assert label == LABELS[str(int(logits.argmax()))]
    assert float(score) == pytest.approx(1 / np.exp(logits - logits.max()).sum(), abs=1e-4)


def test_embedding_run_takes_sentence_transformers_length_and_pooling(tmp_path):
    checkpoint = write_checkpoint(tmp_path / "ckpt")
    (checkpoint / "sentence_bert_config.json").write_text('{"max_seq_length": 12}')
    (checkpoint / "modules.json").write_text(
        json.dumps(
            [
                {"idx": 1, "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                {"idx": 2, "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
            ]
        )  # fmt: skip
    )
    (checkpoint / "1_Pooling").mkdir()
    (checkpoint / "1_Pooling" / "config.json").write_text('{"pooling_mode_mean_tokens": true}')
    config = import_hf_run(checkpoint, tmp_path / "run")
    assert (config.task, config.max_length) == ("embedding", 12)
    assert config.extra["pooling"] == {"mode": "mean", "normalize": True}
    assert import_hf_run(checkpoint, tmp_path / "run8", max_length=8).max_length == 8


def _fail(capsys, *argv):
    assert cli.main(["import-hf", *map(str, argv)]) == 2
    error = capsys.readouterr().err
    assert len(error.strip().splitlines()) == 1, error
    return error


def test_bad_checkpoints_fail_in_one_line(tmp_path, capsys):
    out = tmp_path / "out"
    assert "no such directory" in _fail(capsys, tmp_path / "nowhere", "--out", out)
    (tmp_path / "model.safetensors").write_bytes(b"")  # a file of it, not its directory
    file_error = _fail(capsys, tmp_path / "model.safetensors", "--out", out)
    assert "is a file; give the checkpoint's directory" in file_error
    (tmp_path / "empty").mkdir()
    assert "model.safetensors" in _fail(capsys, tmp_path / "empty", "--out", out)

    extra = {**tiny_checkpoint(), "qa_outputs.bias": np.zeros(2, np.float32)}
    checkpoint = write_checkpoint(tmp_path / "extra", extra)
    assert "Unused: ['qa_outputs.bias']" in _fail(capsys, checkpoint, "--out", out)

    checkpoint = write_checkpoint(tmp_path / "ok")
    assert "max_length" in _fail(capsys, checkpoint, "--out", out, "--max-length", 17)
    (checkpoint / "1_Pooling").mkdir()
    (checkpoint / "1_Pooling" / "config.json").write_text('{"pooling_mode_cls_token": true}')
    assert "mean pooling" in _fail(capsys, checkpoint, "--out", out)
    assert not out.exists()  # nothing is written before everything is checked

    out.mkdir()
    (out / "model.keras").write_text("")
    assert "new or empty" in _fail(capsys, write_checkpoint(tmp_path / "ok2"), "--out", out)


def test_pretraining_heads_are_dropped_with_one_warning(tmp_path, caplog):
    """bert-base-uncased's layout (`BertForPreTraining`): the encoder under `bert.`, the
    masked-LM and next-sentence heads under `cls.`."""
    rng = np.random.default_rng(5)
    tensors = {"bert." + name: value for name, value in tiny_checkpoint().items()}
    heads = {
        "cls.predictions.bias": (11,),
        "cls.predictions.transform.dense.weight": (8, 8),
        "cls.predictions.transform.dense.bias": (8,),
        "cls.predictions.transform.LayerNorm.weight": (8,),
        "cls.predictions.transform.LayerNorm.bias": (8,),
        "cls.seq_relationship.weight": (2, 8),
        "cls.seq_relationship.bias": (2,),
    }
    tensors.update(
        {name: rng.standard_normal(shape).astype(np.float32) for name, shape in heads.items()}
    )
    config = {**CONFIG, "architectures": ["BertForPreTraining"]}
    with caplog.at_level("WARNING", logger="transformer_zoo"):
        model = import_hf_bert(write_checkpoint(tmp_path / "pretraining", tensors, config))
    assert [r.getMessage() for r in caplog.records] == [
        "dropped the pre-training heads (7 tensors under 'cls.'); the encoder is imported"
    ]
    plain = import_hf_bert(write_checkpoint(tmp_path / "plain"))
    assert isinstance(model, EncoderOnly)
    assert all(
        np.array_equal(a, b) for a, b in zip(plain.get_weights(), model.get_weights(), strict=True)
    )


def test_a_config_without_model_type_or_bert_sizes_fails_in_one_line(tmp_path, capsys):
    """A config.json without model_type was read as BERT, and a BERT config without one of
    its sizes was a KeyError traceback."""
    out = tmp_path / "out"
    without = {k: v for k, v in CONFIG.items() if k != "model_type"}
    error = _fail(capsys, write_checkpoint(tmp_path / "untyped", config=without), "--out", out)
    assert "model_type must be one of" in error and "model_type=None" in error
    ours = write_checkpoint(tmp_path / "ours")
    save_run_config(ours, RunConfig(family="decoder-only", preset="tiny", task="language-model"))
    assert "holds a transformer-zoo run/export" in _fail(capsys, ours, "--out", out)
    for key in ("type_vocab_size", "intermediate_size"):
        config = {k: v for k, v in CONFIG.items() if k != key}
        checkpoint = write_checkpoint(tmp_path / key, config=config)
        assert f"needs a positive integer `{key}`" in _fail(capsys, checkpoint, "--out", out)
    assert not out.exists()


@pytest.mark.parametrize(
    "rates, expected",
    [
        ({}, {"hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}),  # BertConfig's
        (
            {"hidden_dropout_prob": 0.25, "attention_probs_dropout_prob": 0.25},
            {"hidden_dropout_prob": 0.25, "attention_probs_dropout_prob": 0.25},
        ),
        (
            {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0},
            {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0},
        ),
    ],
)
def test_the_checkpoints_dropout_is_imported_and_written_back(tmp_path, rates, expected):
    """The import set dropout 0, so `train --init` fine-tuned without the checkpoint's
    dropout and `export --format hf` wrote 0.0 back for transformers to train with."""
    from transformer_zoo.models.hf.bert import to_bert

    model = import_hf_bert(write_checkpoint(tmp_path, config={**CONFIG, **rates}))
    assert model.dropout == expected["hidden_dropout_prob"]
    assert model.get_config()["dropout"] == expected["hidden_dropout_prob"]
    exported, _ = to_bert(model)
    assert {key: exported[key] for key in expected} == expected


@pytest.mark.parametrize("classifier_dropout", [None, 0.3])
def test_a_classifier_keeps_the_checkpoints_classifier_dropout(tmp_path, classifier_dropout):
    """BertForSequenceClassification drops the pooled vector at `classifier_dropout`, or at
    `hidden_dropout_prob` where that is None (transformers' rule)."""
    from transformer_zoo.models.hf.bert import to_bert

    config = {**CONFIG, "hidden_dropout_prob": 0.2, "attention_probs_dropout_prob": 0.2}
    config["classifier_dropout"] = classifier_dropout
    model = import_hf_bert(write_checkpoint(tmp_path, classifier_checkpoint(), config))
    head = config["hidden_dropout_prob"] if classifier_dropout is None else classifier_dropout
    assert (model.dropout, model.backbone.dropout) == (head, config["hidden_dropout_prob"])
    exported, _ = to_bert(model)
    assert exported["classifier_dropout"] == classifier_dropout
    assert exported["hidden_dropout_prob"] == config["hidden_dropout_prob"]


def test_differing_dropout_rates_take_the_hidden_one_with_one_warning(tmp_path, caplog):
    config = {**CONFIG, "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.2}
    with caplog.at_level("WARNING", logger="transformer_zoo"):
        model = import_hf_bert(write_checkpoint(tmp_path, config=config))
    assert model.dropout == config["hidden_dropout_prob"]
    [warning] = [r.getMessage() for r in caplog.records]
    assert "hidden_dropout_prob=0.1, also in place of attention_probs_dropout_prob=0.2" in warning
    bad = {**config, "attention_probs_dropout_prob": 1.5}
    with pytest.raises(ValueError, match=r"`attention_probs_dropout_prob` must be in \[0, 1\)"):
        import_hf_bert(write_checkpoint(tmp_path / "bad", config=bad))
