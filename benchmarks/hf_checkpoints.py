"""GPT-2 and Marian checkpoints side by side: our import + ONNX export against Hugging Face
Optimum's ONNX Runtime models and transformers' torch `generate`, on the same checkpoint,
greedy, batch 1, float32, in one run (issue 15).

The checkpoints are random-weight transformers models of published shapes (no hub here):
distilgpt2's (6 layers, width 768, 12 heads, vocabulary 50,257, context 1,024) and
opus-mt-en-de's (6 + 6 layers, width 512, 8 heads, FFN 2,048, vocabulary 58,101), saved
with `save_pretrained` and given the small tokenizers of tests/data (the models only see
ids). In the torch environment (`--torch-python`) a worker makes them, exports them with
Optimum (`ORTModelFor*.from_pretrained(export=True)`), and decodes with Optimum and with
torch; here we `import-hf` and `export` them and decode with our ONNX runtime. Every
engine decodes the same prompt to exactly `--new-tokens` tokens (EOS ignored), and the
engines take turns, round after round (`--repeats`); medians are reported. The worker also
loads *our* decoder-only `model.onnx` in Optimum's `ORTModelForCausalLM` (with the
checkpoint's config.json) and decodes our greedy tokens with it, and loads our
`export --format hf` directory with transformers and compares its logits.

Usage:
    .venv/bin/python benchmarks/hf_checkpoints.py --torch-python /tmp/st-venv/bin/python \
        [--repeats 5] [--new-tokens 64] [--record]

`--record` also rewrites tests/data/hf_gpt2/through_optimum.json: Optimum's greedy tokens on
our ONNX export of the suite's small GPT-2, and transformers' logits on our `--format hf`
export of it, which the suite holds our engines to.

Writes benchmarks/results/hf_checkpoints.json and .md; the checkpoints and exports are
cached under runs/bench_hf/.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
WORK = ROOT / "runs" / "bench_hf"
DATA = ROOT / "tests" / "data"
sys.path.insert(0, str(ROOT))

SHAPES = {
    "gpt2": dict(n_layer=6, n_embd=768, n_head=12, vocab_size=50257, n_positions=1024),
    "marian": dict(
        encoder_layers=6, decoder_layers=6, d_model=512, encoder_attention_heads=8,
        decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048,
        vocab_size=58101, max_position_embeddings=512,
    ),
}  # fmt: skip

# What the worker imports: checked in --torch-python before any work.
WORKER_MODULES = ("torch", "transformers", "onnxruntime", "optimum.onnxruntime")
# The torch-side worker: argv = work dir, threads; makes what is missing, then answers one
# JSON command per stdin line: {"op": "decode", "model": "gpt2", "engine": "torch" |
# "optimum" | "optimum_ours", "ids": [...], "new_tokens": N} -> {"s", "tokens"};
# {"op": "hf_logits", "dir": ..., "ids": [...]} -> {"logits": [...]} (last position);
# {"op": "load_ours", "model": name, "dir": ...}: our model.onnx in ORTModelForCausalLM.
WORKER = r"""
import json, os, shutil, sys, time
import numpy as np, torch, transformers
import onnxruntime
from optimum.onnxruntime import ORTModelForCausalLM, ORTModelForSeq2SeqLM
work, threads, shapes, data = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4]
torch.set_num_threads(threads)
TOKENIZER_FILES = {"gpt2": ["vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json",
                            "special_tokens_map.json"],
                   "marian": ["source.spm", "target.spm", "vocab.json", "tokenizer_config.json",
                              "special_tokens_map.json"]}

def make(name):
    path = os.path.join(work, name)
    if not os.path.isdir(path):
        torch.manual_seed(0)
        if name == "gpt2":
            config = transformers.GPT2Config(**shapes["gpt2"], bos_token_id=0, eos_token_id=0)
            model = transformers.GPT2LMHeadModel(config)
        else:
            config = transformers.MarianConfig(**shapes["marian"], activation_function="swish",
                scale_embedding=True, pad_token_id=279, eos_token_id=0,
                decoder_start_token_id=279, forced_eos_token_id=None)
            model = transformers.MarianMTModel(config)
        model.eval().save_pretrained(path + ".tmp")
        for file in TOKENIZER_FILES[name]:
            shutil.copyfile(os.path.join(data, "hf_" + name, file), os.path.join(path + ".tmp", file))
        os.rename(path + ".tmp", path)
    optimum_dir = path + "-optimum"
    if not os.path.isdir(optimum_dir):
        cls = ORTModelForCausalLM if name == "gpt2" else ORTModelForSeq2SeqLM
        cls.from_pretrained(path, export=True).save_pretrained(optimum_dir + ".tmp")
        os.rename(optimum_dir + ".tmp", optimum_dir)
    return path, optimum_dir

def options():
    so = onnxruntime.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return so

engines = {}
for name in ("gpt2", "marian"):
    path, optimum_dir = make(name)
    torch_cls = transformers.GPT2LMHeadModel if name == "gpt2" else transformers.MarianMTModel
    ort_cls = ORTModelForCausalLM if name == "gpt2" else ORTModelForSeq2SeqLM
    engines[name, "torch"] = torch_cls.from_pretrained(path).eval()
    engines[name, "optimum"] = ort_cls.from_pretrained(optimum_dir, session_options=options())
print(json.dumps({"ready": sorted(f"{m}/{e}" for m, e in engines),
                  "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                               "onnxruntime": onnxruntime.__version__}}), flush=True)
for line in sys.stdin:
    command = json.loads(line)
    if command["op"] == "load_ours":
        engines[command["model"], "optimum_ours"] = ORTModelForCausalLM.from_pretrained(
            command["dir"], session_options=options(), use_cache=True)
        print(json.dumps({"loaded": command["model"]}), flush=True)
        continue
    if command["op"] == "hf_logits":
        model = transformers.AutoModelForCausalLM.from_pretrained(command["dir"]).eval()
        with torch.no_grad():
            logits = model(torch.tensor([command["ids"]])).logits[0, -1].tolist()
        print(json.dumps({"logits": logits}), flush=True)
        continue
    model = engines[command["model"], command["engine"]]
    ids = torch.tensor([command["ids"]])
    n = command["new_tokens"]
    exact = {"min_new_tokens": n} if command.get("exact", True) else {"eos_token_id": 0}
    start = time.perf_counter()
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n,
                             do_sample=False, num_beams=1, pad_token_id=0, **exact)
    seconds = time.perf_counter() - start
    # A decoder-only output repeats the prompt; a seq2seq one starts with the start token.
    tokens = out[0, 1 if model.config.is_encoder_decoder else ids.shape[1]:].tolist()
    print(json.dumps({"s": seconds, "tokens": tokens}), flush=True)
"""


class Worker:
    def __init__(self, python: str, threads: int):
        self.log = open(WORK / "worker.log", "w")  # noqa: SIM115 (lives with the worker)
        self.process = subprocess.Popen(
            [python, "-c", WORKER, str(WORK), str(threads), json.dumps(SHAPES), str(DATA)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"},
        )  # fmt: skip
        self.info = self._read()

    def _read(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the torch worker stopped; see {WORK / 'worker.log'}")
        return json.loads(line)

    def ask(self, **command) -> dict:
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        return self._read()

    def close(self):
        self.process.stdin.close()
        self.process.wait(timeout=60)
        self.log.close()


def our_exports(name: str) -> tuple[Path, Path]:
    """`import-hf` and `export --format onnx` of the checkpoint (cached)."""
    from transformer_zoo.export.run_export import export_run
    from transformer_zoo.models.hf.run import import_hf_run

    run_dir, export_dir = WORK / f"{name}-run", WORK / f"{name}-export"
    if not (run_dir / "config.json").is_file():
        shutil.rmtree(run_dir, ignore_errors=True)
        import_hf_run(WORK / name, run_dir)
    if not (export_dir / "config.json").is_file():
        print(f"exporting {name} to ONNX ...", flush=True)
        export_run(run_dir, export_dir, formats=("onnx",))
    return run_dir, export_dir


def optimum_view_of_ours(export_dir: Path, checkpoint: Path, target: Path) -> Path:
    """Our decoder-only model.onnx with the checkpoint's transformers config.json: what
    `ORTModelForCausalLM.from_pretrained` reads."""
    if not target.is_dir():
        target.mkdir()
        (target / "model.onnx").symlink_to(export_dir.resolve() / "model.onnx")
        for name in ("config.json", "generation_config.json"):
            shutil.copyfile(checkpoint / name, target / name)
    return target


def record_suite_reference(worker: Worker) -> dict:
    """tests/data/hf_gpt2 through Optimum: our ONNX export of it decoded by
    `ORTModelForCausalLM` (greedy, the reference prompts, EOS honoured), and our
    `export --format hf` of it loaded by transformers (last-position logits), written to
    tests/data/hf_gpt2/through_optimum.json for tests/models/test_hf_checkpoints.py."""
    from transformer_zoo.export.run_export import export_run
    from transformer_zoo.models.hf.run import import_hf_run

    checkpoint = DATA / "hf_gpt2"
    reference = json.loads((checkpoint / "reference.json").read_text())
    run_dir, export_dir, hf_dir = (WORK / f"suite-gpt2-{part}" for part in ("run", "export", "hf"))
    for path in (run_dir, export_dir, hf_dir, WORK / "suite-gpt2-optimum"):
        shutil.rmtree(path, ignore_errors=True)
    import_hf_run(checkpoint, run_dir)
    export_run(run_dir, export_dir, formats=("onnx",))
    export_run(run_dir, hf_dir, formats=("hf",))
    view = optimum_view_of_ours(export_dir, checkpoint, WORK / "suite-gpt2-optimum")
    worker.ask(op="load_ours", model="suite", dir=str(view))
    greedy = [
        worker.ask(
            op="decode", model="suite", engine="optimum_ours", ids=ids,
            new_tokens=reference["new_tokens"], exact=False,
        )["tokens"]
        for ids in reference["inputs"]
    ]  # fmt: skip
    logits = [
        worker.ask(op="hf_logits", dir=str(hf_dir), ids=ids)["logits"]
        for ids in reference["inputs"]
    ]
    record = {
        "what": "ORTModelForCausalLM.generate on our model.onnx (greedy), and transformers' "
        "GPT2LMHeadModel on our export --format hf (last-position logits)",
        "inputs": reference["inputs"],
        "optimum_greedy": greedy,
        "hf_export_last_logits": logits,
        "versions": worker.info["versions"],
    }
    (checkpoint / "through_optimum.json").write_text(json.dumps(record) + "\n")
    return record


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--torch-python",
        default="/tmp/st-venv/bin/python",
        help="a python with torch, transformers and optimum (the worker's)",
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--record",
        action="store_true",
        help="also write tests/data/hf_gpt2/through_optimum.json (Optimum on our export of "
        "the suite's GPT-2 checkpoint)",
    )
    args = parser.parse_args()

    from benchmarks.machine import check_python, cpu_name

    python = check_python(__file__, "--torch-python", args.torch_python, WORKER_MODULES)

    import numpy as np

    from transformer_zoo.generation import Greedy
    from transformer_zoo.generation.search import generate as run_search
    from transformer_zoo.serving import load_served_model

    WORK.mkdir(parents=True, exist_ok=True)
    worker = Worker(python, args.threads)  # makes the checkpoints first
    exports = {name: our_exports(name) for name in SHAPES}
    if "gpt2/optimum_ours" not in worker.info["ready"]:
        view = WORK / "gpt2-ours-for-optimum"
        worker.ask(
            op="load_ours",
            model="gpt2",
            dir=str(optimum_view_of_ours(exports["gpt2"][1], WORK / "gpt2", view)),
        )
    if args.record:
        record_suite_reference(worker)
    served = {
        name: load_served_model(export_dir, "onnx", intra_op_num_threads=args.threads)
        for name, (_, export_dir) in exports.items()
    }
    prompt = list(range(5, 21))  # 16 ids; a Marian source ends with </s> (0)
    inputs = {"gpt2": [0, *prompt], "marian": [*prompt, 0]}

    def ours(name):
        model = served[name]
        start = time.perf_counter()
        result = run_search(
            model.engine, model.start_inputs([inputs[name]]), args.new_tokens, Greedy(), None
        )
        return {"s": time.perf_counter() - start, "tokens": result.tokens[0].tolist()}

    engines = {name: ["ours", "optimum", "torch"] for name in SHAPES}
    engines["gpt2"].append("optimum_ours")
    times = {(m, e): [] for m, names in engines.items() for e in names}
    tokens = {}
    for name in SHAPES:  # warm-up
        ours(name)
        for engine in engines[name][1:]:
            worker.ask(op="decode", model=name, engine=engine, ids=inputs[name], new_tokens=4)
    for round_ in range(args.repeats):
        for name in SHAPES:
            order = (
                engines[name][round_ % len(engines[name]) :]
                + engines[name][: round_ % len(engines[name])]
            )
            for engine in order:
                if engine == "ours":
                    answer = ours(name)
                else:
                    answer = worker.ask(
                        op="decode", model=name, engine=engine, ids=inputs[name],
                        new_tokens=args.new_tokens,
                    )  # fmt: skip
                times[name, engine].append(answer["s"])
                tokens[name, engine] = answer["tokens"]
        print(f"round {round_ + 1}/{args.repeats} done", flush=True)

    # Our hf export of the imported GPT-2 loads in transformers with the same logits.
    from transformer_zoo.export.run_export import export_run
    from transformer_zoo.models.hf.gpt2 import import_hf_gpt2

    hf_dir = WORK / "gpt2-hf"
    if not (hf_dir / "config.json").is_file():
        export_run(exports["gpt2"][0], hf_dir, formats=("hf",))
    theirs = np.array(worker.ask(op="hf_logits", dir=str(hf_dir), ids=inputs["gpt2"])["logits"])
    ids = np.array([inputs["gpt2"]])
    model = import_hf_gpt2(WORK / "gpt2")
    mine = np.asarray(model({"token_ids": ids, "padding_mask": np.ones_like(ids, bool)}))[0, -1]
    hf_export_diff = float(np.abs(theirs - mine).max())
    worker.close()

    rows = []
    for (name, engine), seconds in times.items():
        median = statistics.median(seconds)
        rows.append({
            "model": name, "engine": engine, "median_s": median,
            "tokens_per_s": args.new_tokens / median,
            "same_tokens_as_ours": tokens[name, engine] == tokens[name, "ours"],
        })  # fmt: skip
    speed = {(r["model"], r["engine"]): r["tokens_per_s"] for r in rows}
    ratios = {
        name: {
            "ours_over_optimum": speed[name, "ours"] / speed[name, "optimum"],
            "ours_over_torch": speed[name, "ours"] / speed[name, "torch"],
        }
        for name in SHAPES
    }
    result = {
        "cpu": cpu_name(), "threads": args.threads, "repeats": args.repeats,
        "new_tokens": args.new_tokens, "shapes": SHAPES, "versions": worker.info["versions"],
        "rows": rows, "ratios": ratios, "hf_export_logit_diff": hf_export_diff,
    }  # fmt: skip
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "hf_checkpoints.json").write_text(json.dumps(result, indent=1))
    lines = [
        f"Greedy, batch 1, float32, {args.new_tokens} new tokens, median of {args.repeats} "
        f"round-robin rounds, {args.threads} threads, {cpu_name()}.",
        "",
        "| checkpoint | engine | tokens/s | same tokens as ours |",
        "| --- | --- | ---: | --- |",
    ]
    labels = {
        "ours": "ours (import-hf + export, onnxruntime)",
        "optimum": "Optimum ORTModel (its own export)",
        "optimum_ours": "Optimum ORTModelForCausalLM on our model.onnx",
        "torch": "transformers generate (torch)",
    }
    for row in rows:
        lines.append(
            f"| {row['model']} | {labels[row['engine']]} | {row['tokens_per_s']:.1f} | "
            f"{'yes' if row['same_tokens_as_ours'] else 'NO'} |"
        )
    lines.append("")
    for name, ratio in ratios.items():
        lines.append(
            f"- {name}: ours / Optimum = **{ratio['ours_over_optimum']:.2f}×**, "
            f"ours / torch = {ratio['ours_over_torch']:.2f}×"
        )
    lines.append(
        f"- our `export --format hf` of the GPT-2 run, loaded by transformers: largest "
        f"last-position logit difference from our model {hf_export_diff:.1e}"
    )
    (RESULTS / "hf_checkpoints.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
