"""`transformer-zoo serve EXPORT_DIR [EXPORT_DIR ...]`: the HTTP server
(`transformer_zoo.serving.http`), with no TensorFlow."""

from __future__ import annotations

import os
import sys

from transformer_zoo.cli.parsing import (
    UsageError,
    non_negative_float,
    positive_float,
    positive_int,
)
from transformer_zoo.errors import first_line


def register(commands) -> None:
    parser = commands.add_parser(
        "serve",
        help="serve exported models over HTTP (OpenAI API and Open Inference Protocol v2)",
        description="Serve ONNX export directories over HTTP: OpenAI's /v1/completions and "
        "/v1/embeddings, the Open Inference Protocol's /v2, /health and /metrics.",
    )
    parser.add_argument("directories", nargs="+", metavar="EXPORT_DIR")
    parser.add_argument("--host", default="127.0.0.1", help="default 127.0.0.1 (this machine)")
    parser.add_argument("--port", type=int, default=8000, help="default 8000")
    parser.add_argument(
        "--name",
        action="append",
        help="the model's name (one per directory, in order; default: the directory's name)",
    )
    parser.add_argument(
        "--max-batch-size", type=positive_int, default=16,
        help="sequences decoded together (default 16)",
    )  # fmt: skip
    parser.add_argument(
        "--encoder-batch-size", type=positive_int, default=32,
        help="texts an encoder-only model runs together (default 32)",
    )  # fmt: skip
    parser.add_argument(
        "--max-wait-ms", type=non_negative_float, default=2.0,
        help="how long an encoder request waits for others to batch with while another batch "
        "runs (default 2; 0: none; an idle model runs a request at once)",
    )  # fmt: skip
    parser.add_argument(
        "--encoder-workers", type=positive_int, default=2,
        help="threads forming and running an encoder-only model's batches: one batch runs "
        "while the next forms, on a second session of --threads/N threads (a second copy of "
        "the weights; default 2)",
    )  # fmt: skip
    parser.add_argument(
        "--max-queue", type=positive_int, default=256,
        help="sequences (texts) waiting per model before answering 429 (default 256); a "
        "larger request, up to 2048, is taken when none wait",
    )  # fmt: skip
    parser.add_argument(
        "--timeout", type=positive_float, default=120.0, help="seconds per request (default 120)"
    )
    parser.add_argument(
        "--max-body-bytes", type=positive_int, default=1 << 20, help="default 1 MiB"
    )
    parser.add_argument(
        "--max-tokens", type=positive_int, help="the most max_tokens a request may ask"
    )
    parser.add_argument("--api-key", help="require 'Authorization: Bearer KEY' on /v1 and /v2")
    parser.add_argument(
        "--cors-origin", action="append", default=[], help="allow this origin (repeatable)"
    )
    parser.add_argument(
        "--threads", type=positive_int, default=2, help="onnxruntime threads per session"
    )
    parser.add_argument(
        "--spinning",
        action="store_true",
        help="idle onnxruntime threads busy-wait (off by default: they would take the cores "
        "from the server's own threads)",
    )
    parser.add_argument(
        "--ray",
        action="store_true",
        help="serve on a local Ray Serve instead (pip install 'transformer_zoo[ray]')",
    )
    parser.add_argument(
        "--replicas", type=positive_int, default=1, help="with --ray: copies of the server"
    )
    parser.add_argument(
        "--log-level", default="info", choices=("critical", "error", "warning", "info", "debug")
    )
    parser.set_defaults(handler=_serve, engine="onnx")


def _serve(args) -> int:
    from transformer_zoo.run_directory import load_run_config
    from transformer_zoo.serving.http import ServerSettings, model_names, serve

    if not 0 < args.port < 65536:
        raise UsageError(f"--port must be in 1..65535, got {args.port}")
    cores = os.cpu_count() or 1
    if args.threads > cores:
        raise UsageError(f"--threads {args.threads} is more than this machine's {cores} cores")
    try:
        directories = model_names(args.directories, args.name)
        for directory in directories.values():
            load_run_config(directory)  # a wrong path fails now, not after start-up
            if not any(name.endswith(".onnx") for name in os.listdir(directory)):
                raise ValueError(f"{directory} has no ONNX files: run `transformer-zoo export`")
    except (ValueError, OSError) as error:
        raise UsageError(first_line(error)) from None
    settings = ServerSettings(
        max_batch_size=args.max_batch_size,
        encoder_batch_size=args.encoder_batch_size,
        max_wait_ms=args.max_wait_ms,
        encoder_workers=args.encoder_workers,
        max_queue=args.max_queue,
        request_timeout=args.timeout,
        max_body_bytes=args.max_body_bytes,
        max_tokens=args.max_tokens,
        api_key=args.api_key or os.environ.get("TRANSFORMER_ZOO_API_KEY"),
        cors_origins=args.cors_origin,
        threads=args.threads,
        allow_spinning=args.spinning,
    )
    names = ", ".join(f"{n} ({d})" for n, d in directories.items())
    print(f"transformer-zoo serve: http://{args.host}:{args.port} serving {names}", file=sys.stderr)
    if args.ray:
        try:
            from transformer_zoo.serving.http import ray_serve
        except ImportError:
            raise UsageError("--ray needs Ray Serve: pip install 'transformer_zoo[ray]'") from None
        directories = {name: os.path.abspath(d) for name, d in directories.items()}
        return ray_serve.run(directories, args.host, args.port, settings, args.replicas)
    if args.replicas != 1:
        raise UsageError("--replicas needs --ray")
    return serve(directories, args.host, args.port, settings, args.log_level)
