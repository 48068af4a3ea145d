"""Tiny SentencePiece tokenizers of ours and the texts that `hf_sentencepiece_reference.json`
holds transformers' ids of, for an `export --format hf` of each (what
`make_hf_references.py sentencepiece-export` ran transformers on, and what
tests/export/test_hf_export.py and tests/text/test_hf_tokenizer_json.py train again).

Each case is a tokenizer kind and normalization with the family whose formats it is
exported for: `"nfkc"` (text a model reads) for an encoder, `"identity"` (text a model
writes) and `"verbatim"` (a token stream) for a decoder.
"""

import hashlib
import pathlib
import unicodedata

DATA_DIR = pathlib.Path(__file__).resolve().parent
REFERENCE = DATA_DIR / "hf_sentencepiece_reference.json"
VOCABULARY_SIZE = 400  # some 180 characters, the rest longer pieces
KINDS = ("unigram", "bpe", "char")
FAMILIES = {"nfkc": "encoder-only", "identity": "decoder-only", "verbatim": "decoder-only"}
CASES = [(kind, normalization) for kind in KINDS for normalization in FAMILIES]

# Text in real scripts (NFC), so that what normalization does to them shows in the ids.
SCRIPTS = [
    "Tiếng Việt có dấu: người, được, những, nghiệm, Nguyễn.",
    "한국어 텍스트를 읽다.",
    "日本語のテキスト、ガギグ パピプ。東京は日本の首都です。",
    "Ἐν ἀρχῇ ἦν ὁ λόγος. Καλημέρα κόσμε.",
    "Привет, мир! Достопримечательность.",
    "Crème brûlée, naïveté, façade, São Paulo, Zürich, Kraków, İzmir.",
    "中文分词测试：我们在北京学习。2021年3月5日",
    "Emoji 😀 🎉 👍 and symbols < > / & % # @ ~ [ ]",
    "Quotes “like” ‘these’ — dashes… and 1/2.",
]
TEXTS = [
    "",
    "   ",
    "good film",
    "  leading and trailing spaces  ",
    "double  spaces,\ta tab\tand\t\ttwo",
    "line one\nline two\n\nthree",
    "First Citizen:\nBefore we proceed any further, hear me speak.",
    "Crème brûlée; CAFÉ naïve résumé",
    unicodedata.normalize("NFD", "Tiếng Việt: người được. 한국어를 읽다. Ἐν ἀρχῇ"),
    unicodedata.normalize("NFKD", "Nguyễn ガギグ パピプ"),
    "ｶﾞｷﾞ ＡＢＣ　１２３ ﬁne ½ ①",
    "東京は日本の首都です。2021年3月5日",
    "😀👍🏽 👨‍👩‍👧 emoji",
    "unknown ☃ ⊕ ∰ ΟΔΥΣΣΕΥΣ characters",
    "a\x00b\ufffdc\ue000d \u200bzero\ufeffwidth\u00adsoft",
    "\u00a0nbsp\u00a0 and \u3000ideographic",
    "▁literal ▁▁markers▁",
    "x<s>y </s> <pad> <mask> <unk>",
    "[MASK] [CLS]x[SEP]",
    "a" * 60 + " b",
]
PAIRS = [("good film", "bad film"), ("  two  ", "texts\there"), ("", "only the second")]


def corpus() -> list[str]:
    lines = (DATA_DIR / "shakespeare" / "input_head.txt").read_text(encoding="utf-8")
    return [line for line in lines.splitlines()[:80] if line.strip()] + SCRIPTS


def train(kind: str, normalization: str):
    """The case's tokenizer, trained as `train --tokenizer KIND` trains one."""
    from transformer_zoo.text import train_tokenizer

    return train_tokenizer(corpus(), VOCABULARY_SIZE, model_type=kind, normalization=normalization)


def pieces_digest(tokenizer) -> str:
    """What identifies the trained vocabulary: its pieces, their scores and types."""
    from sentencepiece import sentencepiece_model_pb2

    model = sentencepiece_model_pb2.ModelProto.FromString(tokenizer.proto)
    pieces = "\n".join(f"{p.piece}\t{p.score!r}\t{p.type}" for p in model.pieces)
    return hashlib.sha256(pieces.encode("utf-8")).hexdigest()


def write_export(tokenizer, family: str, directory: pathlib.Path) -> pathlib.Path:
    """The tokenizer files `export --format hf` writes for a run of `family` with
    `tokenizer`, in `directory`."""
    from transformer_zoo.export.hf import write_hf_tokenizer
    from transformer_zoo.run_directory import RunConfig

    run = directory / "run"
    run.mkdir(parents=True, exist_ok=True)
    tokenizer.save(run / "tokenizer.model")
    task = "embedding" if family == "encoder-only" else "language-model"
    config = RunConfig(family=family, preset="tiny", task=task)
    out = directory / "hf"
    out.mkdir(exist_ok=True)
    write_hf_tokenizer(str(out), config, run, {"n_positions": 64})
    return out


def our_ids(tokenizer, family: str, text: str, text2: str | None = None):
    """Our ids (and segment ids) of a text, or pair, in the family's format."""
    from transformer_zoo.text.formats import pair_ids, prompt_ids

    if family == "encoder-only":
        return pair_ids(tokenizer, text, text2)
    return prompt_ids(tokenizer, text), None
