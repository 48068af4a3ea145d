"""The run every serving command makes over its inputs: read them (`read_inputs`), load
the model (`load_model`), check every input, then run them a chunk of batches at a time
(`CHUNK_BATCHES`) and write each chunk's lines as it is done (`serve_inputs`,
`write_lines`). Bad input becomes one `UsageError` line naming the input at fault."""

from __future__ import annotations

import contextlib
import os
import sys

from transformer_zoo.cli.parsing import UsageError
from transformer_zoo.errors import InputError, first_line
from transformer_zoo.progress import progress_bar


def read_inputs(args) -> list[str]:
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


def load_model(args):
    """The `ServedModel` of `--model` with `--engine`, on `--threads` threads (at most the
    machine's cores, with a warning)."""
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
chunk (`ServedModel._completions`; int8 exports excepted)."""


def serve_inputs(args, call, write, skip_blank: bool = False, blank=None, check=None) -> int:
    """Loads the model, reads the inputs and runs `call(model, inputs)` on them a chunk at
    a time (`CHUNK_BATCHES`); `write(first, inputs, outputs)` writes a chunk's results
    (`first`: the index of its first input) and returns an exit code (0, or 141 when the
    reader has gone). Returns the command's exit code. A progress bar on a terminal
    counts the inputs done.

    `check(model, inputs)` looks at every input before any chunk runs, so that bad input
    is reported before any work and any output. Input errors (all ValueErrors:
    InputError, bad search arguments) become one-line usage errors, with the line (or
    argument) of the input at fault.

    With `skip_blank`, blank lines (`text.is_blank`: nothing but whitespace, zero-width
    or control characters, which encode to no token) do not reach the model: their
    output is `blank`, so that output line i still answers input line i.
    """
    from transformer_zoo.text import is_blank

    inputs = read_inputs(args)
    model = load_model(args)
    runs = [not (skip_blank and is_blank(text)) for text in inputs]
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


def write_lines(lines) -> int:
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
