"""Serving speed, side by side in one run: ONNX (our onnxruntime engine) against our
Keras engine, keras-hub's `GPT2CausalLM.generate` and onnxruntime-genai.

Decoder: d_model 512, 6 layers, 8 heads, d_ff 2048, vocabulary 8000, batch 1, a 16-token
prompt, 128 new tokens, greedy, no EOS (every run makes all 128 tokens). Every model has
its weights drawn afresh at random (normal, std 0.02): Keras gives the layers of one
attention block identical kernels when unseeded, and tf2onnx stores identical tensors
once, which would let the ONNX file read fewer bytes per token than it should.

Rows (tokens/s = 128 / wall time of a whole `generate`, prompt included):
- onnx fused: `transformer_zoo.serving` on our default export (onnxruntime's fused
  operators, `export.onnx.fused`), 2 intra-op threads that spin while idle (onnxruntime's
  default), greedy search in one onnxruntime call (an ONNX `Loop` over the step graph,
  `generation.onnx_greedy`); "stepped from Python": the same file with a session call per
  token (`in_graph_greedy=False`, the HTTP server's way); and the variants: threads that
  sleep, 1 thread;
- onnx plain: the `graphs="plain"` export (tf2onnx, LayerNorm fused, graph rewrites), and
  the variants without rewrites and without LayerNorm fusion;
- int8 / int4: those exports through `quantize_onnx` (int8: `quantize_dynamic`; int4:
  `MatMulNBits`; their accuracy is measured on a task by `transformer-zoo export
  --quantize int8 int4`, not here: these weights are random, so the tokens agree with
  float32 only for a while);
- onnxruntime-genai on the fused and plain files, float32 and quantized
  (`genai_config.json`, 2 threads);
- keras: our Keras engine (`CachedEngine` over `KerasRunner`: compiled `tf.function` steps);
- keras-hub: `GPT2CausalLM` with the same sizes, `jit_compile` "auto" (no XLA on CPU)
  and `jit_compile=True`.

Encoder (the same sizes, 32-token inputs): sentences/s of the Keras, ONNX and ONNX int8
engines at batch 1 and 32 (the graph alone, tokenization excluded).

Repeats run round-robin over the engines, in an order that rotates every round and 0.2 s
apart (the previous engine's spinning threads go idle first), so a change in the
machine's load hits all of them; the table gives the median and the best run, and the
median of units per CPU second of this process (all threads), which other processes' load
distorts much less than wall time. The machine is shared: the load average is recorded
before and after.

Each decoder row gives the graph's nodes per step and the weight bytes a step reads
(every MatMul's weights; not the embedding row a step gathers, about 2 KB); the bound
divides the rate at which a float32 gemv of 92 MB streams here (onnxruntime, 2 threads) by
those bytes. (For int8 and int4, whose weights fit in this CPU's cache and whose kernels
spend their time on arithmetic, it is a float32 bound, not theirs.)

Usage:
    .venv/bin/python benchmarks/serving.py [--repeats 3] [--skip-variants]

Writes benchmarks/results/serving.json and serving.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import onnx  # noqa: E402

from transformer_zoo.export import export_onnx, quantize_onnx  # noqa: E402
from transformer_zoo.generation import generate  # noqa: E402
from transformer_zoo.models import DecoderOnly, EncoderOnly  # noqa: E402
from transformer_zoo.serving import load_onnx  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import cpu_flags  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
SIZES = dict(num_layers=6, num_heads=8, hidden_dim=512, intermediate_dim=2048)
VOCABULARY, PROMPT, NEW_TOKENS, CONTEXT = 8000, 16, 128, 256


PAUSE = 0.2  # seconds between two timed runs (`round_robin`)


def randomize(model, seed: int) -> None:
    """Distinct random weights everywhere (LayerNorm scales stay 1)."""
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        if "gamma" in weight.path or "beta" in weight.path:
            continue
        weight.assign(rng.normal(0.0, 0.02, weight.shape).astype("float32"))


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def keras_hub_runners(prompt):
    import keras_hub

    backbone = keras_hub.models.GPT2Backbone(
        vocabulary_size=VOCABULARY, max_sequence_length=CONTEXT, dropout=0.0, **SIZES
    )
    randomize(backbone, 1)
    total = PROMPT + NEW_TOKENS
    ids = np.zeros((1, total), np.int32)
    ids[:, :PROMPT] = prompt
    inputs = {"token_ids": ids, "padding_mask": np.arange(total)[None] < PROMPT}
    runners = {}
    for name, jit in (
        ("keras-hub (jit_compile auto)", "auto"),
        ("keras-hub (jit_compile=True)", True),
    ):
        causal_lm = keras_hub.models.GPT2CausalLM(backbone=backbone, preprocessor=None)
        causal_lm.compile(sampler="greedy", jit_compile=jit)

        def run(causal_lm=causal_lm):
            out = causal_lm.generate(inputs, stop_token_ids=None)
            return np.asarray(out["token_ids"])[0, PROMPT:]

        runners[name] = run
    return runners


def genai_runner(directory, prompt):
    import onnxruntime_genai as og

    model = og.Model(str(directory))

    def run():
        params = og.GeneratorParams(model)
        params.set_search_options(max_length=PROMPT + NEW_TOKENS, do_sample=False)
        generator = og.Generator(model, params)
        generator.append_tokens(np.asarray(prompt, np.int32)[None])
        while not generator.is_done():
            generator.generate_next_token()
        return np.asarray(generator.get_sequence(0))[PROMPT:]

    return run


def round_robin(runners: dict, repeats: int, units: float, pause: float = PAUSE) -> dict:
    """Warm each runner up, then time them in turn, in an order that rotates every round
    (so that no engine always follows the same one), `pause` seconds apart: an engine's
    idle threads spin for a while after its run (onnxruntime's and TensorFlow's default)
    and would otherwise take the cores from the next one; on 2 cores that cost the engine
    after the float32 decoder 20-30% (int8 677 -> 931 tokens/s with a 0.2 s pause).
    Reported: units per wall-clock second, and units per CPU second of this process (all
    its threads), which other processes' load on a shared machine distorts much less."""
    outputs = {name: run() for name, run in runners.items()}
    rates = {name: [] for name in runners}
    cpu_rates = {name: [] for name in runners}
    names = list(runners)
    for round_ in range(repeats):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            time.sleep(pause)
            start, cpu_start = time.perf_counter(), time.process_time()
            runners[name]()
            rates[name].append(units / (time.perf_counter() - start))
            cpu_rates[name].append(units / max(time.process_time() - cpu_start, 1e-9))
    return {
        name: {
            "median": round(float(np.median(r)), 1),
            "best": round(max(r), 1),
            "per_cpu_second": round(float(np.median(cpu_rates[name])), 1),
            "runs": [round(x, 1) for x in r],
        }
        for name, r in rates.items()
    } | {"_outputs": outputs}


def weight_bytes_per_token(path) -> int:
    """Bytes of the weights a decoding step streams: every initializer that a MatMul (or
    its int8 / int4 form, or the tied head's `FusedMatMul` over the token table) reads; the
    other embedding tables' one row per token is left out."""
    model = onnx.load(str(path))
    sizes = {i.name: len(i.raw_data) or i.ByteSize() for i in model.graph.initializer}
    readers = {"MatMul", "FusedMatMul", "MatMulInteger", "DynamicQuantizeMatMul", "MatMulNBits"}
    names = {x for n in model.graph.node if n.op_type in readers for x in n.input}
    return sum(sizes[name] for name in names if name in sizes)


def gemv_bytes_per_second(megabytes: int = 92, repeats: int = 30) -> float:
    """The rate at which onnxruntime (2 threads) streams a float32 matrix through a
    (1, K) x (K, N) MatMul about as large as the decoder's weights (its best run)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    k = 2048
    n = megabytes * 2**20 // (4 * k)
    weight = np.random.default_rng(0).normal(size=(k, n)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "gemv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])],
        [numpy_helper.from_array(weight, "w")],
    )
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(
        helper.make_model(graph).SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    x = np.ones((1, k), np.float32)
    session.run(None, {"x": x})
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        session.run(None, {"x": x})
        times.append(time.perf_counter() - start)
    return weight.nbytes / min(times)  # the best: other jobs only ever slow it down


def decoder_benchmark(work: Path, repeats: int, variants: bool) -> dict:
    keras.utils.set_random_seed(0)
    model = DecoderOnly(VOCABULARY, max_length=CONTEXT, **SIZES)
    randomize(model, 0)
    prompt = np.random.default_rng(0).integers(4, VOCABULARY, (1, PROMPT))
    exports = {"onnx fused": {}, "onnx plain": {"graphs": "plain"}}
    if variants:
        exports["onnx plain, no graph rewrites"] = {"graphs": "plain", "simplify": False}
        exports["onnx plain, no rewrites, no LayerNorm fusion"] = {
            "graphs": "plain",
            "simplify": False,
            "fuse_layer_norm": False,
        }
    files, runners = {}, {}

    def add(name, directory, genai=True):
        for label, in_graph in ((name, True), (f"{name}, stepped from Python", False)):
            served = load_onnx(directory, intra_op_num_threads=2, in_graph_greedy=in_graph)
            runners[label] = lambda s=served: s.generate_ids(prompt, NEW_TOKENS).tokens[0]
            files[label] = directory / "model.onnx"
        if genai:
            label = "onnxruntime-genai, " + name.removeprefix("onnx ")
            runners[label] = genai_runner(directory, prompt[0])
            files[label] = files[name]

    for name, options in exports.items():
        directory = work / name.replace(" ", "_").replace(",", "")
        export_onnx(model, directory, **options)
        add(name, directory, genai=name in ("onnx fused", "onnx plain"))
        if name not in ("onnx fused", "onnx plain"):
            continue
        for weights in ("int8", "int4") if name == "onnx fused" else ("int8",):
            quantized = work / f"{name}_{weights}".replace(" ", "_")
            quantize_onnx(directory, quantized, max_accuracy_drop=None, weights=weights)
            add(f"{name} {weights}", quantized)
        if variants and name == "onnx fused":
            for label, threads, spinning in (
                ("onnx fused, threads sleep when idle", 2, False),
                ("onnx fused, 1 thread", 1, True),
            ):
                other = load_onnx(directory, intra_op_num_threads=threads, allow_spinning=spinning)
                runners[label] = lambda o=other: o.generate_ids(prompt, NEW_TOKENS).tokens[0]
                files[label] = directory / "model.onnx"
    runners["keras (our Keras engine)"] = lambda: generate(model, prompt, NEW_TOKENS).tokens[0]
    runners.update(keras_hub_runners(prompt[0]))
    results = round_robin(runners, repeats, NEW_TOKENS)
    outputs = results.pop("_outputs")
    # Every engine is credited NEW_TOKENS per run: one that stopped early (an EOS drawn;
    # the exports know id 3 as EOS, the Keras engine none) would be credited tokens it
    # never made.
    short = {name: len(tokens) for name, tokens in outputs.items() if len(tokens) != NEW_TOKENS}
    if short:
        raise SystemExit(f"These engines did not make {NEW_TOKENS} tokens: {short}")
    reference = outputs["keras (our Keras engine)"]
    for name, row in results.items():
        row["same_tokens_as_keras"] = (
            float(np.mean(outputs[name] == reference)) if not name.startswith("keras-hub") else None
        )
        if name in files:
            graph = onnx.load(str(files[name]), load_external_data=False).graph
            row["graph"] = {
                "nodes": len(graph.node),
                "bytes": os.path.getsize(files[name]),
                "weight_bytes_per_token": weight_bytes_per_token(files[name]),
            }
    return results


def encoder_benchmark(repeats: int) -> dict:
    from transformer_zoo.generation.keras_runner import KerasRunner

    keras.utils.set_random_seed(0)
    model = EncoderOnly(VOCABULARY, max_length=128, **SIZES)
    randomize(model, 2)
    with tempfile.TemporaryDirectory() as directory:
        export_onnx(model, directory)
        onnx_runner = load_onnx(directory, intra_op_num_threads=2).runner
        plain = os.path.join(directory, "plain")
        export_onnx(model, plain, graphs="plain")
        plain_runner = load_onnx(plain, intra_op_num_threads=2).runner
        quantized = os.path.join(directory, "int8")
        quantize_onnx(directory, quantized, max_accuracy_drop=None)
        int8_runner = load_onnx(quantized, intra_op_num_threads=2).runner
        keras_runner = KerasRunner(model)
        rows = {}
        for batch in (1, 32):
            ids = np.random.default_rng(batch).integers(4, VOCABULARY, (batch, 32))
            feeds = {
                "input_ids": ids,
                "attention_mask": np.ones_like(ids),
                "token_type_ids": np.zeros_like(ids),
            }
            calls = max(1, 64 // batch)

            def loop(runner, feeds=feeds, calls=calls):
                for _ in range(calls):
                    runner.run("model", feeds, numpy_outputs=("last_hidden_state",))

            timed = round_robin(
                {
                    f"keras, batch {batch}": lambda: loop(keras_runner),
                    f"onnx fused, batch {batch}": lambda: loop(onnx_runner),
                    f"onnx plain, batch {batch}": lambda: loop(plain_runner),
                    f"onnx fused int8, batch {batch}": lambda: loop(int8_runner),
                },
                repeats,
                batch * calls,
            )
            timed.pop("_outputs")
            rows.update(timed)
    return rows


def markdown(results: dict) -> str:
    gemv = results["gemv_bytes_per_second"]
    lines = [
        "# Serving benchmark",
        "",
        f"Machine: {results['machine']}; load average before {results['load_before']}, "
        f"after {results['load_after']} (a shared machine: compare rows, not runs).",
        "",
        "## Greedy decoding, batch 1, 16-token prompt, 128 new tokens (tokens/s)",
        "",
        f"Bound: a float32 gemv streams {gemv / 1e9:.1f} GB/s here (onnxruntime, 2 threads, "
        "best of runs before and after the decoders); "
        "tokens/s cannot pass that rate over the weight bytes a step reads.",
        "",
        "| engine | median | best | per CPU-second | tokens equal to Keras' | nodes per step "
        "| weight MB per token | best / bound |",
        "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |",
    ]
    for name, row in results["decoder"].items():
        same = row["same_tokens_as_keras"]
        same = "n/a (other weights)" if same is None else f"{same:.0%}"
        graph = row.get("graph", {})
        megabytes = bound = ""
        if graph:
            megabytes = f"{graph['weight_bytes_per_token'] / 1e6:.1f}"
            bound = f"{row['best'] / (gemv / graph['weight_bytes_per_token']):.0%}"
        lines.append(
            f"| {name} | {row['median']} | {row['best']} | {row['per_cpu_second']} | {same} "
            f"| {graph.get('nodes', '')} | {megabytes} | {bound} |"
        )
    decoder = results["decoder"]
    best_hub = max(r["best"] for n, r in decoder.items() if n.startswith("keras-hub"))

    def ratio(a, b):
        return f"{decoder[a]['best'] / decoder[b]['best']:.2f}×"

    lines += [
        "",
        "Ratios of best runs:",
        "",
        f"- fused float32 / keras-hub's best setting: {decoder['onnx fused']['best'] / best_hub:.2f}× "
        f"(plain: {decoder['onnx plain']['best'] / best_hub:.2f}×)",
        f"- fused int8 / onnxruntime-genai on the plain int8 file: "
        f"{ratio('onnx fused int8', 'onnxruntime-genai, plain int8')}; on the same fused int8 "
        f"file: {ratio('onnx fused int8', 'onnxruntime-genai, fused int8')}",
        f"- fused int4 / fused int8: {ratio('onnx fused int4', 'onnx fused int8')}",
        f"- in one call / stepped from Python: "
        f"{ratio('onnx fused', 'onnx fused, stepped from Python')} float32, "
        f"{ratio('onnx fused int8', 'onnx fused int8, stepped from Python')} int8; "
        f"stepped int8 / onnxruntime-genai on the same file: "
        f"{ratio('onnx fused int8, stepped from Python', 'onnxruntime-genai, fused int8')}",
        f"- fused / plain: {ratio('onnx fused', 'onnx plain')} float32, "
        f"{ratio('onnx fused int8', 'onnx plain int8')} int8",
        "",
        "## Encoder, 32-token inputs (sentences/s)",
        "",
        "| engine | median | best | per CPU-second |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, row in results["encoder"].items():
        lines.append(f"| {name} | {row['median']} | {row['best']} | {row['per_cpu_second']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-variants", action="store_true", help="only the default export")
    args = parser.parse_args()
    results = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs "
        f"({cpu_flags()})",
        "load_before": load_average(),
    }
    gemv = [gemv_bytes_per_second()]
    with tempfile.TemporaryDirectory() as work:
        results["decoder"] = decoder_benchmark(Path(work), args.repeats, not args.skip_variants)
    gemv.append(gemv_bytes_per_second())  # before and after: the best of both
    results["gemv_bytes_per_second"] = max(gemv)
    results["encoder"] = encoder_benchmark(args.repeats)
    results["load_after"] = load_average()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "serving.json").write_text(json.dumps(results, indent=2) + "\n")
    (RESULTS / "serving.md").write_text(markdown(results))
    print(markdown(results))


if __name__ == "__main__":
    main()
