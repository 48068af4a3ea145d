"""`transformer-zoo serve EXPORT_DIR [EXPORT_DIR ...]`: the HTTP server
(`transformer_zoo.serving.http`), with no TensorFlow."""

from __future__ import annotations

import errno
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
        help="the model's name (repeat it, one per directory, in order; default: the "
        "directory's name)",
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
        "--threads",
        type=positive_int,
        default=2,
        help="onnxruntime threads per session (default 2)",
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
        "--log-level",
        default="info",
        choices=("critical", "error", "warning", "info", "debug"),
        help="uvicorn's log level (default info)",
    )
    parser.set_defaults(handler=_serve, engine="onnx")


def _serve(args) -> int:
    from transformer_zoo.run_directory import load_run_config
    from transformer_zoo.serving.http import ServerSettings, listening_socket, model_names, serve

    if not 0 < args.port < 65536:
        raise UsageError(f"--port must be in 1..65535, got {args.port}")
    cores = os.cpu_count() or 1
    if args.threads > cores:
        raise UsageError(f"--threads {args.threads} is more than this machine's {cores} cores")
    if args.replicas != 1 and not args.ray:
        raise UsageError("--replicas needs --ray")
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
        api_key=_api_key(args.api_key),
        cors_origins=args.cors_origin,
        threads=args.threads,
        allow_spinning=args.spinning,
    )
    if args.ray:
        _check_ray()
    try:
        listening = listening_socket(args.host, args.port)
    except OSError as error:
        where = f"{args.host}:{args.port}"
        if error.errno == errno.EADDRINUSE:
            raise UsageError(
                f"{where} is in use: stop what listens there, or choose another --port"
            ) from None
        raise UsageError(f"cannot listen on {where}: {error.strerror or error}") from None
    names = ", ".join(f"{n} ({d})" for n, d in directories.items())
    key = "an API key is required" if settings.api_key else "no API key is required"
    print(
        f"transformer-zoo serve: http://{args.host}:{args.port} serving {names}; {key}",
        file=sys.stderr,
    )
    if args.ray:
        from transformer_zoo.serving.http import ray_serve

        listening.close()  # Ray's proxy binds the port itself
        directories = {name: os.path.abspath(d) for name, d in directories.items()}
        return ray_serve.run(
            directories, args.host, args.port, settings, args.replicas, args.log_level
        )
    return serve(directories, args.host, args.port, settings, args.log_level, listening)


def _api_key(given: str | None) -> str | None:
    """`--api-key`, else `TRANSFORMER_ZOO_API_KEY`. An empty one, as an unset variable
    gives (`--api-key "$KEY"`), is refused: taken, it would serve without a key."""
    key = given if given is not None else os.environ.get("TRANSFORMER_ZOO_API_KEY")
    if key is not None and not key.strip():
        where = "--api-key" if given is not None else "TRANSFORMER_ZOO_API_KEY"
        raise UsageError(
            f"{where} is empty (an unset variable?): give the key, or leave it out to serve "
            "without one"
        )
    return key


def _check_ray() -> None:
    """Ray Serve, imported before anything starts, so that a missing one is one line."""
    try:
        import ray.serve  # noqa: F401
    except ImportError as error:
        raise UsageError(
            f"--ray needs Ray Serve ({first_line(error)}): pip install 'transformer_zoo[ray]'"
        ) from None
