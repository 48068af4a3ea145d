"""Importing a Hugging Face checkpoint directory as a normal run directory: what
`transformer-zoo import-hf` does. `config.json`'s `model_type` picks the architecture:

- `bert`: `EncoderOnly` with its WordPiece tokenizer (`vocab.txt`, or transformers 5's
  `tokenizer.json`; the options and added tokens of `tokenizer_config.json`, written to
  the run as `WordPieceTokenizer.save` writes them). A sentence-transformers checkpoint
  contributes its maximum length (`sentence_bert_config.json`, 256 for all-MiniLM-L6-v2)
  and its pooling (`1_Pooling/config.json`: mean, which `embed` implements;
  `modules.json`: Normalize or not; any module besides Transformer, Pooling and Normalize
  is refused). A `BertForSequenceClassification` checkpoint becomes a classifier with its
  `id2label` and `problem_type` (which `classify` turns into scores as transformers'
  text-classification pipeline does).
- `gpt2`: `DecoderOnly` with its byte-level BPE (`tokenizer.json`, or `vocab.json` +
  `merges.txt`), task language-model; `generate` and `serve` continue prompts.
- `marian`: `EncoderDecoder` with `source.spm`, `target.spm` and `vocab.json`, task
  translation; the decoder starts from the pad token. The checkpoint's generation config
  is recorded as our search (`extra.generation`, `marian.generation_defaults`), not
  applied: `translate` and `serve` still decode greedily unless asked otherwise.

The run directory is what training writes (`transformer_zoo.run_directory`): `model.keras`,
`config.json` and the tokenizer files, so `export`, `generate`, `translate`, `embed`,
`classify` and `serve` take it as they take a trained model.
"""

from __future__ import annotations

import logging
import os

from transformer_zoo.files import read_optional_json
from transformer_zoo.run_directory import MODEL_FILE, RunConfig, save_run_config

log = logging.getLogger(__name__)

PRESET = "hf-bert"
# The sentence-transformers modules `embed` computes, by class name: `modules.json` names
# them `sentence_transformers.models.Pooling` (up to 4.x) or by their module path
# (`sentence_transformers.sentence_transformer.modules.pooling.Pooling`, 5.x).
SENTENCE_TRANSFORMERS_MODULES = ("Transformer", "Pooling", "Normalize")
# transformers' `PretrainedConfig.problem_type` values (None: decided by num_labels).
PROBLEM_TYPES = (None, "regression", "single_label_classification", "multi_label_classification")


def _read_json(directory: str, name: str) -> dict | list | None:
    return read_optional_json(directory, name, (dict, list))


def _recorded_generation(checkpoint_dir, hf_config: dict, length: int) -> dict:
    """`{"generation": ...}` (`generation_defaults`), or `{}` with a warning where our
    searches cannot follow it: it is only recorded, so it does not stop the import."""
    from transformer_zoo.models.hf.marian import generation_defaults

    try:
        return {"generation": generation_defaults(checkpoint_dir, hf_config, length)}
    except ValueError as error:
        log.warning("the checkpoint's generation config is not recorded: %s", error)
        return {}


def sentence_transformers_pooling(checkpoint_dir: str) -> dict:
    """`{"mode": "mean", "normalize": bool}` from a sentence-transformers checkpoint's
    `modules.json` and pooling config; mean without normalisation when they are absent.

    Raises:
        ValueError: a module other than Transformer, Pooling and Normalize (Dense, ...),
            or a pooling other than the mean over tokens, which `embed` implements.
    """
    modules = _read_json(checkpoint_dir, "modules.json") or []
    kinds = {_class_name(m): m for m in modules}
    others = [
        str(m.get("type")) for m in modules if _class_name(m) not in SENTENCE_TRANSFORMERS_MODULES
    ]
    if others:
        raise ValueError(
            f"Only the sentence-transformers modules {', '.join(SENTENCE_TRANSFORMERS_MODULES)} "
            f"are supported. Received: {', '.join(others)} in modules.json"
        )
    pooling_dir = kinds.get("Pooling", {}).get("path", "1_Pooling")
    pooling = _read_json(checkpoint_dir, os.path.join(pooling_dir, "config.json")) or {}
    prefix = "pooling_mode_"
    if "pooling_mode" in pooling:  # sentence-transformers 5.x: one mode by name
        modes = [str(pooling["pooling_mode"])]
    else:
        modes = sorted(k[len(prefix) :] for k, v in pooling.items() if k.startswith(prefix) and v)
    if pooling and modes not in (["mean_tokens"], ["mean"]):
        raise ValueError(
            f"Only mean pooling is supported (`embed` averages the token vectors). "
            f"Received: pooling modes {modes} in {pooling_dir}/config.json"
        )
    return {"mode": "mean", "normalize": "Normalize" in kinds}


def _class_name(module: dict) -> str:
    """A `modules.json` entry's class name: the end of its `type`."""
    return str(module.get("type", "")).rsplit(".", 1)[-1]


def _max_length(checkpoint_dir: str, hf_config: dict, requested: int | None) -> int:
    """`requested`, else sentence-transformers' `max_seq_length` (`sentence_bert_config.json`
    up to 4.x; 5.x keeps it as the tokenizer's `model_max_length`), else the positions."""
    positions = hf_config["max_position_embeddings"]
    if requested is None:
        requested = (_read_json(checkpoint_dir, "sentence_bert_config.json") or {}).get(
            "max_seq_length"
        )
    if requested is None:
        tokenizer = _read_json(checkpoint_dir, "tokenizer_config.json") or {}
        limit = tokenizer.get("model_max_length")  # 1e30 where a tokenizer has none
        requested = limit if isinstance(limit, int) and limit < positions else positions
    if not isinstance(requested, int) or not 2 <= requested <= positions:
        raise ValueError(
            f"`max_length` must be an integer in [2, {positions}] (max_position_embeddings). "
            f"Received: max_length={requested!r}"
        )
    return requested


def _problem_type(hf_config: dict) -> str | None:
    """config.json's `problem_type` (None, "regression", "single_label_classification",
    "multi_label_classification"), which decides how `classify` scores the logits."""
    problem_type = hf_config.get("problem_type")
    if problem_type not in PROBLEM_TYPES:
        raise ValueError(
            f"`problem_type` must be one of {PROBLEM_TYPES}. Received: problem_type={problem_type!r}"
        )
    return problem_type


def _label_names(hf_config: dict, num_classes: int) -> list[str]:
    id2label = hf_config.get("id2label") or {}
    names = [str(id2label.get(str(i), id2label.get(i, f"LABEL_{i}"))) for i in range(num_classes)]
    return names


def import_hf_run(
    checkpoint_dir: str | os.PathLike, run_dir: str | os.PathLike, max_length: int | None = None
) -> RunConfig:
    """Writes `run_dir` (`model.keras`, `config.json`, the tokenizer files) from a Hugging
    Face BERT, GPT-2 or Marian checkpoint.

    Args:
        checkpoint_dir: `config.json`, `model.safetensors` and the tokenizer files
            (`vocab.txt` or `tokenizer.json`; `tokenizer.json` or `vocab.json` +
            `merges.txt`; `source.spm`, `target.spm` + `vocab.json`), and optionally
            `tokenizer_config.json`, `added_tokens.json`, `special_tokens_map.json` and
            sentence-transformers' files.
        run_dir: the run directory; created, and it must not hold files yet.
        max_length: the longest input in tokens, special tokens included; default
            sentence-transformers' `max_seq_length`, else the checkpoint's positions.

    Returns:
        The `RunConfig` written.

    Raises:
        ValueError: a missing or malformed checkpoint file, an unsupported architecture
            or pooling, or a `run_dir` that already holds files.
    """
    from transformer_zoo.models.hf.checkpoint_files import read_config

    checkpoint_dir, run_dir = os.fspath(checkpoint_dir), os.fspath(run_dir)
    if os.path.isfile(checkpoint_dir):  # a checkpoint is a directory of files
        raise ValueError(
            f"{checkpoint_dir} is a file; give the checkpoint's directory, which holds config.json"
        )
    if not os.path.isdir(checkpoint_dir):
        raise ValueError(f"no such directory: {checkpoint_dir}")
    if os.path.exists(run_dir) and (not os.path.isdir(run_dir) or os.listdir(run_dir)):
        raise ValueError(f"`--out` must be a new or empty directory. Received: {run_dir}")
    # Everything is read and checked before anything is written.
    hf_config = read_config(checkpoint_dir)
    importers = {"bert": _bert_run, "gpt2": _gpt2_run, "marian": _marian_run}
    if "model_type" not in hf_config and {"family", "format_version"} <= set(hf_config):
        raise ValueError(
            f"{checkpoint_dir} holds a transformer-zoo run/export, not a Hugging Face "
            "checkpoint: give it to export, generate or serve as it is."
        )
    model_type = hf_config.get("model_type")
    if model_type not in importers:
        raise ValueError(
            f"config.json's model_type must be one of {sorted(importers)}. "
            f"Received: model_type={model_type!r}"
        )
    model, save_tokenizers, config = importers[model_type](checkpoint_dir, hf_config, max_length)
    os.makedirs(run_dir, exist_ok=True)
    save_tokenizers(run_dir)
    model.save(os.path.join(run_dir, MODEL_FILE))
    save_run_config(run_dir, config)  # last: a directory with config.json is complete
    return config


def _positions(hf_config: dict, key: str, requested: int | None) -> int:
    positions = hf_config[key]
    requested = positions if requested is None else requested
    if not isinstance(requested, int) or not 2 <= requested <= positions:
        raise ValueError(
            f"`max_length` must be an integer in [2, {positions}] ({key}). "
            f"Received: max_length={requested!r}"
        )
    return requested


def _gpt2_run(checkpoint_dir: str, hf_config: dict, max_length: int | None):
    from transformer_zoo.models.hf.gpt2 import import_hf_gpt2
    from transformer_zoo.text.byte_level_bpe import TOKENIZER_JSON, ByteLevelBPETokenizer

    model = import_hf_gpt2(checkpoint_dir)
    tokenizer = ByteLevelBPETokenizer.from_directory(checkpoint_dir)
    _check_vocabulary(tokenizer.vocabulary_size, hf_config["vocab_size"])
    config = RunConfig(
        family="decoder-only",
        preset="hf-gpt2",
        task="language-model",
        special_ids=tokenizer.special_ids,
        tokenizer=TOKENIZER_JSON,
        max_length=_positions(hf_config, "n_positions", max_length),
        extra=_provenance(checkpoint_dir, hf_config),
    )
    return model, tokenizer.save, config


def _marian_run(checkpoint_dir: str, hf_config: dict, max_length: int | None):
    from transformer_zoo.models.hf.marian import load_marian
    from transformer_zoo.text.marian import SOURCE_SPM, TARGET_SPM, MarianTokenizer

    model, bad_words = load_marian(checkpoint_dir)
    source, target = MarianTokenizer.from_directory(checkpoint_dir)
    _check_vocabulary(source.vocabulary_size, hf_config["vocab_size"])
    for key, ours in (("eos_token_id", source.eos_id), ("decoder_start_token_id", source.bos_id)):
        if hf_config.get(key, ours) != ours:
            raise ValueError(
                f"config.json's {key}={hf_config[key]} differs from the tokenizer's {ours}."
            )
    length = _positions(hf_config, "max_position_embeddings", max_length)
    config = RunConfig(
        family="encoder-decoder",
        preset="hf-marian",
        task="translation",
        special_ids=source.special_ids,
        tokenizer=SOURCE_SPM,
        target_tokenizer=TARGET_SPM,
        max_length=length,
        max_target_length=length,
        extra={
            **_provenance(checkpoint_dir, hf_config),
            # bad_words_ids, forbidden through final_logits_bias (marian.FORBIDDEN_BIAS),
            # and the biases they had.
            **({"bad_words": _bad_words(bad_words)} if bad_words else {}),
            # What transformers' generate(x) does with it, in our search's terms.
            **_recorded_generation(checkpoint_dir, hf_config, length),
        },
    )

    def save(run_dir):
        source.save(run_dir, SOURCE_SPM)
        target.save(run_dir, TARGET_SPM)

    return model, save, config


def _bad_words(bad_words: dict[int, float]) -> dict:
    ids = sorted(bad_words)
    return {"ids": ids, "final_logits_bias": [bad_words[i] for i in ids]}


def _check_vocabulary(tokens: int, model_tokens: int) -> None:
    """Refuses a tokenizer whose ids the model lacks; warns of model ids that no text
    gives (an added token the tokenizer files do not list, say, which the text would
    then reach as pieces), since a vocabulary padded to a round size is legitimate."""
    if tokens > model_tokens:
        raise ValueError(
            f"The tokenizer has {tokens} tokens, more than the model's vocab_size of {model_tokens}."
        )
    if tokens < model_tokens:
        log.warning(
            "config.json's vocab_size is %d but the tokenizer has %d tokens: no text gives "
            "the ids %d..%d (added tokens missing from the tokenizer files?)",
            model_tokens,
            tokens,
            tokens,
            model_tokens - 1,
        )


def _provenance(checkpoint_dir: str, hf_config: dict) -> dict:
    return {
        "imported_from": os.path.abspath(checkpoint_dir),
        "hf_architectures": hf_config.get("architectures"),
    }


def _bert_run(checkpoint_dir: str, hf_config: dict, max_length: int | None):
    from transformer_zoo.models.encoder_only_classifier import EncoderOnlyClassifier
    from transformer_zoo.models.hf.bert import import_hf_bert
    from transformer_zoo.text.wordpiece import VOCAB_FILENAME, WordPieceTokenizer

    model = import_hf_bert(checkpoint_dir)
    length = _max_length(checkpoint_dir, hf_config, max_length)
    tokenizer = WordPieceTokenizer.from_directory(checkpoint_dir, max_length=length)
    _check_vocabulary(tokenizer.vocabulary_size, hf_config["vocab_size"])
    classifier = isinstance(model, EncoderOnlyClassifier)
    pooling = sentence_transformers_pooling(checkpoint_dir) if not classifier else None
    config = RunConfig(
        family="encoder-only",
        preset=PRESET,
        task="classification" if classifier else "embedding",
        special_ids=tokenizer.special_ids,
        tokenizer=VOCAB_FILENAME,
        max_length=length,
        label_names=_label_names(hf_config, model.num_classes) if classifier else None,
        extra={
            **_provenance(checkpoint_dir, hf_config),
            "hidden_act": hf_config.get("hidden_act", "gelu"),
            **({"pooling": pooling} if pooling else {}),
            **({"problem_type": _problem_type(hf_config)} if classifier else {}),
        },
    )

    return model, tokenizer.save, config
