"""The tokenizer directories of `hf_tokenizer_reference.json` and
`hf_tokenizer_defaults_reference.json`, made from the committed checkpoints: what
`make_hf_references.py tokenizers` and `make_hf_tokenizer_defaults.py` ran transformers on
and what the tests run ours on (standard library only, so that all import it).

A case names a base checkpoint directory and what to change in a copy of it:

- `patch`: `{file: {key: value}}`, top-level keys of a JSON file set (a null value removes
  the key);
- `write`: `{file: content}`, a file written whole (JSON); a `tokenizer.json` whose
  `model.vocab` is null gets the base's `vocab.txt` as its WordPiece vocabulary;
- `remove`: the files deleted.
"""

import json
import pathlib
import shutil

DATA_DIR = pathlib.Path(__file__).resolve().parent
REFERENCE = DATA_DIR / "hf_tokenizer_reference.json"
# The same for options' keys, or tokenizer_config.json, missing (make_hf_tokenizer_defaults.py).
DEFAULTS_REFERENCE = DATA_DIR / "hf_tokenizer_defaults_reference.json"
# The checkpoint files a case copies (the weights only where a test asks for them).
TOKENIZER_FILES = (
    "config.json", "vocab.txt", "tokenizer.json", "tokenizer_config.json",
    "special_tokens_map.json", "vocab.json", "merges.txt", "source.spm", "target.spm",
)  # fmt: skip


def reference(path: pathlib.Path = REFERENCE) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def make_case(base: pathlib.Path, case: dict, out: pathlib.Path) -> pathlib.Path:
    """`out`: the tokenizer files of `base` changed as `case` says."""
    out.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        if (base / name).is_file():
            shutil.copyfile(base / name, out / name)
    for name, keys in case.get("patch", {}).items():
        content = json.loads((out / name).read_text(encoding="utf-8"))
        for key, value in keys.items():
            if value is None:
                content.pop(key, None)
            else:
                content[key] = value
        (out / name).write_text(json.dumps(content, indent=1), encoding="utf-8")
    for name, content in case.get("write", {}).items():
        if name == "tokenizer.json" and content["model"].get("vocab", "") is None:
            tokens = (base / "vocab.txt").read_text(encoding="utf-8").splitlines()
            content = {**content, "model": {**content["model"]}}
            content["model"]["vocab"] = {token: i for i, token in enumerate(tokens)}
        (out / name).write_text(json.dumps(content, indent=1), encoding="utf-8")
    for name in case.get("remove", []):
        (out / name).unlink()
    return out


# What transformers' tokenizer gives for `texts`, as the reference files record it (the
# recording scripts pass a transformers tokenizer; this module imports none).
def bert_record(tokenizer, texts: list[str]) -> dict:
    ids = [tokenizer(text)["input_ids"] for text in texts]
    return {
        "vocabulary_size": len(tokenizer),
        "ids": ids,
        "decoded": [tokenizer.decode(row, skip_special_tokens=True) for row in ids],
        "decoded_keep_special": [tokenizer.decode(row) for row in ids],
    }


def gpt2_record(tokenizer, texts: list[str]) -> dict:
    ids = [tokenizer(text)["input_ids"] for text in texts]
    return {
        "ids": ids,
        "decoded": [tokenizer.decode(row, skip_special_tokens=True) for row in ids],
    }
