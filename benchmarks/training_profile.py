"""Where a training step's time goes: the TensorFlow profiler's op-type table for our
`DecoderOnly` and keras-hub's GPT-2, side by side (the models of `training_speed.py`).

Each model is compiled, warmed up with two `fit` steps, then profiled for `--steps`
steps of `model.fit`. The trace (`benchmarks/results/profiles/<library>_<setting>/`, open
it in TensorBoard's profile plugin) is summarised by TensorFlow's own `framework_op_stats`
tool: self time per op type, per step, host (CPU) ops only.

Usage:
    .venv/bin/python benchmarks/training_profile.py [--policy mixed_bfloat16] [--jit off]
        [--steps 3] [--top 15]

Writes benchmarks/results/training_profile_<policy>_<jit>.{json,md}.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
from collections import Counter
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.profiler.internal import _pywrap_profiler_plugin  # noqa: E402
from training_speed import CONFIG, build_keras_hub, build_ours, compile_, dataset  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def op_type_times(logdir: str) -> tuple[dict[str, float], float]:
    """Self time (µs) per op type from the profile in `logdir`, and the total."""
    paths = glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb"))
    if not paths:
        raise RuntimeError(f"The profiler wrote no trace under {logdir}.")
    raw, ok = _pywrap_profiler_plugin.xspace_to_tools_data(paths, "framework_op_stats", {})
    if not ok:
        raise RuntimeError(f"TensorFlow could not summarise the trace: {raw[:200]!r}")
    times: Counter = Counter()
    for table in json.loads(raw):  # including and excluding idle time: the first
        labels = [column["label"] for column in table["cols"]]
        kind, where = labels.index("Operation Type"), labels.index("Host/device")
        self_time = labels.index("Total self-time (us)")
        for row in table["rows"]:
            cells = [cell.get("v") if cell else None for cell in row["c"]]
            if cells[where] == "Host" and cells[kind] != "IDLE":
                times[cells[kind]] += float(cells[self_time])
        break
    return dict(times), float(sum(times.values()))


def profile(name: str, model, data, steps: int, logdir: str) -> dict:
    model.fit(data, epochs=1, steps_per_epoch=2, verbose=0)  # trace, compile, warm up
    shutil.rmtree(logdir, ignore_errors=True)
    tf.profiler.experimental.start(logdir)
    model.fit(data, epochs=1, steps_per_epoch=steps, verbose=0)
    tf.profiler.experimental.stop()
    times, total = op_type_times(logdir)
    return {
        "per_step_ms": {k: v / steps / 1e3 for k, v in times.items()},
        "total_ms": total / steps / 1e3,
    }


def markdown(report: dict, top: int) -> str:
    ours, hub = report["ours"], report["keras_hub"]
    kinds = sorted(
        set(ours["per_step_ms"]) | set(hub["per_step_ms"]),
        key=lambda k: -(ours["per_step_ms"].get(k, 0) + hub["per_step_ms"].get(k, 0)),
    )
    lines = [
        f"# Training step profile: {report['policy']}, XLA {report['jit']}",
        "",
        f"Self time per step by op type (host), {report['steps']} profiled `fit` steps, "
        f"batch {CONFIG['batch']} × {CONFIG['seq']} tokens.",
        "",
        "| op type | ours ms/step | share | keras-hub ms/step | share |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for kind in kinds[:top]:
        a, b = ours["per_step_ms"].get(kind, 0.0), hub["per_step_ms"].get(kind, 0.0)
        lines.append(
            f"| {kind} | {a:.0f} | {a / ours['total_ms']:.1%} | {b:.0f} | "
            f"{b / hub['total_ms']:.1%} |"
        )
    lines.append(f"| all op types | {ours['total_ms']:.0f} | | {hub['total_ms']:.0f} | |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--policy", default="mixed_bfloat16", choices=("float32", "mixed_bfloat16"))
    parser.add_argument("--jit", default="off", choices=("off", "on"))
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    keras.config.set_dtype_policy(args.policy)
    keras.utils.set_random_seed(0)
    setting = f"{args.policy}_{args.jit}"
    report = {"policy": args.policy, "jit": args.jit, "steps": args.steps, "config": CONFIG}
    for name, build, int_mask in (
        ("ours", build_ours, False),
        ("keras_hub", build_keras_hub, True),
    ):
        model = compile_(build(CONFIG), args.jit == "on")
        data = dataset(CONFIG, 2, int_mask).repeat()
        logdir = str(RESULTS / "profiles" / f"{name}_{setting}")
        report[name] = profile(name, model, data, args.steps, logdir)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"training_profile_{setting}.json").write_text(json.dumps(report, indent=2))
    text = markdown(report, args.top)
    (RESULTS / f"training_profile_{setting}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
