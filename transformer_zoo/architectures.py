"""The named architectures (presets) as plain data, and resolving a name: the paper's
models, BERT's, GPT-2's, MiniLM's, and tiny CPU-sized ones.

No Keras here, so that the command line lists and checks presets without loading
TensorFlow; `transformer_zoo.models.presets.from_preset` builds them.
"""

from __future__ import annotations

from typing import Any

from transformer_zoo.errors import with_article
from transformer_zoo.run_directory import FAMILIES

_BERT = dict(max_length=512, type_vocabulary_size=2, dropout=0.1, layer_norm_epsilon=1e-12)
_TINY = dict(num_heads=4, hidden_dim=128, intermediate_dim=512, dropout=0.1)

PRESETS: dict[str, dict[str, Any]] = {
    "transformer_base": {
        "family": "encoder-decoder",
        "description": "The paper's base model (Table 3): N=6, d_model=512, d_ff=2048, h=8, "
        "three-way tied embeddings over a shared 37,000-token vocabulary.",
        "config": dict(
            vocabulary_size=37000,
            num_layers=6,
            num_heads=8,
            hidden_dim=512,
            intermediate_dim=2048,
            max_length=1024,
            dropout=0.1,
            tie_weights="all",
        ),
    },
    "transformer_big": {
        "family": "encoder-decoder",
        "description": "The paper's big model (Table 3): N=6, d_model=1024, d_ff=4096, h=16.",
        "config": dict(
            vocabulary_size=37000,
            num_layers=6,
            num_heads=16,
            hidden_dim=1024,
            intermediate_dim=4096,
            max_length=1024,
            dropout=0.3,
            tie_weights="all",
        ),
    },
    "bert_base": {
        "family": "encoder-only",
        "description": "BERT-base (uncased): 12 layers, d 768, 12 heads, with pooler.",
        "config": dict(
            vocabulary_size=30522,
            num_layers=12,
            num_heads=12,
            hidden_dim=768,
            intermediate_dim=3072,
            **_BERT,
        ),
    },
    "minilm_l6": {
        "family": "encoder-only",
        "description": "all-MiniLM-L6-v2's architecture: BERT with 6 layers, d 384, 12 heads.",
        "config": dict(
            vocabulary_size=30522,
            num_layers=6,
            num_heads=12,
            hidden_dim=384,
            intermediate_dim=1536,
            **_BERT,
        ),
    },
    "gpt2_small": {
        "family": "decoder-only",
        "description": "GPT-2 small: 12 layers, d 768, 12 heads, context 1024, tied head.",
        "config": dict(
            vocabulary_size=50257,
            num_layers=12,
            num_heads=12,
            hidden_dim=768,
            intermediate_dim=3072,
            max_length=1024,
            dropout=0.1,
        ),
    },
    "tiny_encoder_decoder": {
        "family": "encoder-decoder",
        "description": "CPU-sized translation model (about 1M parameters with 500-piece "
        "vocabularies): d 128, 2+2 layers, 4 heads, d_ff 512.",
        "config": dict(vocabulary_size=512, num_layers=2, max_length=128, **_TINY),
    },
    "tiny_encoder_only": {
        "family": "encoder-only",
        "description": "CPU-sized BERT: d 128, 2 layers, 4 heads, d_ff 512.",
        "config": dict(
            vocabulary_size=512, num_layers=2, max_length=128, type_vocabulary_size=2, **_TINY
        ),
    },
    "tiny_decoder_only": {
        "family": "decoder-only",
        "description": "CPU-sized GPT: d 128, 2 layers, 4 heads, d_ff 512, context 256.",
        "config": dict(vocabulary_size=512, num_layers=2, max_length=256, **_TINY),
    },
}


def resolve_preset(name: str, family: str | None = None) -> str:
    """The full preset name: `"tiny"` + a family gives e.g. `"tiny_encoder_decoder"`.

    Raises:
        ValueError: an unknown name or family, or a family that contradicts the preset.
    """
    if family is not None and family not in FAMILIES:
        raise ValueError(f"`family` must be one of {FAMILIES}. Received: family={family!r}")
    if name == "tiny":
        if family is None:
            raise ValueError(
                "The preset 'tiny' exists for every family: name the family (`family=` or "
                f"`--family`: {', '.join(FAMILIES)}) or give a full name such as "
                "'tiny_encoder_decoder'."
            )
        name = "tiny_" + family.replace("-", "_")
    if name not in PRESETS:
        raise ValueError(
            f"Unknown preset. Choose one of {sorted(PRESETS)} or 'tiny'. Received: {name!r}"
        )
    if family is not None and PRESETS[name]["family"] != family:
        raise ValueError(
            f"The preset {name!r} is {with_article(PRESETS[name]['family'])} model. "
            f"Received: family={family!r}"
        )
    return name


def preset_names() -> list[str]:
    """Every name `resolve_preset` takes: the presets and `"tiny"`."""
    return sorted([*PRESETS, "tiny"])
