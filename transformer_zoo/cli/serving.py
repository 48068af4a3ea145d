"""The serving commands of `transformer-zoo`: generate, translate, embed, classify.

`transformer_zoo.cli` registers them with `register(commands)`. Inputs come from the arguments, from
`--input FILE` (one per line; `-` is stdin), or from stdin; results are printed as text
or, with `--format jsonl`, one JSON object per input. Bad input is reported in one
line with exit code 2 (`UsageError`). TensorFlow is imported only by the engines that
need it (`--engine keras|saved_model`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys

from transformer_zoo.cli.parsing import (
    UsageError,
    add_search_arguments,
    positive_int,
    search_from_arguments,
)
from transformer_zoo.errors import InputError, first_line
from transformer_zoo.files import atomic_path
from transformer_zoo.generation import ENGINES, GENERATION_BATCH_SIZE
from transformer_zoo.progress import progress_bar


def register(commands) -> None:
    """Adds generate, translate, embed and classify to `commands` (argparse subparsers)."""
    for name, help_, handler in (
        ("generate", "continue text prompts (decoder-only)", _generate),
        ("translate", "translate texts (encoder-decoder)", _translate),
        ("embed", "sentence embeddings (encoder-only)", _embed),
        ("classify", "classify texts (encoder-only classifier)", _classify),
    ):
        parser = commands.add_parser(name, help=help_, description=_DESCRIPTIONS[name])
        _serving_arguments(parser)
        if name in ("generate", "translate"):
            _search_arguments(parser, name)
        batch = GENERATION_BATCH_SIZE if name in ("generate", "translate") else 32
        parser.add_argument(
            "--batch-size",
            type=positive_int,
            default=batch,
            help=f"inputs run together, of similar lengths (default {batch})",
        )
        if name == "embed":
            parser.add_argument("--output", help="write a float32 (N, D) .npy file instead")
        if name == "classify":
            parser.add_argument(
                "--pairs", action="store_true", help="each input is 'text<TAB>second text'"
            )
        parser.set_defaults(handler=handler)


_INPUTS = (
    "Inputs are the arguments, or the lines of --input FILE or stdin (UTF-8, one per line; "
    "output line i answers input i), written a chunk of batches at a time as each is done. "
    "Bad input is one line on stderr, exit code 2, before any output. On a terminal a "
    "progress bar on stderr counts the inputs done."
)
_DESCRIPTIONS = {
    "generate": "Continue each prompt with a decoder-only model; print the text it adds. "
    + _INPUTS
    + " A blank line is answered by an empty line without running the model; a prompt "
    "that leaves no room for --max-new-tokens in the model's context is an error.",
    "translate": "Translate each input with an encoder-decoder model. "
    + _INPUTS
    + " A blank line is answered by an empty line without running the model; a source "
    "longer than the model's maximum is an error.",
    "embed": "Sentence embeddings of an encoder-only model: the mean of the tokens' "
    "vectors, L2-normalised (unless an imported model's pooling says otherwise). "
    + _INPUTS
    + " Inputs longer than the model's maximum are cut to it (a warning says how many).",
    "classify": "The label and score of each input (or tab-separated pair, --pairs) with "
    "an encoder-only classifier. "
    + _INPUTS
    + " Inputs longer than the model's maximum are cut to it (a warning says how many).",
}


def _serving_arguments(parser) -> None:
    parser.add_argument("texts", nargs="*", help="inputs (default: --input or stdin)")
    parser.add_argument(
        "--model",
        required=True,
        help="an exported directory (engines onnx, saved_model) or a run directory (keras)",
    )
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default="onnx",
        help="onnx (default: onnxruntime, no TensorFlow), saved_model or keras (TensorFlow)",
    )
    parser.add_argument("--input", help="a file with one input per line ('-': stdin)")
    parser.add_argument(
        "--format",
        choices=("text", "jsonl"),
        default="text",
        help="text (default): one output per line; jsonl: one JSON object per input",
    )
    parser.add_argument(
        "--threads",
        type=positive_int,
        default=2,
        help="onnxruntime intra-op threads (default 2; at most the machine's cores)",
    )
    parser.add_argument(
        "--no-spinning",
        action="store_true",
        help="idle onnxruntime threads sleep instead of busy-waiting (for shared cores)",
    )


def _search_arguments(parser, name: str) -> None:
    default = 32 if name == "generate" else None
    parser.add_argument(
        "--max-new-tokens",
        type=positive_int,
        default=default,
        help="the most tokens to generate per input; the prompt and they must fit the "
        "model's context (default 32)"
        if name == "generate"
        else "the most target tokens per input (default: the training target length)",
    )
    add_search_arguments(parser)
    parser.add_argument(
        "--stop",
        action="append",
        metavar="STRING",
        help="end an output before this string (not printed) and stop generating it there; "
        "repeatable, the first to occur ends it (beam: the output is cut afterwards)",
    )


def _read_inputs(args) -> list[str]:
    """The inputs: the arguments, or the lines of `--input` or stdin, split and decoded as
    the training files are (`data.user_files.split_lines`: lines end at LF, CR LF or CR;
    UTF-8, a byte-order mark dropped, an undecodable line named `FILE:LINE:`). Blank lines
    are inputs too, and leading and trailing spaces are kept."""
    from transformer_zoo.data.user_files import DataError, split_lines

    if args.texts and args.input:
        raise UsageError("give inputs as arguments or with --input, not both")
    if args.texts:
        return list(args.texts)
    from_file = args.input is not None and args.input != "-"
    name = args.input if from_file else "<stdin>"
    try:
        if from_file:
            with open(args.input, "rb") as file:
                data = file.read()
        else:
            if args.input is None and sys.stdin.isatty():
                raise UsageError("no input: give texts, --input FILE, or pipe them to stdin")
            stream = getattr(sys.stdin, "buffer", None)  # bytes: no newline translation
            data = stream.read() if stream is not None else sys.stdin.read().encode("utf-8")
    except OSError as error:
        raise UsageError(
            f"{name}: cannot read the input ({error.strerror or first_line(error)})"
        ) from None
    try:
        lines = [line for _, line in split_lines(data, name)]
    except DataError as error:
        raise UsageError.from_error(error) from None
    if not lines:
        raise UsageError(f"{name}: the input holds no line")
    return lines


def _load(args):
    from transformer_zoo.serving import load_served_model

    threads = args.threads
    cores = os.cpu_count() or 1
    if threads > cores:
        print(
            f"transformer-zoo {args.command}: warning: --threads {threads} is more than this "
            f"machine's {cores} cores; using {cores}",
            file=sys.stderr,
        )
        threads = cores
    try:
        return load_served_model(args.model, args.engine, threads, not args.no_spinning)
    except ValueError as error:  # RunError, ModelDirectoryError
        raise UsageError.from_error(error) from None


CHUNK_BATCHES = 32
"""The inputs run `--batch-size` × this many at a time, in input order, and each chunk's
output lines are written as soon as it is done (as Marian's maxi-batches): a long file
shows its results as they come, and an interrupted command keeps the lines before it.
Within a chunk the batches are of similar lengths. A row's output does not depend on its
chunk (`ServedModel._in_batches`; int8 exports excepted)."""


def _serve(args, call, write, skip_blank: bool = False, blank=None, check=None) -> int:
    """Loads the model, reads the inputs and runs `call(model, inputs)` on them a chunk at
    a time (`CHUNK_BATCHES`); `write(first, inputs, outputs)` writes a chunk's results
    (`first`: the index of its first input) and returns an exit code (0, or 141 when the
    reader has gone). Returns the command's exit code. A progress bar on a terminal
    counts the inputs done.

    `check(model, inputs)` looks at every input before any chunk runs, so that bad input
    is reported before any work and any output. Input errors (all ValueErrors:
    InputError, bad search arguments) become one-line usage errors, with the line (or
    argument) of the input at fault.

    With `skip_blank`, blank lines do not reach the model: their output is `blank`, so
    that output line i still answers input line i.
    """
    inputs = _read_inputs(args)
    model = _load(args)
    runs = [not (skip_blank and not text.strip()) for text in inputs]
    where = "input" if args.texts else "line"
    rows = [i for i, run in enumerate(runs) if run]
    if check is not None and rows:  # blank lines alone: nothing to check
        with _input_errors(where, rows):
            check(model, [inputs[i] for i in rows])
    size = args.batch_size * CHUNK_BATCHES
    with progress_bar(len(inputs), _VERBS[args.command], None, "inputs") as bar:
        for first in range(0, len(inputs), size):
            chunk = inputs[first : first + size]
            rows = [i for i in range(first, first + len(chunk)) if runs[i]]
            outputs = [blank] * len(chunk)
            with _input_errors(where, rows):
                results = call(model, [inputs[i] for i in rows]) if rows else []
            for i, result in zip(rows, results, strict=True):
                outputs[i - first] = result
            code = write(first, chunk, outputs)
            if code:
                return code
            bar.update(len(chunk))
    return 0


_VERBS = {
    "generate": "generating",
    "translate": "translating",
    "embed": "embedding",
    "classify": "classifying",
}


@contextlib.contextmanager
def _input_errors(where: str, rows: list[int]):
    """Turns the ValueErrors of a call on the inputs `rows` into one-line usage errors:
    an `InputError` about one of them names its line (`where` N: ...)."""
    try:
        yield
    except InputError as error:
        if error.index is None:
            raise UsageError.from_error(error) from None
        raise UsageError(f"{where} {rows[error.index] + 1}: {first_line(error)}") from None
    except ValueError as error:
        raise UsageError.from_error(error) from None


def _write_lines(lines) -> int:
    """Writes each of `lines` (strings without their newline) to stdout, each in one
    write, so that an interrupted command leaves no half-written line. A reader that
    stops reading (`| head -1`) ends the command quietly with exit code 141 (128 +
    SIGPIPE, as the shell's own tools end), not with a traceback."""
    try:
        for line in lines:
            sys.stdout.write(line + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        # Python flushes stdout again at exit: point it at /dev/null so that this flush
        # does not fail too (the recipe of Python's `signal` documentation).
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):  # a stdout without a file descriptor
            pass
        finally:
            os.close(devnull)
        return 141
    return 0


def _text_writer(args, key: str):
    """`_serve`'s `write` for texts (generations, translations): a line each, or with
    `--format jsonl` a JSON object each. Returns `(write, done)`: `done()` warns, once,
    of outputs that hold line breaks (in text, they span several lines)."""
    broken: list[int] = []  # input numbers whose output holds a line break

    def write(first, inputs, outputs) -> int:
        if args.format == "jsonl":
            return _write_lines(
                json.dumps({"input": text, key: output}, ensure_ascii=False)
                for text, output in zip(inputs, outputs, strict=True)
            )
        broken.extend(first + i + 1 for i, output in enumerate(outputs) if _LINE_BREAK in output)
        return _write_lines(outputs)

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
    """`generate` (key "generated") and `translate` (key "translation")."""
    search = search_from_arguments(args)
    stops = _stops(args)
    method = "generate" if args.command == "generate" else "translate"

    def check(model, texts):  # every prompt or source fits, before any decoding
        _warn_unknown(model, model.start_ids(method, texts, args.max_new_tokens)[0])

    def call(model, texts):
        run = getattr(model, method)
        return run(texts, args.max_new_tokens, search, args.batch_size, stops)

    write, done = _text_writer(args, key)
    code = _serve(args, call, write, skip_blank=True, blank="", check=check)
    if not code:
        done()
    return code


def _generate(args) -> int:
    return _decode(args, "generated")


def _translate(args) -> int:
    return _decode(args, "translation")


def _warn_truncated_once(model, texts, pairs=None) -> None:
    """The one warning of the inputs an encoder-only model reads cut, numbered over the
    whole input (`ServedModel`'s own, on each chunk, would number within the chunk)."""
    from transformer_zoo.serving.served_model import warn_truncated

    warn_truncated(model.encoder_lengths(texts, pairs), model.max_length)


@contextlib.contextmanager
def _truncation_said():
    """Holds back `ServedModel`'s truncation warnings: `_warn_truncated_once` gave them."""
    from transformer_zoo.serving import served_model

    level = served_model.log.level
    served_model.log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        served_model.log.setLevel(level)


def _embed(args) -> int:
    import numpy as np

    if args.output and os.path.isdir(args.output):  # refused before the model runs
        raise UsageError(f"--output {args.output} is a directory: name the .npy file to write")
    kept: list[np.ndarray] = []  # for --output: one file, written whole at the end

    def write(first, inputs, rows) -> int:
        vectors = np.asarray(rows, np.float32)
        if args.output:
            kept.append(vectors)
            return 0
        if args.format == "jsonl":
            return _write_lines(
                json.dumps({"input": text, "embedding": vector.tolist()}, ensure_ascii=False)
                for text, vector in zip(inputs, vectors, strict=True)
            )
        return _write_lines(" ".join(f"{v:.6g}" for v in vector) for vector in vectors)

    def check(model, texts):
        _warn_truncated_once(model, texts)

    def call(model, texts):
        with _truncation_said():
            return model.embed(texts, batch_size=args.batch_size)

    code = _serve(args, call, write, check=check)
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


def _classify(args) -> int:
    def check(model, lines):
        if args.pairs:
            for index, line in enumerate(lines):
                if "\t" not in line:
                    raise InputError("--pairs needs 'text<TAB>second text' on every line", index)
        elif model.config.extra.get("text_pairs") and any("\t" in line for line in lines):
            logging.getLogger("transformer_zoo.cli").warning(
                "this model was trained on text pairs, and these lines hold tabs: "
                "without --pairs each line is read as one text"
            )
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
            return _write_lines(
                json.dumps({"input": text, **result}, ensure_ascii=False)
                for text, result in zip(inputs, results, strict=True)
            )
        return _write_lines(f"{result['label']}\t{result['score']:.4f}" for result in results)

    return _serve(args, call, write, check=check)
