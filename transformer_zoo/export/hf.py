"""`export --format hf`: a run directory in Hugging Face layout (`config.json`,
`model.safetensors`, tokenizer files), which transformers loads with `from_pretrained`.

- `DecoderOnly` → `GPT2LMHeadModel` (our decoder-only model is GPT-2's architecture);
- `EncoderOnly` → `BertModel`, `EncoderOnlyClassifier` → `BertForSequenceClassification`.

The weights go through the same tables that `import-hf` reads (`models.hf`), inverted; the
written directory is read back with our importer and its logits compared with the model
(float32, within 1e-5) before the export counts as done. Tokenizers: GPT-2's
`tokenizer.json` and BERT's `vocab.txt` are written with the `tokenizer_config.json`
transformers' `AutoTokenizer` needs; the SentencePiece `tokenizer.model` of a run trained
here is copied and written as a `tokenizer.json` too (`text.hf_tokenizer_json`), which
`AutoTokenizer` reads (fast or not) with our ids, our begin and end tokens included, and
the text that spells a special token read as text, as ours reads it
(`split_special_tokens`). `import-hf` reads GPT-2's and BERT's tokenizers only, so it
reads back the export of a run imported from such a checkpoint, not that of a run trained
here. `config.json` names the run exported (`RUN_ENTRY`): an export of another run is not
written over (`staged_export.check_export_target`).
"""

from __future__ import annotations

import logging
import os

import numpy as np

from transformer_zoo.errors import with_article
from transformer_zoo.files import atomic_path, read_json, write_json, write_text
from transformer_zoo.run_directory import CONFIG_FILE, RunConfig
from transformer_zoo.run_state import run_identity

log = logging.getLogger("transformer_zoo.export")
TOLERANCE = 1e-5
# The config.json entry naming the run exported (`run_state.run_identity`), which our
# exports keep in their own config.json: an export of another run is not overwritten.
# transformers keeps an unknown entry as an attribute of the config.
RUN_ENTRY = "transformer_zoo_run"


def export_hf(model, out_dir: str | os.PathLike, config: RunConfig, tokenizer_dir) -> dict:
    """Writes `model` in Hugging Face layout into `out_dir` and checks it.

    Args:
        model: a `DecoderOnly`, `EncoderOnly` or `EncoderOnlyClassifier`.
        out_dir: the directory to write (created if needed).
        config: the run's `RunConfig` (special ids, label names, tokenizer file).
        tokenizer_dir: where the run's tokenizer files are.

    Returns:
        `{"architecture", "files", "tensors", "parameters", "max_abs_diff"}`.

    Raises:
        ValueError: a model the formats cannot express (an encoder-decoder, an activation
            GPT-2 lacks, a classifier without pooler), or one that `model.quantize`
            quantized.
    """
    from safetensors.numpy import save_file

    from transformer_zoo.models import DecoderOnly, EncoderOnly, EncoderOnlyClassifier
    from transformer_zoo.models.family import refuse_quantized
    from transformer_zoo.models.hf.bert import to_bert
    from transformer_zoo.models.hf.gpt2 import to_gpt2

    refuse_quantized(model)  # before anything is written
    if isinstance(model, DecoderOnly):
        hf_config, tensors = to_gpt2(model)
    elif isinstance(model, (EncoderOnly, EncoderOnlyClassifier)):
        hf_config, tensors = to_bert(model, config.label_names, config.extra.get("problem_type"))
    else:
        raise ValueError(
            "`--format hf` writes decoder-only (GPT-2) and encoder-only (BERT) models; "
            f"this one is {with_article(type(model).__name__)}."
        )
    hf_config.update(_special_tokens(config))
    hf_config[RUN_ENTRY] = run_identity(config)
    out_dir = os.fspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    tokenizer_files = write_hf_tokenizer(out_dir, config, tokenizer_dir, hf_config)
    with atomic_path(os.path.join(out_dir, "model.safetensors")) as path:
        save_file(tensors, path, metadata={"format": "pt"})
    write_json(os.path.join(out_dir, CONFIG_FILE), hf_config)
    difference = _read_back(model, out_dir)
    log.info(
        "hf: weights read back through import-hf's tables, largest difference %.1e", difference
    )
    if difference > TOLERANCE:
        raise ValueError(
            f"The Hugging Face export read back differs from the model by {difference:.2e} "
            f"(more than {TOLERANCE})."
        )
    return {
        "architecture": hf_config["architectures"][0],
        "files": sorted(["config.json", "model.safetensors", *tokenizer_files]),
        "tensors": len(tensors),
        "parameters": int(sum(v.size for v in tensors.values())),
        "max_abs_diff": difference,
    }


def exported_run(out_dir: str) -> dict | None:
    """The `run_identity` of the run whose Hugging Face export `out_dir` holds, or None
    where its config.json does not name one (transformers' own, or none)."""
    try:
        identity = read_json(os.path.join(out_dir, CONFIG_FILE)).get(RUN_ENTRY)
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return None
    return identity if isinstance(identity, dict) else None


def _special_tokens(config: RunConfig) -> dict:
    ids = config.special_ids
    names = {"bos": "bos_token_id", "eos": "eos_token_id", "pad": "pad_token_id"}
    if config.tokenizer == "vocab.txt":
        return {"pad_token_id": ids["pad"]}
    return {key: ids[name] for name, key in names.items() if ids.get(name) is not None}


def write_hf_tokenizer(out_dir: str, config: RunConfig, tokenizer_dir, hf_config: dict) -> list:
    """Writes the run's tokenizer files into `out_dir` as transformers' `AutoTokenizer`
    reads them, with its `tokenizer_config.json`; returns the names written.

    Args:
        out_dir: the export directory.
        config: the run's `RunConfig` (the tokenizer file, the family, the special ids).
        tokenizer_dir: where the run's tokenizer files are.
        hf_config: the model's `config.json` (`n_positions`, the length of a run
            without `max_length`).
    """
    import shutil

    from transformer_zoo.text.byte_level_bpe import TOKENIZER_JSON
    from transformer_zoo.text.files import WORDPIECE_EXTRA_FILES

    tokenizer_dir = os.fspath(tokenizer_dir)
    name = config.tokenizer
    shutil.copyfile(os.path.join(tokenizer_dir, name), os.path.join(out_dir, name))
    written = [name]
    model_max_length = config.max_length or hf_config.get("n_positions", 512)
    if name == TOKENIZER_JSON:
        from transformer_zoo.text.byte_level_bpe import ByteLevelBPETokenizer

        tokenizer = ByteLevelBPETokenizer.from_directory(tokenizer_dir, config.special_ids["eos"])
        token = tokenizer.id_to_token(tokenizer.eos_id)
        settings = {
            "tokenizer_class": "GPT2Tokenizer",
            "bos_token": token,
            "eos_token": token,
            "unk_token": token,
            "add_prefix_space": tokenizer.add_prefix_space,
            "model_max_length": model_max_length,
        }
    elif name == "vocab.txt":
        extra = os.path.join(tokenizer_dir, WORDPIECE_EXTRA_FILES[0])
        if os.path.isfile(extra):
            shutil.copyfile(extra, os.path.join(out_dir, WORDPIECE_EXTRA_FILES[0]))
            return [*written, WORDPIECE_EXTRA_FILES[0]]
        settings = {
            "tokenizer_class": "BertTokenizer",
            "do_lower_case": True,
            "model_max_length": model_max_length,
        }
    else:  # our SentencePiece model, and the tokenizer.json that encodes as it does
        from transformer_zoo.text.hf_tokenizer_json import sentencepiece_tokenizer_json
        from transformer_zoo.text.tokenizer import Tokenizer

        tokenizer = Tokenizer.load(os.path.join(tokenizer_dir, name))
        # Our formats: a decoder-only prompt is [bos] + pieces; an encoder-only text
        # [bos] + pieces + [eos] (BERT's [CLS] … [SEP]).
        # A model of fewer than two segments reads a pair's second text in segment 0.
        pair_segment = int(hf_config.get("type_vocab_size", 2) >= 2)
        converted = sentencepiece_tokenizer_json(
            tokenizer, config.family == "encoder-only", pair_segment
        )
        write_text(os.path.join(out_dir, TOKENIZER_JSON), converted.to_str())
        written.append(TOKENIZER_JSON)
        specials = {key: i for key, i in tokenizer.special_ids.items() if i is not None}
        settings = {
            # transformers 5.25 reads it as its TokenizersBackend, use_fast or not.
            "tokenizer_class": "PreTrainedTokenizerFast",
            **{f"{key}_token": tokenizer.id_to_piece(i) for key, i in specials.items()},
            # "<s>" in a text is three characters to SentencePiece, not a begin token.
            "split_special_tokens": True,
            "clean_up_tokenization_spaces": False,
            "model_max_length": model_max_length,
        }
    write_json(os.path.join(out_dir, "tokenizer_config.json"), settings)
    return [*written, "tokenizer_config.json"]


def _read_back(model, out_dir: str) -> float:
    """The largest difference between `model`'s outputs and those of `out_dir` imported."""
    from transformer_zoo.models import DecoderOnly, EncoderOnlyClassifier
    from transformer_zoo.models.hf.bert import import_hf_bert
    from transformer_zoo.models.hf.gpt2 import import_hf_gpt2

    rng = np.random.default_rng(0)
    if isinstance(model, DecoderOnly):
        ids = rng.integers(0, model.vocabulary_size, (2, min(model.max_length, 16)))
        inputs = {"token_ids": ids, "padding_mask": np.ones_like(ids, bool)}
        return float(
            np.abs(np.asarray(model(inputs)) - np.asarray(import_hf_gpt2(out_dir)(inputs))).max()
        )
    backbone = model.backbone if isinstance(model, EncoderOnlyClassifier) else model
    ids = rng.integers(0, backbone.vocabulary_size, (2, min(backbone.max_length, 16)))
    inputs = {"token_ids": ids, "padding_mask": np.ones_like(ids, bool)}
    theirs = import_hf_bert(out_dir)
    if isinstance(model, EncoderOnlyClassifier):
        return float(np.abs(np.asarray(model(inputs)) - np.asarray(theirs(inputs))).max())
    ours, read = model(inputs)["sequence_output"], theirs(inputs)["sequence_output"]
    return float(np.abs(np.asarray(ours) - np.asarray(read)).max())
