"""The handlers of generate, translate, embed and classify: what each checks, runs and
writes, over the shared run of `serving_loop.serve_inputs`."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys

from transformer_zoo.cli.parsing import UsageError, search_from_arguments
from transformer_zoo.cli.serving_loop import serve_inputs, write_lines
from transformer_zoo.errors import InputError, first_line
from transformer_zoo.files import atomic_path


def _text_writer(args, key: str):
    """`serve_inputs`'s `write` for `Completion`s (generations, translations): a line of
    text each, or with `--format jsonl` a JSON object each, with its `finish_reason`.
    Returns `(write, done)`: `done()` warns, once, of outputs that hold line breaks (in
    text, they span several lines)."""
    broken: list[int] = []  # input numbers whose output holds a line break

    def write(first, inputs, outputs) -> int:
        if args.format == "jsonl":
            return write_lines(
                json.dumps(
                    {"input": text, key: output.text, "finish_reason": output.finish_reason},
                    ensure_ascii=False,
                )
                for text, output in zip(inputs, outputs, strict=True)
            )
        texts = [output.text for output in outputs]
        broken.extend(first + i + 1 for i, text in enumerate(texts) if _LINE_BREAK in text)
        return write_lines(texts)

    def done() -> None:
        if broken:  # output line i no longer answers input line i
            shown = ", ".join(map(str, broken[:5])) + (", ..." if len(broken) > 5 else "")
            print(
                f"transformer-zoo {args.command}: warning: the outputs of {len(broken)} "
                f"input(s) ({shown}) hold line breaks, so they span several lines here; "
                "--format jsonl keeps one output per line",
                file=sys.stderr,
            )

    return write, done


_LINE_BREAK = "\n"


def _stops(args) -> list[str]:
    """The `--stop` strings, checked before the model loads."""
    from transformer_zoo.serving.stops import stop_strings

    try:
        return stop_strings(args.stop, "--stop")
    except InputError as error:
        raise UsageError.from_error(error) from None


def _warn_unknown(model, ids: list[list[int]]) -> None:
    """One warning line when inputs hold text the tokenizer does not know (`ids`: their
    ids): each run of it reaches the model as one `<unk>` token (a character a char
    tokenizer never saw)."""
    unknown = model.config.special_ids.get("unk")
    if unknown is None:
        return
    found = sum(unknown in row for row in ids)
    if found:
        logging.getLogger("transformer_zoo.cli").warning(
            "%d of %d inputs hold text the tokenizer does not know: each run of it is read "
            "as one <unk> token",
            found,
            len(ids),
        )


def _decode(args, key: str) -> int:
    """`generate` (key "generated") and `translate` (key "translation"); a blank line's
    output is an empty text that ended ("stop")."""
    from transformer_zoo.serving.text_batches import Completion

    search = search_from_arguments(args)
    stops = _stops(args)
    method = "generate" if args.command == "generate" else "translate"

    def check(model, texts):  # every prompt or source fits, before any decoding
        _warn_unknown(model, model.start_ids(method, texts, args.max_new_tokens)[0])

    def call(model, texts):
        run = getattr(model, f"{method}_completions")
        return run(texts, args.max_new_tokens, search, args.batch_size, stops)

    write, done = _text_writer(args, key)
    blank = Completion("", "stop")
    code = serve_inputs(args, call, write, skip_blank=True, blank=blank, check=check)
    if not code:
        done()
    return code


def generate(args) -> int:
    """`transformer-zoo generate`: a continuation of each prompt."""
    return _decode(args, "generated")


def translate(args) -> int:
    """`transformer-zoo translate`: a translation of each source."""
    return _decode(args, "translation")


def _warn_truncated_once(model, texts, pairs=None) -> None:
    """The one warning of the inputs an encoder-only model reads cut, numbered over the
    whole input (`ServedModel`'s own, on each chunk, would number within the chunk)."""
    from transformer_zoo.serving.input_checks import warn_truncated

    warn_truncated(model.encoder_lengths(texts, pairs), model.max_length)


@contextlib.contextmanager
def _truncation_said():
    """Holds back `ServedModel`'s truncation warnings: `_warn_truncated_once` gave them."""
    from transformer_zoo.serving import input_checks

    level = input_checks.log.level
    input_checks.log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        input_checks.log.setLevel(level)


def embed(args) -> int:
    """`transformer-zoo embed`: each text's sentence embedding, a line of numbers (a JSON
    object with `--format jsonl`), or all of them in one `.npy` file (`--output`)."""
    import numpy as np

    if args.output:  # refused before the model runs
        if os.path.isdir(args.output):
            raise UsageError(f"--output {args.output} is a directory: name the .npy file to write")
        if not args.output.lower().endswith(".npy"):  # NumPy's binary, whatever the name
            raise UsageError(
                f"--output {args.output}: embed writes a NumPy .npy file; name it NAME.npy"
            )
        if args.format != "text":  # the default; the .npy file has no lines to format
            raise UsageError(
                f"--format {args.format} formats the printed lines; --output writes one .npy "
                "array instead: give one or the other"
            )
    kept: list[np.ndarray] = []  # for --output: one file, written whole at the end

    def write(first, inputs, rows) -> int:
        vectors = np.asarray(rows, np.float32)
        if args.output:
            kept.append(vectors)
            return 0
        if args.format == "jsonl":
            return write_lines(
                json.dumps({"input": text, "embedding": vector.tolist()}, ensure_ascii=False)
                for text, vector in zip(inputs, vectors, strict=True)
            )
        return write_lines(" ".join(f"{v:.6g}" for v in vector) for vector in vectors)

    def check(model, texts):
        model.check_encoder_texts("embed", texts)
        _warn_truncated_once(model, texts)

    def call(model, texts):
        with _truncation_said():
            return model.embed(texts, batch_size=args.batch_size)

    code = serve_inputs(args, call, write, check=check)
    if code or not args.output:
        return code
    vectors = np.concatenate(kept).astype(np.float32)
    try:
        with atomic_path(args.output) as temporary, open(temporary, "wb") as file:
            np.save(file, vectors)
    except OSError as error:  # its own words, not the staging path's
        reason = error.strerror or first_line(error)
        raise UsageError(f"cannot write {args.output}: {reason}") from None
    print(
        f"wrote {vectors.shape[0]}×{vectors.shape[1]} embeddings to {args.output}",
        file=sys.stderr,
    )
    return 0


def classify(args) -> int:
    """`transformer-zoo classify`: each text's (or tab-separated pair's, `--pairs`) label
    and its score (the whole result as a JSON object with `--format jsonl`)."""

    def check(model, lines):
        if args.pairs:
            for index, line in enumerate(lines):
                if "\t" not in line:
                    raise InputError("--pairs needs 'text<TAB>second text' on every line", index)
        model.check_encoder_texts("classify", *_texts_and_pairs(lines))
        _warn_truncated_once(model, *_texts_and_pairs(lines))

    def _texts_and_pairs(lines):
        if not args.pairs:
            return lines, None
        first, second = zip(*(line.split("\t", 1) for line in lines), strict=True)
        return list(first), list(second)

    def call(model, lines):
        with _truncation_said():
            return model.classify(*_texts_and_pairs(lines), batch_size=args.batch_size)

    def write(first, inputs, results) -> int:
        if args.format == "jsonl":
            return write_lines(
                json.dumps({"input": text, **result}, ensure_ascii=False)
                for text, result in zip(inputs, results, strict=True)
            )
        return write_lines(f"{result['label']}\t{result['score']:.4f}" for result in results)

    return serve_inputs(args, call, write, check=check)
