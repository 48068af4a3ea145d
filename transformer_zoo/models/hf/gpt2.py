"""GPT-2 checkpoints (`GPT2LMHeadModel`, `GPT2Model`) ↔ our `DecoderOnly`, which is GPT-2's
architecture already: learned positions, Pre-LN blocks with the tanh GELU, a final
LayerNorm and the head tied to the token embedding.

GPT-2 writes its projections as `Conv1D`, whose weight is (in, out) like a Keras kernel,
and fuses query, key and value into one `c_attn` (D, 3D), which our attention holds as
the query (D, D) and the fused key-value (D, 2D) Dense.
"""

from __future__ import annotations

import numpy as np

from transformer_zoo.models.decoder_only import DecoderOnly
from transformer_zoo.models.hf import config_values, weights
from transformer_zoo.models.hf.config_values import positive_ints
from transformer_zoo.models.hf.weights import CheckpointNames, equal_to, expand

# fmt: off
EMBEDDING_TABLE = (
    ("embeddings.token",    ("wte.weight",), "copy", ("V", "D")),
    ("embeddings.position", ("wpe.weight",), "copy", ("P", "D")),
)
LAYER_SLOT, LAYER_SOURCE = "blocks.{i}.", "h.{i}."
LAYER_TABLE = (
    (("self_attention.query.kernel", "self_attention.key_value.kernel"),
     ("attn.c_attn.weight",), "split_query", (("D", "D"), ("D", "2D"))),
    (("self_attention.query.bias", "self_attention.key_value.bias"),
     ("attn.c_attn.bias",),   "split_query", (("D",), ("2D",))),
    ("self_attention.output.kernel",     ("attn.c_proj.weight",), "copy", ("D", "D")),
    ("self_attention.output.bias",       ("attn.c_proj.bias",),   "copy", ("D",)),
    ("self_attention_norm.gamma",        ("ln_1.weight",),        "copy", ("D",)),
    ("self_attention_norm.beta",         ("ln_1.bias",),          "copy", ("D",)),
    ("feed_forward.intermediate.kernel", ("mlp.c_fc.weight",),    "copy", ("D", "F")),
    ("feed_forward.intermediate.bias",   ("mlp.c_fc.bias",),      "copy", ("F",)),
    ("feed_forward.output.kernel",       ("mlp.c_proj.weight",),  "copy", ("F", "D")),
    ("feed_forward.output.bias",         ("mlp.c_proj.bias",),    "copy", ("D",)),
    ("feed_forward_norm.gamma",          ("ln_2.weight",),        "copy", ("D",)),
    ("feed_forward_norm.beta",           ("ln_2.bias",),          "copy", ("D",)),
)
FINAL_TABLE = (
    ("final_norm.gamma", ("ln_f.weight",), "copy", ("D",)),
    ("final_norm.beta",  ("ln_f.bias",),   "copy", ("D",)),
)
# fmt: on
# GPT-2's dropout rates, our one `dropout` first: the residual rate drops both sublayers'
# outputs, the others the embeddings and the attention probabilities.
DROPOUT_RATES = ("resid_pdrop", "embd_pdrop", "attn_pdrop")
# Options of GPT2Config our attention does not implement, with the value it does.
FIXED_OPTIONS = {
    "scale_attn_weights": True,
    "scale_attn_by_inverse_layer_idx": False,
    "reorder_and_upcast_attn": False,
    "add_cross_attention": False,
}

# The checkpoint's names: `GPT2LMHeadModel` prefixes `transformer.`; older files keep the
# causal-mask buffers (`attn.bias`, `attn.masked_bias`) and a copy of the tied head.
CHECKPOINT = CheckpointNames(
    "GPT-2",
    prefixes=("transformer.",),
    buffers={
        r"h\.\d+\.attn\.(masked_)?bias": None,
        r"lm_head\.weight": equal_to("wte.weight", "lm_head.weight"),
    },
)


def gpt2_dimensions(config: dict) -> dict[str, int]:
    keys = {
        "vocab_size": "V",
        "n_embd": "D",
        "n_layer": "layers",
        "n_head": "H",
        "n_positions": "P",
    }
    sizes = positive_ints(config, keys, "GPT-2")
    inner = config.get("n_inner")
    sizes["F"] = (
        4 * sizes["D"] if inner is None else positive_ints(config, {"n_inner": "F"}, "GPT-2")["F"]
    )
    sizes["2D"] = 2 * sizes["D"]
    return sizes


def gpt2_weight_table(config: dict) -> list[weights.WeightRow]:
    sizes = gpt2_dimensions(config)
    rows = expand(EMBEDDING_TABLE, sizes)
    rows += expand(LAYER_TABLE, sizes, sizes["layers"], LAYER_SLOT, LAYER_SOURCE)
    return rows + expand(FINAL_TABLE, sizes)


def gpt2_model_config(config: dict) -> dict:
    """`DecoderOnly` constructor arguments for a GPT-2 `config.json`.

    Raises:
        ValueError: another model type, or an option our layers do not implement.
    """
    config_values.require_model_type(config, "gpt2", "GPT-2")
    if not config.get("tie_word_embeddings", True):
        raise ValueError(
            "GPT-2 checkpoints with an untied head (tie_word_embeddings=false) are not "
            "supported: our DecoderOnly's head is the token embedding."
        )
    for key, value in FIXED_OPTIONS.items():
        if config.get(key, value) != value:
            raise ValueError(f"Only {key}={value} is supported. Received: {key}={config[key]!r}")
    activation = config_values.translated_option(
        config, "activation_function", "gelu_new", config_values.ACTIVATIONS
    )
    sizes = gpt2_dimensions(config)
    return dict(
        vocabulary_size=sizes["V"],
        num_layers=sizes["layers"],
        num_heads=sizes["H"],
        hidden_dim=sizes["D"],
        intermediate_dim=sizes["F"],
        max_length=sizes["P"],
        dropout=config_values.dropout_rate(config, DROPOUT_RATES),
        activation=activation,
        layer_norm_epsilon=float(config.get("layer_norm_epsilon", 1e-5)),
    )


def slot_variables(model: DecoderOnly) -> dict:
    """Slot name → the `keras.Variable` of `model` that holds it."""
    table = {
        "embeddings.token": model.embeddings.token_embedding.embeddings,
        "embeddings.position": model.embeddings.position_encoding.position_embeddings,
        **weights.norm_slots("", model, ["final_norm"]),
    }
    for i, block in enumerate(model.blocks):
        table.update(weights.block_slots(f"blocks.{i}.", block))
    return table


def import_hf_gpt2(checkpoint_dir) -> DecoderOnly:
    """Builds the `DecoderOnly` a GPT-2 checkpoint directory describes, with its weights.

    Raises:
        ValueError: a missing file, an unsupported option, or tensors that do not match
            the table one to one.
    """
    return weights.load_checkpoint(
        checkpoint_dir,
        gpt2_model_config,
        gpt2_weight_table,
        CHECKPOINT,
        DecoderOnly,
        slot_variables,
    )


def to_gpt2(model: DecoderOnly) -> tuple[dict, dict[str, np.ndarray]]:
    """`(config.json, tensors)` of a `GPT2LMHeadModel` holding `model`'s weights: the
    inverse of `import_hf_gpt2`.

    Raises:
        ValueError: a model GPT-2 cannot express (an activation transformers has no
            name for).
    """
    activation = config_values.exported_activation(model.activation, "GPT-2")
    config = {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "vocab_size": model.vocabulary_size,
        "n_positions": model.max_length,
        "n_embd": model.hidden_dim,
        "n_layer": model.num_layers,
        "n_head": model.num_heads,
        "n_inner": model.intermediate_dim,
        "activation_function": activation,
        "layer_norm_epsilon": model.layer_norm_epsilon,
        "resid_pdrop": model.dropout,
        "embd_pdrop": model.dropout,
        "attn_pdrop": model.dropout,
        "tie_word_embeddings": True,
        "torch_dtype": "float32",
    }
    slots = weights.read_slots(slot_variables(model))
    return config, weights.unmap_weights(slots, gpt2_weight_table(config), CHECKPOINT)
