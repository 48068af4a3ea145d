"""The serving commands of `transformer-zoo`: generate, translate, embed, classify.

`transformer_zoo.cli` registers them with `register(commands)`. Inputs come from the arguments, from
`--input FILE` (one per line; `-` is stdin), or from stdin; results are printed as text
or, with `--format jsonl`, one JSON object per input. Bad input is reported in one
line with exit code 2 (`UsageError`). TensorFlow is imported only by the engines that
need it (`--engine keras|saved_model`).

The run over the inputs that every command shares (read, check, run a chunk at a time,
write) is `serving_loop`'s; the four handlers are `serving_commands`'.
"""

from __future__ import annotations

from transformer_zoo.cli import serving_commands
from transformer_zoo.cli.parsing import add_search_arguments, positive_int
from transformer_zoo.generation import DEFAULT_NEW_TOKENS, ENGINES, GENERATION_BATCH_SIZE


def register(commands) -> None:
    """Adds generate, translate, embed and classify to `commands` (argparse subparsers)."""
    for name, help_, handler in (
        ("generate", "continue text prompts (decoder-only)", serving_commands.generate),
        ("translate", "translate texts (encoder-decoder)", serving_commands.translate),
        ("embed", "sentence embeddings (encoder-only)", serving_commands.embed),
        ("classify", "classify texts (encoder-only classifier)", serving_commands.classify),
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
    "that leaves no room for --max-new-tokens in the model's context is an error. With "
    "--format jsonl each record's finish_reason is stop (EOS or --stop) or length (cut "
    "at --max-new-tokens or the context).",
    "translate": "Translate each input with an encoder-decoder model. "
    + _INPUTS
    + " A blank line is answered by an empty line without running the model; a source "
    "longer than the model's maximum is an error. With --format jsonl each record's "
    "finish_reason is stop (EOS or --stop) or length (cut at --max-new-tokens).",
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
    parser.add_argument(
        "--max-new-tokens",
        type=positive_int,
        default=None,
        help="the most tokens to generate per input; the prompt and they must fit the "
        f"model's context (default {DEFAULT_NEW_TOKENS}, or the room a prompt leaves if less)"
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
