"""The character tables of Hugging Face's BERT normaliser, for the in-graph tokenizer.

Why a table: `tokenizers` (and so sentence-transformers) classifies characters with its own
Unicode data — general categories from an old `unicode_categories` crate, lower-casing from
the Rust standard library — while TensorFlow's RE2 and ICU carry other Unicode versions.
They disagree on hundreds of code points (newer punctuation and combining marks, Unicode 14+
case pairs), and ICU lower-cases a final capital sigma to "ς" where `tokenizers` gives "σ".
So `transformer_zoo.train.wordpiece` does not use RE2's `\\p{..}` classes or
`tf.strings.lower`; it uses these sets, derived from `tokenizers` itself by probing every
code point (`derive_tables`), and a test checks them against the installed `tokenizers`.

Regenerate after a `tokenizers` upgrade with
`python -m transformer_zoo.train.wordpiece_unicode > transformer_zoo/train/_wordpiece_unicode_data.py`.
"""

from __future__ import annotations

import functools

# Code points that cannot occur in UTF-8 text.
_SURROGATES = range(0xD800, 0xE000)
_LAST = 0x110000


def _code_points(stop: int) -> list[int]:
    return [c for c in range(0, min(stop, _LAST)) if c not in _SURROGATES]


def _probe(normalizer, cps: list[int]) -> list[str]:
    """Normalises each code point on its own: one call on all of them joined by "|"."""
    sep = "|"
    others = [c for c in cps if chr(c) != sep]
    out = normalizer.normalize_str(sep.join(map(chr, others))).split(sep)
    assert len(out) == len(others), "a probed character merged with the separator"
    result = dict(zip(others, out, strict=True))
    if ord(sep) in cps:
        result[ord(sep)] = normalizer.normalize_str(sep)
    return [result[c] for c in cps]


def derive_tables(stop: int = _LAST) -> dict[str, object]:
    """Reads the character classes off `tokenizers`' BERT normaliser and pre-tokenizer.

    Args:
        stop: probe code points below this (all of Unicode by default, about 7 s).

    Returns:
        `removed`, `whitespace`, `chinese`, `marks` (stripped with the accents) and
        `punctuation`: sorted code point lists; `lowercase`: {code point: lower-cased
        string} for every code point that lower-casing changes.
    """
    from tokenizers import normalizers, pre_tokenizers

    def bert(clean_text=False, handle_chinese_chars=False, strip_accents=False, lowercase=False):
        return normalizers.BertNormalizer(
            clean_text=clean_text,
            handle_chinese_chars=handle_chinese_chars,
            strip_accents=strip_accents,
            lowercase=lowercase,
        )

    cps = _code_points(stop)
    clean = _probe(bert(clean_text=True), cps)
    chinese = _probe(bert(handle_chinese_chars=True), cps)
    stripped = _probe(bert(strip_accents=True), cps)
    lowered = _probe(bert(lowercase=True), cps)
    # Punctuation: "a" + c + "a" stays one word unless c is split off on its own.
    probe = [c for c in cps if chr(c) != "a"]
    words = pre_tokenizers.BertPreTokenizer().pre_tokenize_str(
        "a" + "a".join(map(chr, probe)) + "a"
    )
    punctuation = sorted({ord(w) for w, _ in words if len(w) == 1 and w != "a"})
    return {
        "removed": [c for c, o in zip(cps, clean, strict=True) if o == ""],
        "whitespace": [c for c, o in zip(cps, clean, strict=True) if o == " " and c != 0x20],
        "chinese": [c for c, o in zip(cps, chinese, strict=True) if o == f" {chr(c)} "],
        "marks": [c for c, o in zip(cps, stripped, strict=True) if o == ""],
        "punctuation": punctuation,
        "lowercase": {c: o for c, o in zip(cps, lowered, strict=True) if o != chr(c)},
    }


def to_ranges(cps: list[int]) -> list[tuple[int, int]]:
    """Sorted code points → inclusive (first, last) ranges."""
    ranges: list[list[int]] = []
    for c in sorted(cps):
        if ranges and ranges[-1][1] == c - 1:
            ranges[-1][1] = c
        else:
            ranges.append([c, c])
    return [(a, b) for a, b in ranges]


def to_runs(mapping: dict[int, int]) -> list[tuple[int, int, int, int]]:
    """{code point: code point} → (first, last, step, delta) runs: each c in
    first, first + step, …, last maps to c + delta. Runs do not overlap."""
    runs: list[list[int]] = []
    for c in sorted(mapping):
        delta = mapping[c] - c
        if runs:
            first, last, step, run_delta = runs[-1]
            gap = c - last
            if run_delta == delta and (gap == step or (first == last and gap in (1, 2))):
                runs[-1][1:3] = [c, gap]
                continue
        runs.append([c, c, 1, delta])
    return [tuple(r) for r in runs]


def _format_ranges(name: str, cps: list[int]) -> list[str]:
    items = [f"{a:X}" if a == b else f"{a:X}-{b:X}" for a, b in to_ranges(cps)]
    return _format_string(name, items)


def _format_string(name: str, items: list[str]) -> list[str]:
    lines, line = [f"{name} = ("], ""
    for item in items:
        if len(line) + len(item) > 84:
            lines.append(f'    "{line}"')
            line = ""
        line += item + " "
    lines.append(f'    "{line.rstrip()}"')
    lines.append(")")
    return lines


def format_module(tables: dict[str, object]) -> str:
    """The source of `_wordpiece_unicode_data.py` for `tables`."""
    import tokenizers

    single = {c: ord(s) for c, s in tables["lowercase"].items() if len(s) == 1}
    multi = {c: s for c, s in tables["lowercase"].items() if len(s) != 1}
    runs = [f"{a:X}-{b:X}:{s}{d:+X}" for a, b, s, d in to_runs(single)]
    lines = [
        f'"""Generated by transformer_zoo.train.wordpiece_unicode from tokenizers '
        f'{tokenizers.__version__}; do not edit."""',
        "",
        "# Inclusive hex ranges (FIRST-LAST) or single hex code points, space-separated.",
    ]
    for name in ("removed", "whitespace", "chinese", "marks", "punctuation"):
        lines += _format_ranges(name.upper(), tables[name])
    lines.append("# Lower-casing runs FIRST-LAST:STEP±DELTA (hex): c ↦ c + DELTA.")
    lines += _format_string("LOWERCASE_RUNS", runs)
    lines.append(
        "LOWERCASE_MULTI = {" + ", ".join(f"0x{c:X}: {ascii(s)}" for c, s in multi.items()) + "}"
    )
    return "\n".join(lines) + "\n"


def parse_ranges(text: str) -> list[tuple[int, int]]:
    """Inverse of the range format of `_wordpiece_unicode_data`."""
    ranges = []
    for item in text.split():
        first, _, last = item.partition("-")
        ranges.append((int(first, 16), int(last or first, 16)))
    return ranges


def parse_runs(text: str) -> list[tuple[int, int, int, int]]:
    """Inverse of the lower-casing run format of `_wordpiece_unicode_data`."""
    runs = []
    for item in text.split():
        span, _, rest = item.partition(":")
        first, last = (int(x, 16) for x in span.split("-"))
        sign = "+" if "+" in rest else "-"
        step, _, delta = rest.partition(sign)
        runs.append((first, last, int(step), int(sign + delta, 16)))
    return runs


@functools.lru_cache(maxsize=1)
def load_tables() -> dict[str, object]:
    """The committed tables, in the form `derive_tables` returns."""
    from transformer_zoo.train import _wordpiece_unicode_data as data

    def expand(text):
        return [c for a, b in parse_ranges(text) for c in range(a, b + 1)]

    lowercase = {
        c: chr(c + d) for a, b, s, d in parse_runs(data.LOWERCASE_RUNS) for c in range(a, b + 1, s)
    }
    lowercase.update(data.LOWERCASE_MULTI)
    tables = {
        name: expand(getattr(data, name.upper()))
        for name in ("removed", "whitespace", "chinese", "marks", "punctuation")
    }
    tables["lowercase"] = dict(sorted(lowercase.items()))
    return tables


def re2_class(name: str) -> str:
    """An RE2 character class of one committed set, e.g. `re2_class("punctuation")`."""
    from transformer_zoo.train import _wordpiece_unicode_data as data

    parts = [
        f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}"
        for a, b in parse_ranges(getattr(data, name.upper()))
    ]
    return "[" + "".join(parts) + "]"


def lowercase_runs() -> tuple[list[tuple[int, int, int, int]], dict[int, str]]:
    """The committed lower-casing: single-character runs and multi-character mappings."""
    from transformer_zoo.train import _wordpiece_unicode_data as data

    return parse_runs(data.LOWERCASE_RUNS), dict(data.LOWERCASE_MULTI)


if __name__ == "__main__":
    print(format_module(derive_tables()), end="")
