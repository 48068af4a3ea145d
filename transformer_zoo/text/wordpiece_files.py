"""A BERT checkpoint's WordPiece vocabulary and added tokens, read from its files as
transformers 5.25 reads them (`PreTrainedTokenizerBase.from_pretrained`,
`TokenizersBackend.__init__`), for `WordPieceTokenizer.from_directory`.

A checkpoint saved by transformers 4 has `vocab.txt`, `tokenizer_config.json` (with the
added tokens as `added_tokens_decoder`), often `added_tokens.json`,
`special_tokens_map.json` and `tokenizer.json`; one saved by transformers 5 has only
`tokenizer.json` (the vocabulary and the added tokens) and `tokenizer_config.json`.
"""

from __future__ import annotations

import logging
import os

from tokenizers import AddedToken

from transformer_zoo.files import read_optional_json

log = logging.getLogger(__name__)

VOCAB_FILENAME = "vocab.txt"
TOKENIZER_CONFIG, TOKENIZER_JSON = "tokenizer_config.json", "tokenizer.json"
ADDED_TOKENS_JSON, SPECIAL_TOKENS_MAP = "added_tokens.json", "special_tokens_map.json"
# An added token as transformers serialises it (`added_tokens_decoder`, tokenizer.json).
ADDED_TOKEN_FIELDS = ("content", "lstrip", "normalized", "rstrip", "single_word", "special")
NAMED_SPECIAL_TOKENS = ("unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


def read_vocabulary(path: str | os.PathLike) -> list[str]:
    """Reads a `vocab.txt`: one token per line, the id is the line number from 0."""
    with open(path, encoding="utf-8") as file:
        # Only the newline goes: a token may legitimately end in other whitespace.
        return [line.rstrip("\n").rstrip("\r") for line in file]


def optional_json(directory: str | os.PathLike, name: str) -> dict:
    """`directory/name` as a dict; `{}` where there is no such file (`read_optional_json`)."""
    return read_optional_json(directory, name) or {}


def vocabulary_of(directory: str | os.PathLike) -> list[str]:
    """The tokens in id order: those of `tokenizer.json`'s WordPiece model where there is
    one, as transformers reads them (4.x and 5.x; 5.x saves no vocab.txt), else
    `vocab.txt`'s; a warning where both are there and differ.

    Raises:
        ValueError: neither file is there, or `tokenizer.json` holds no WordPiece
            vocabulary.
    """
    directory = os.fspath(directory)
    vocab_path = os.path.join(directory, VOCAB_FILENAME)
    from_txt = read_vocabulary(vocab_path) if os.path.isfile(vocab_path) else None
    from_json = _json_vocabulary(directory)
    if from_txt is None and from_json is None:
        raise ValueError(
            f"No {VOCAB_FILENAME} or {TOKENIZER_JSON} in `directory`. "
            f"Received: directory={directory}"
        )
    if from_txt is not None and from_json is not None and from_txt != from_json:
        log.warning(
            "%s and %s in %s hold different vocabularies (%d and %d tokens): %s's is read, "
            "as transformers reads it",
            VOCAB_FILENAME, TOKENIZER_JSON, directory, len(from_txt), len(from_json),
            TOKENIZER_JSON,
        )  # fmt: skip
    return from_json if from_json is not None else from_txt


def _json_vocabulary(directory: str) -> list[str] | None:
    tokenizer_json = optional_json(directory, TOKENIZER_JSON)
    if not tokenizer_json:
        return None
    model = tokenizer_json.get("model") or {}
    ids = model.get("vocab")
    if model.get("type") != "WordPiece" or not isinstance(ids, dict):
        raise ValueError(
            f"{TOKENIZER_JSON} in {directory} holds no WordPiece vocabulary. "
            f"Received: a model of type {model.get('type')!r}"
        )
    if sorted(ids.values()) != list(range(len(ids))):
        raise ValueError(f"{TOKENIZER_JSON}'s vocabulary must give the ids 0 .. V-1, each once.")
    return sorted(ids, key=ids.get)


def added_tokens_of(directory: str | os.PathLike) -> list[tuple[int | None, AddedToken]]:
    """`(recorded id, token)` pairs in the order transformers adds them to the vocabulary.

    `tokenizer_config.json`'s `added_tokens_decoder` where it has one; else (transformers'
    legacy reading) `added_tokens.json`, each token special if a special token of
    `special_tokens_map.json` or the config (`extra_special_tokens` included) and else
    normalised, overridden by `tokenizer.json`'s `added_tokens`; then the
    `extra_special_tokens` not among them, with no recorded id (None).

    Raises:
        ValueError: a malformed record.
    """
    directory = os.fspath(directory)
    config = optional_json(directory, TOKENIZER_CONFIG)
    try:
        extra = _token_names(config.get("extra_special_tokens"))
        if "added_tokens_decoder" in config:
            records = {int(i): record for i, record in config["added_tokens_decoder"].items()}
        else:
            special_map = optional_json(directory, SPECIAL_TOKENS_MAP)
            extra += _token_names(special_map.get("extra_special_tokens"))
            named = {**config, **special_map}  # the map's win, as in transformers
            special = set(extra).union(*(_token_names(named.get(k)) for k in NAMED_SPECIAL_TOKENS))
            records = {
                int(i): {"content": content, "special": content in special}
                for content, i in optional_json(directory, ADDED_TOKENS_JSON).items()
            }
            for record in optional_json(directory, TOKENIZER_JSON).get("added_tokens", []):
                records[int(record["id"])] = record
        tokens = [(i, _added_token(records[i])) for i in sorted(records)]
    except (AttributeError, KeyError, TypeError, ValueError) as error:
        raise ValueError(f"Cannot read the added tokens in {directory}: {error}") from None
    contents = {token.content for _, token in tokens}
    return tokens + [
        (None, AddedToken(t, special=True)) for t in dict.fromkeys(extra) if t not in contents
    ]


def _added_token(record: dict) -> AddedToken:
    """A `tokenizers.AddedToken` from its serialised form; `normalized` defaults to not
    `special`, as in `AddedToken`."""
    if not isinstance(record, dict) or not isinstance(record.get("content"), str):
        raise ValueError(f"an added token needs a string `content`, not {record!r:.80}")
    special = bool(record.get("special", False))
    return AddedToken(
        record["content"],
        single_word=bool(record.get("single_word", False)),
        lstrip=bool(record.get("lstrip", False)),
        rstrip=bool(record.get("rstrip", False)),
        normalized=bool(record.get("normalized", not special)),
        special=special,
    )


def _token_names(value) -> list[str]:
    """The token strings of a special-token entry: None, a string, `{"content": ...}`, a
    list of those, or a dict of them by name (model-specific special tokens)."""
    if isinstance(value, dict) and "content" not in value:
        value = list(value.values())
    values = value if isinstance(value, list) else [value]
    names = [v.get("content") if isinstance(v, dict) else v for v in values]
    return [name for name in names if isinstance(name, str) and name]
