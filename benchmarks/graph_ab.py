"""Two ONNX graphs of one model, A and B, timed call by call: which is faster, on a machine
whose speed drifts by 10-20% from minute to minute.

Each round runs A, B, B, A (the next round B, A, A, B, so that neither graph always runs
twice in a row) on the same feeds and records (B + B) / (A + A); drift slower than a few
milliseconds cancels out of that ratio. A same-file control (a second session of A's file
in B's place) shows what the method itself reads as a difference. Both sessions' idle
threads sleep (`allow_spinning=False`): threads that spin after one session's run would
slow the other's, which is the session that runs next in this alternation, never in a
benchmark of one engine.

Feeds, from the graph's inputs:
- a decoder step (`past_key_values.*` inputs): batch 1, one new token over `--cached`
  positions (default 16, 48, 80, 112 and 144; random caches);
- an encoder (`input_ids` + `attention_mask`, no cache): a batch of 1 of 16 tokens, and
  batches of 16 rows of random lengths (5-40 tokens), left-aligned and padded.

Usage:
    .venv/bin/python benchmarks/graph_ab.py A.onnx B.onnx [--rounds 300] [--threads 2]
        [--cached 16 48 80 112 144]

e.g. an export of the previous commit against this one's (`git worktree` for the previous).
Prints the median ratio B/A with its quartiles, per workload, and the control's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.machine import check_file, cpu_flags  # noqa: E402
from transformer_zoo.generation.onnx_runner import make_session  # noqa: E402

CACHED = (16, 48, 80, 112, 144)


def workloads(
    session: ort.InferenceSession, rng: np.random.Generator, cached=CACHED
) -> dict[str, list]:
    """Workload name → the feed dicts of its calls (see the module docstring)."""
    shapes = {i.name: i.shape for i in session.get_inputs()}
    names = list(shapes)
    past = [n for n in names if n.startswith("past_key_values.")]
    if past:
        _, heads, _, width = shapes[past[0]]  # (batch, heads, cached, head width)
        calls = []
        for length in cached:
            feeds = {
                "input_ids": np.array([[5]], np.int64),
                "attention_mask": np.ones((1, length + 1), np.int64),
                "position_ids": np.array([[length]], np.int64),
            }
            for name in past:
                feeds[name] = rng.normal(size=(1, heads, length, width)).astype(np.float32)
            calls.append({k: v for k, v in feeds.items() if k in names})
        return {f"decoder step, {min(cached)}-{max(cached)} cached positions": calls}
    if "input_ids" not in names or "attention_mask" not in names:
        raise SystemExit(f"Neither a decoder step nor an encoder graph. Inputs: {names}")

    def batch(lengths):
        width = max(lengths)
        ids = np.zeros((len(lengths), width), np.int64)
        mask = np.zeros_like(ids)
        for row, length in enumerate(lengths):
            ids[row, :length] = rng.integers(1, 5, length)  # any ids do the same work
            mask[row, :length] = 1
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        return {k: v for k, v in feeds.items() if k in names}

    return {
        "encoder, batch 1 of 16 tokens": [batch([16]) for _ in range(4)],
        "encoder, 16 rows of 5-40 tokens": [batch(rng.integers(5, 41, 16)) for _ in range(4)],
    }


def abba(a: ort.InferenceSession, b: ort.InferenceSession, calls: list, rounds: int) -> list:
    """(B + B) / (A + A) of each round of A, B, B, A (or B, A, A, B) on one call's feeds."""

    def seconds(session, feeds):
        start = time.perf_counter()
        session.run(None, feeds)
        return time.perf_counter() - start

    ratios = []
    for round_ in range(rounds):
        feeds = calls[round_ % len(calls)]
        first, second = (a, b) if round_ % 2 == 0 else (b, a)
        times = [seconds(s, feeds) for s in (first, second, second, first)]
        outer, inner = times[0] + times[3], times[1] + times[2]
        ratios.append(inner / outer if first is a else outer / inner)
    return ratios


def describe(ratios: list) -> str:
    low, high = np.percentile(ratios, [25, 75])
    return f"{statistics.median(ratios):.3f} (quartiles {low:.3f}-{high:.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a", help="the reference graph (.onnx)")
    parser.add_argument("b", help="the graph to compare (.onnx), same inputs")
    parser.add_argument("--rounds", type=int, default=300, help="A, B, B, A rounds per workload")
    parser.add_argument("--threads", type=int, default=2, help="onnxruntime intra-op threads")
    parser.add_argument(
        "--cached", type=int, nargs="+", default=CACHED, help="a decoder's cached positions"
    )
    args = parser.parse_args()
    check_file(__file__, "A", args.a)
    check_file(__file__, "B", args.b)
    sessions = {
        key: make_session(path, args.threads, allow_spinning=False)
        for key, path in (("a", args.a), ("b", args.b), ("control", args.a))
    }
    print(f"{cpu_flags()}; {args.threads} threads; {args.rounds} rounds per workload")
    rng = np.random.default_rng(0)
    for name, calls in workloads(sessions["a"], rng, args.cached).items():
        for session in sessions.values():  # warm-up
            for feeds in calls:
                session.run(None, feeds)
        b = abba(sessions["a"], sessions["b"], calls, args.rounds)
        control = abba(sessions["a"], sessions["control"], calls, args.rounds)
        print(f"{name}: time B/A {describe(b)}; control A/A {describe(control)}")


if __name__ == "__main__":
    main()
