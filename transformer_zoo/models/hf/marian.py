"""Marian checkpoints (`MarianMTModel`, the `Helsinki-NLP/opus-mt-*` family) ↔ our
`EncoderDecoder`.

Marian is the paper's Post-LN encoder-decoder with four differences, which our layers
express as options rather than special cases: sinusoidal positions laid out as
`[sin | cos]` halves (`position_layout="halves"`), the swish activation, token embeddings
scaled by √D (as the paper), and a `final_logits_bias` (`output_bias=True`); its source,
target and output embeddings are one matrix (`tie_weights="all"`), and the decoder starts
from the pad token (the run's `bos` id).

The tokens opus-mt's `bad_words_ids` forbids (`[[pad]]`: Marian's pad embedding is zero, so
its logit is its `final_logits_bias` alone, and transformers never emits it) are folded into
`final_logits_bias` as `FORBIDDEN_BIAS`, so that every engine and search (numpy, the ONNX
greedy `Loop`, the server) never chooses them without knowing of them.

The rest of the checkpoint's generation config (opus-mt's: 4 beams, `</s>` forced at the
length limit, `max_length` 512) is translated into our search's terms by
`generation_defaults`, which the import records in the run; nothing applies it unasked.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from transformer_zoo.errors import is_integer
from transformer_zoo.files import read_optional_json
from transformer_zoo.models.encoder_decoder import EncoderDecoder
from transformer_zoo.models.hf import checkpoint_files, config_values, weights
from transformer_zoo.models.hf.config_values import positive_ints
from transformer_zoo.models.hf.weights import CheckpointNames, equal_to, expand

SHARED = "model.shared.weight"
# fmt: off
EMBEDDING_TABLE = (
    ("embeddings.token", (SHARED,),              "copy",    ("V", "D")),
    ("lm_head.bias",     ("final_logits_bias",), "flatten", ("V",)),
)


def _attention_rows(slot: str, source: str):
    return (
        (f"{slot}.query.kernel",     (f"{source}.q_proj.weight",),   "transpose", ("D", "D")),
        (f"{slot}.query.bias",       (f"{source}.q_proj.bias",),     "copy",      ("D",)),
        (f"{slot}.key_value.kernel", (f"{source}.k_proj.weight",
                                      f"{source}.v_proj.weight"),    "transpose_concat", ("D", "2D")),
        (f"{slot}.key_value.bias",   (f"{source}.k_proj.bias",
                                      f"{source}.v_proj.bias"),      "concat",    ("2D",)),
        (f"{slot}.output.kernel",    (f"{source}.out_proj.weight",), "transpose", ("D", "D")),
        (f"{slot}.output.bias",      (f"{source}.out_proj.bias",),   "copy",      ("D",)),
    )


def _norm_rows(slot: str, source: str):
    return (
        (f"{slot}.gamma", (f"{source}.weight",), "copy", ("D",)),
        (f"{slot}.beta",  (f"{source}.bias",),   "copy", ("D",)),
    )


FEED_FORWARD_ROWS = (
    ("feed_forward.intermediate.kernel", ("fc1.weight",), "transpose", ("D", "F")),
    ("feed_forward.intermediate.bias",   ("fc1.bias",),   "copy",      ("F",)),
    ("feed_forward.output.kernel",       ("fc2.weight",), "transpose", ("F", "D")),
    ("feed_forward.output.bias",         ("fc2.bias",),   "copy",      ("D",)),
)
# fmt: on
ENCODER_LAYER = (
    *_attention_rows("self_attention", "self_attn"),
    *_norm_rows("self_attention_norm", "self_attn_layer_norm"),
    *FEED_FORWARD_ROWS,
    *_norm_rows("feed_forward_norm", "final_layer_norm"),
)
DECODER_LAYER = (
    *ENCODER_LAYER,
    *_attention_rows("cross_attention", "encoder_attn"),
    *_norm_rows("cross_attention_norm", "encoder_attn_layer_norm"),
)


def sinusoid_halves(positions: int, width: int) -> np.ndarray:
    """Marian's (P, D) position table in numpy: sin(p / 10000^(2i/D)) in the first D/2
    columns, cos in the last (`MarianSinusoidalPositionalEmbedding._init_weight`)."""
    angles = np.arange(positions)[:, None] / np.power(10000.0, np.arange(0, width, 2) / width)
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=1).astype(np.float32)


def _positions_check(name: str):
    def check(value, tensors):
        if value.ndim != 2:
            raise ValueError(
                f"`{name}` must be a (positions, d_model) table. Received: {value.shape}"
            )
        # A float16 or bfloat16 checkpoint stores the table rounded to its precision.
        tolerance = 1e-5 + checkpoint_files.rounding_of(value)
        difference = np.abs(value.astype(np.float32) - sinusoid_halves(*value.shape)).max()
        if difference > tolerance:
            raise ValueError(
                f"`{name}` must be Marian's sinusoidal table (our layers compute it); it differs "
                f"by {difference:.1e}, more than {value.dtype}'s rounding ({tolerance:.1e})."
            )

    return check


CHECKPOINT = CheckpointNames(
    "Marian",
    buffers={
        r"model\.(en|de)coder\.embed_positions\.weight": _positions_check("embed_positions.weight"),
        r"model\.(en|de)coder\.embed_tokens\.weight": equal_to(SHARED, "embed_tokens.weight"),
        r"lm_head\.weight": equal_to(SHARED, "lm_head.weight"),
    },
)


def marian_dimensions(config: dict) -> dict[str, int]:
    keys = {
        "vocab_size": "V",
        "d_model": "D",
        "encoder_layers": "layers",
        "encoder_attention_heads": "H",
        "encoder_ffn_dim": "F",
        "max_position_embeddings": "P",
    }
    sizes = positive_ints(config, keys, "Marian")
    same = {
        "decoder_layers": "encoder_layers",
        "decoder_attention_heads": "encoder_attention_heads",
        "decoder_ffn_dim": "encoder_ffn_dim",
        "decoder_vocab_size": "vocab_size",
    }
    for decoder_key, encoder_key in same.items():
        value = config.get(decoder_key)
        if value is not None and value != config[encoder_key]:
            raise ValueError(
                f"Our encoder-decoder has one `{encoder_key}` for both stacks. Received: "
                f"{encoder_key}={config[encoder_key]}, {decoder_key}={value}"
            )
    if sizes["D"] % 2:
        raise ValueError(f"The sinusoidal positions need an even d_model. Received: {sizes['D']}")
    sizes["2D"] = 2 * sizes["D"]
    return sizes


def marian_weight_table(config: dict) -> list[weights.WeightRow]:
    sizes = marian_dimensions(config)
    layers = sizes["layers"]
    rows = expand(EMBEDDING_TABLE, sizes)
    rows += expand(ENCODER_LAYER, sizes, layers, "encoder_blocks.{i}.", "model.encoder.layers.{i}.")
    rows += expand(DECODER_LAYER, sizes, layers, "decoder_blocks.{i}.", "model.decoder.layers.{i}.")
    return rows


def marian_model_config(config: dict) -> dict:
    """`EncoderDecoder` constructor arguments for a Marian `config.json`.

    Raises:
        ValueError: another model type, or a variant our layers do not implement
            (separate vocabularies, an untied head, stacks of different sizes).
    """
    config_values.require_model_type(config, "marian", "Marian")
    if not config.get("share_encoder_decoder_embeddings", True):
        raise ValueError(
            "Marian checkpoints with separate source and target embeddings are not supported."
        )
    if not config.get("tie_word_embeddings", True):
        raise ValueError("Marian checkpoints with an untied output layer are not supported.")
    activation = config_values.translated_option(
        config, "activation_function", "swish", config_values.ACTIVATIONS
    )
    sizes = marian_dimensions(config)
    return dict(
        vocabulary_size=sizes["V"],
        num_layers=sizes["layers"],
        num_heads=sizes["H"],
        hidden_dim=sizes["D"],
        intermediate_dim=sizes["F"],
        max_length=sizes["P"],
        dropout=0.0,
        tie_weights="all",
        activation=activation,
        layer_norm_epsilon=1e-5,  # torch's LayerNorm default, which Marian uses
        scale_embeddings=bool(config.get("scale_embedding", False)),
        position_layout="halves",
        output_bias=True,
    )


def slot_variables(model: EncoderDecoder) -> dict:
    """Slot name → the `keras.Variable` of `model` that holds it."""
    table = {
        "embeddings.token": model.encoder_embeddings.token_embedding.embeddings,
        "lm_head.bias": model.lm_head.bias,
    }
    stacks = (("encoder_blocks", model.encoder_blocks), ("decoder_blocks", model.decoder_blocks))
    for name, blocks in stacks:
        for i, block in enumerate(blocks):
            table.update(weights.block_slots(f"{name}.{i}.", block))
    return table


# A forbidden token's output bias: finite, so that the logits of two engines still differ by
# a number (export validation), and far below any reachable logit, so that its probability
# is exactly 0 in float32 and no search picks it.
FORBIDDEN_BIAS = -1e9
GENERATION_FILE = "generation_config.json"  # a checkpoint's generation settings, if any


class MarianImport(NamedTuple):
    """A Marian checkpoint imported: the model, and the tokens its `bad_words_ids` forbids
    with their original `final_logits_bias` (id → bias), now `FORBIDDEN_BIAS`."""

    model: EncoderDecoder
    bad_words: dict[int, float]


def bad_word_ids(checkpoint_dir, config: dict) -> list[int]:
    """The single-token `bad_words_ids` of `config.json` and `generation_config.json`.

    Raises:
        ValueError: a bad word of several tokens (a bias cannot forbid a sequence) or an id
            outside the vocabulary.
    """
    lists = [config.get("bad_words_ids") or []]
    lists.append(
        (read_optional_json(checkpoint_dir, GENERATION_FILE) or {}).get("bad_words_ids") or []
    )
    ids = set()
    for words in lists:
        for word in words:
            if not isinstance(word, list) or len(word) != 1:
                raise ValueError(
                    "Only bad_words_ids of one token each are supported (folded into "
                    f"final_logits_bias). Received: {word!r}"
                )
            if not isinstance(word[0], int) or not 0 <= word[0] < config["vocab_size"]:
                raise ValueError(f"bad_words_ids must be token ids. Received: {word!r}")
            ids.add(word[0])
    return sorted(ids)


# transformers' `GenerationConfig` defaults of the keys `generation_defaults` reads.
GENERATION_DEFAULTS = {
    "num_beams": 1,
    "early_stopping": False,
    "length_penalty": 1.0,
    "do_sample": False,
    "temperature": 1.0,
    "top_k": 50,
    "top_p": 1.0,
    "forced_eos_token_id": None,
    "max_length": 20,
    "max_new_tokens": None,
}


def generation_defaults(checkpoint_dir, config: dict, max_length: int) -> dict:
    """What transformers' `model.generate(x)` does with this checkpoint, in our terms:
    `{"search": the arguments of `search.search_config`, "max_new_tokens": n}`.

    The keys are read from `generation_config.json`, or from `config.json` where there is
    none (as transformers does), with transformers' defaults (`GENERATION_DEFAULTS`):
    `num_beams` > 1 is `BeamSearch` with its `length_penalty` and `early_stopping`,
    `do_sample` is `Sampling` (`top_k` 50 unless set), else `Greedy`; a
    `forced_eos_token_id` is `forced_eos`; `max_length` counts the decoder's start token
    (`max_new_tokens`, where set, does not), and is cut to the room `max_length` (the
    run's) leaves. `bad_words_ids` are `load_marian`'s; other keys (repetition
    penalties, `min_length`, ...) are not read.

    Raises:
        ValueError: beam sampling (`do_sample` with `num_beams` > 1), or a forced token
            other than `</s>`, which our searches do not have.
    """
    generation = read_optional_json(checkpoint_dir, GENERATION_FILE)
    source = config if generation is None else generation
    read = {key: source.get(key, default) for key, default in GENERATION_DEFAULTS.items()}
    read = {key: GENERATION_DEFAULTS[key] if v is None else v for key, v in read.items()}
    eos = source.get("eos_token_id", config.get("eos_token_id"))
    forced = read["forced_eos_token_id"]
    if forced is not None and forced != eos:
        raise ValueError(
            f"Only </s> (eos_token_id={eos}) can be forced at the length limit. "
            f"Received: forced_eos_token_id={forced!r}"
        )
    search: dict = {"strategy": "greedy"}
    if read["do_sample"]:
        if read["num_beams"] != 1:
            raise ValueError(
                "Beam sampling (do_sample with num_beams > 1) is not supported. "
                f"Received: num_beams={read['num_beams']!r}"
            )
        top_p = read["top_p"]
        search = {
            "strategy": "sample",
            "temperature": read["temperature"],
            "top_k": read["top_k"],
            "top_p": None if top_p == 1.0 else top_p,
        }
    elif read["num_beams"] != 1:
        search = {
            "strategy": "beam",
            "num_beams": read["num_beams"],
            "length_penalty": read["length_penalty"],
            "early_stopping": read["early_stopping"],
        }
    search["forced_eos"] = forced is not None
    for key in ("max_length", "max_new_tokens"):
        if read[key] is not None and not (is_integer(read[key]) and read[key] >= 1):
            raise ValueError(f"`{key}` must be a positive integer. Received: {read[key]!r}")
    new_tokens = read["max_new_tokens"] or read["max_length"] - 1
    return {"search": search, "max_new_tokens": max(1, min(new_tokens, max_length - 1))}


def load_marian(checkpoint_dir) -> MarianImport:
    """`import_hf_marian`'s model, and the original biases of the tokens it forbids."""
    model = weights.load_checkpoint(
        checkpoint_dir,
        marian_model_config,
        marian_weight_table,
        CHECKPOINT,
        EncoderDecoder,
        slot_variables,
    )
    ids = bad_word_ids(checkpoint_dir, checkpoint_files.read_config(checkpoint_dir))
    bias = model.lm_head.bias.numpy()
    bad_words = {i: float(bias[i]) for i in ids}
    bias[ids] = FORBIDDEN_BIAS
    model.lm_head.bias.assign(bias)
    return MarianImport(model, bad_words)


def import_hf_marian(checkpoint_dir) -> EncoderDecoder:
    """Builds the `EncoderDecoder` a Marian checkpoint directory describes, with its weights;
    the tokens of its `bad_words_ids` get the output bias `FORBIDDEN_BIAS`.

    Raises:
        ValueError: a missing file, an unsupported variant, or tensors that do not match
            the table one to one.
    """
    return load_marian(checkpoint_dir).model
