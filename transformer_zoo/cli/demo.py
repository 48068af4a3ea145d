"""`transformer-zoo demo` (the whole mission on the built-in task, `transformer_zoo.demo`)
and `transformer-zoo attention RUN_DIR --text "..."` (the attention pictures of one input)."""

from __future__ import annotations

import argparse

from transformer_zoo.cli.parsing import UsageError, positive_float
from transformer_zoo.demo import DEFAULT_OUT, TIME_BUDGET


def register(commands) -> None:
    demo = commands.add_parser("demo", help="train, evaluate, export and serve the built-in task")
    demo.add_argument("--out", default=DEFAULT_OUT, help=f"run directory (default {DEFAULT_OUT})")
    demo.add_argument(
        "--time-budget",
        type=positive_float,
        default=TIME_BUDGET,
        help="seconds of training at most (default: none)",
    )
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(handler=_demo)
    attention = commands.add_parser(
        "attention", help="draw attention heatmaps of a translation run for one input"
    )
    attention.add_argument("run_dir", help="a translation run directory")
    attention.add_argument(
        "--text",
        required=True,
        help="the source sentence to translate (English for the built-in task)",
    )
    attention.add_argument("--out", help="where to write the PNGs (default: RUN_DIR)")
    attention.set_defaults(handler=_attention)


def _attention(args: argparse.Namespace) -> int:
    from transformer_zoo.visualize.attention import draw_run_attention

    try:
        result = draw_run_attention(args.run_dir, args.text, args.out)
    except (ValueError, OSError) as error:  # RunError, an --out that cannot be made
        raise UsageError.from_error(error) from None
    print(f"translation: {result['translation']}")
    print(f"wrote {result['attention']}")
    print(f"wrote {result['causal_mask']}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from transformer_zoo.demo import prepare_demo, run_demo

    try:
        run = prepare_demo(args.out, args.time_budget, args.seed)
    except (ValueError, OSError) as error:  # RunError: --out a file, or another run's
        raise UsageError.from_error(error) from None
    run_demo(run)
    return 0
