"""Record what transformers makes of BERT's and GPT-2's tokenizer files with an option's key,
or the whole `tokenizer_config.json`, missing (tests/data/hf_tokenizer_defaults_reference.json):
BERT's `tokenize_chinese_chars` and GPT-2's `add_prefix_space` then take transformers'
defaults, which our tokenizers must take too.

Not a test (pytest collects only ``test_*.py``). It needs transformers and tokenizers (no
torch), which the project never depends on: run it in a throwaway venv, as
tests/data/README.md says:

    /tmp/ftests3/hfvenv/bin/python tests/data/make_hf_tokenizer_defaults.py

Each case is a copy of a committed checkpoint's tokenizer files changed as
`hf_tokenizer_cases.make_case` says; no vocabulary is written.
"""

from __future__ import annotations

import json
import pathlib
import platform
import re
import tempfile

import tokenizers
import transformers
from hf_tokenizer_cases import bert_record, gpt2_record, make_case  # beside this script

HERE = pathlib.Path(__file__).resolve().parent
OUT = HERE / "hf_tokenizer_defaults_reference.json"

BERT_TEXTS = [
    "\u4e0a\u4e0b\u4e0d\u4e16\u4e2d\u4e3b the cat \u4e4b\u4e45",
    "the\u4e2dcat",
    "Hello , world . how are you ?",
    "don't won't it's they're",
]
GPT2_TEXTS = ["Hello world", " Hello world", "First Citizen:", "\nBefore we proceed", ""]


def main() -> None:
    gpt2_pre = json.loads((HERE / "hf_gpt2" / "tokenizer.json").read_text())["pre_tokenizer"]
    json_prefix = {"tokenizer.json": {"pre_tokenizer": {**gpt2_pre, "add_prefix_space": True}}}
    no_key = {"tokenizer_config.json": {"add_prefix_space": None}}
    bert_cases = [
        {
            "name": "no_tokenize_chinese_chars_key",
            "patch": {"tokenizer_config.json": {"tokenize_chinese_chars": None}},
        },
        {"name": "no_tokenizer_config", "remove": ["tokenizer_config.json"]},
    ]
    gpt2_cases = [
        {"name": "no_add_prefix_space_key", "patch": no_key},
        {"name": "no_add_prefix_space_key_json_true", "patch": {**no_key, **json_prefix}},
        {"name": "no_add_prefix_space_key_vocab_merges", "patch": no_key,
         "remove": ["tokenizer.json"]},
        {"name": "no_tokenizer_config", "remove": ["tokenizer_config.json"]},
        {"name": "no_tokenizer_config_json_true", "patch": json_prefix,
         "remove": ["tokenizer_config.json"]},
        {"name": "no_tokenizer_config_vocab_merges",
         "remove": ["tokenizer_config.json", "tokenizer.json"]},
    ]  # fmt: skip

    def run(base: str, cases: list, texts: list, record) -> list:
        out = []
        for case in cases:
            with tempfile.TemporaryDirectory() as scratch:
                directory = make_case(HERE / base, case, pathlib.Path(scratch) / "case")
                tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
                out.append({**case, "class": type(tokenizer).__name__, **record(tokenizer, texts)})
        return out

    reference = {
        "bert": {
            "base": "hf_bert_classifier",
            "texts": BERT_TEXTS,
            "cases": run("hf_bert_classifier", bert_cases, BERT_TEXTS, bert_record),
        },
        "gpt2": {
            "base": "hf_gpt2",
            "texts": GPT2_TEXTS,
            "cases": run("hf_gpt2", gpt2_cases, GPT2_TEXTS, gpt2_record),
        },
        "versions": {
            "python": platform.python_version(),
            "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__,
        },
    }
    text = json.dumps(reference, indent=1, ensure_ascii=True)
    # One line per list of ids, so that the file stays small and reads by text.
    text = re.sub(r"\[[\d,\s]*\]", lambda m: re.sub(r"\s+", "", m.group()), text)
    OUT.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
