"""The tokenizer files of a run or exported directory, written and read in one place.

- SentencePiece (models trained here): `tokenizer.model`, and `target_tokenizer.model`
  when an encoder-decoder has a separate target vocabulary;
- WordPiece (imported BERT checkpoints): `vocab.txt` and `tokenizer_config.json` (the
  options and the added tokens, as `WordPieceTokenizer.save` writes them; a run imported
  before added tokens were read may hold the checkpoint's own, or none);
- byte-level BPE (imported GPT-2 checkpoints): `tokenizer.json`;
- Marian (imported translation checkpoints): `source.spm`, `target.spm` and `vocab.json`.

`config.json` (`RunConfig.tokenizer`, `.target_tokenizer`) names the files; an export made
without a tokenizer serves token ids only (`export.tokenizer` false).
"""

from __future__ import annotations

import os
import shutil

from transformer_zoo.errors import ModelDirectoryError, first_line
from transformer_zoo.text.byte_level_bpe import TOKENIZER_JSON, ByteLevelBPETokenizer
from transformer_zoo.text.marian import SOURCE_SPM, TARGET_SPM, MarianTokenizer
from transformer_zoo.text.tokenizer import Tokenizer
from transformer_zoo.text.wordpiece import VOCAB_FILENAME, WordPieceTokenizer

TOKENIZER_FILE = "tokenizer.model"
TARGET_TOKENIZER_FILE = "target_tokenizer.model"
# Copied next to vocab.txt: the options and added tokens `WordPieceTokenizer.from_directory`
# reads (a run's `tokenizer_config.json` holds them all; `WordPieceTokenizer.save`).
WORDPIECE_EXTRA_FILES = ("tokenizer_config.json",)


def save_tokenizers(directory: str | os.PathLike, tokenizer, target_tokenizer=None) -> None:
    """Writes `tokenizer` (a SentencePiece `Tokenizer` or a `WordPieceTokenizer`) and, when
    it is a separate one (not None, not the same object), the target tokenizer; a stale
    target file from an earlier run is removed, since it would be read back as separate."""
    directory = os.fspath(directory)
    if isinstance(tokenizer, MarianTokenizer):
        tokenizer.save(directory, SOURCE_SPM)
        (target_tokenizer or tokenizer).save(directory, TARGET_SPM)
        return
    if isinstance(tokenizer, (WordPieceTokenizer, ByteLevelBPETokenizer)):
        tokenizer.save(directory)
    else:
        tokenizer.save(os.path.join(directory, TOKENIZER_FILE))
    target = os.path.join(directory, TARGET_TOKENIZER_FILE)
    if target_tokenizer is not None and target_tokenizer is not tokenizer:
        target_tokenizer.save(target)
    elif os.path.exists(target):
        os.remove(target)


def check_tokenizer_files(directory: str | os.PathLike, names) -> None:
    """Raises `ModelDirectoryError` unless `directory` holds each of the files `names`.

    Raises:
        ModelDirectoryError: naming the missing files, or the missing directory.
    """
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        raise ModelDirectoryError(
            f"{directory!r} is not a directory: it cannot hold the tokenizer file(s) "
            f"{', '.join(names)}."
        )
    missing = [n for n in names if not os.path.isfile(os.path.join(directory, n))]
    if missing:
        raise ModelDirectoryError(
            f"{directory!r} lacks the tokenizer file(s) {', '.join(missing)}."
        )


def copy_tokenizers(source_dir: str | os.PathLike, out_dir: str | os.PathLike, names) -> None:
    """Copies the tokenizer files `names` (and WordPiece's extra files, where present)
    from `source_dir` to `out_dir`.

    Raises:
        ModelDirectoryError: `source_dir` lacks one of `names` (nothing is copied).
    """
    check_tokenizer_files(source_dir, names)
    for name in [*names, *WORDPIECE_EXTRA_FILES]:
        source, target = os.path.join(source_dir, name), os.path.join(out_dir, name)
        if os.path.isfile(source) and os.path.abspath(source) != os.path.abspath(target):
            shutil.copyfile(source, target)


def load_tokenizers(directory: str | os.PathLike, config=None):
    """`(tokenizer, target_tokenizer)` of a directory; the same object twice when the
    vocabulary is shared, `(None, None)` for an export that serves token ids only.

    Args:
        directory: a run or exported directory.
        config: its `RunConfig`; None reads the SentencePiece files that are there.

    Raises:
        ModelDirectoryError: a tokenizer file is missing or unreadable.
    """
    directory = os.fspath(directory)
    if config is None:
        names = [TOKENIZER_FILE]
        if os.path.isfile(os.path.join(directory, TARGET_TOKENIZER_FILE)):
            names.append(TARGET_TOKENIZER_FILE)
    elif not config.export.get("tokenizer", True):
        return None, None
    else:
        names = config.tokenizer_files
    check_tokenizer_files(directory, names)
    path = os.path.join(directory, names[0])
    try:
        if names[0] == VOCAB_FILENAME:
            max_length = config.max_length or config.export.get("model", {}).get("max_length")
            tokenizer = WordPieceTokenizer.from_directory(directory, max_length=max_length)
            return tokenizer, tokenizer
        if names[0] == TOKENIZER_JSON:
            tokenizer = ByteLevelBPETokenizer.from_directory(directory, config.special_ids["eos"])
            return tokenizer, tokenizer
        if names[0] == SOURCE_SPM:
            return MarianTokenizer.from_directory(directory)
        tokenizer = Tokenizer.load(path)
        target = tokenizer
        if len(names) > 1:
            path = os.path.join(directory, names[1])
            target = Tokenizer.load(path)
    except (OSError, RuntimeError, ValueError) as error:
        raise ModelDirectoryError(
            f"Cannot load the tokenizer {path}: {first_line(error)}"
        ) from None
    return tokenizer, target
