"""The same server on Ray Serve, for users who outgrow one process: N replicas of the app,
each with its own models and batching, behind Ray's HTTP proxy (`pip install
'transformer_zoo[ray]'`).

From the command line: `transformer-zoo serve EXPORT_DIR ... --ray --replicas N`, which
starts a Ray of its own on this machine; or, on a cluster, with Ray's own command, whose
builder takes `key=value` arguments (`build_app`):

    serve run transformer_zoo.serving.http.ray_serve:build_app models=gpt=exports/gpt,minilm=exports/minilm replicas=2
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import threading
import time

from transformer_zoo.serving.http.app import create_app
from transformer_zoo.serving.http.models import ServerSettings

log = logging.getLogger(__name__)
APP_NAME = "transformer-zoo"
SHUTDOWN_SECONDS = 10.0  # the most that shutting Ray down may take, after the replicas drained


def deployment(
    directories: dict[str, str],
    settings: ServerSettings | None = None,
    replicas: int = 1,
    log_level: str = "warning",
):
    """A bound Ray Serve application of `replicas` copies of the server's app for
    `{model name: export directory}`. Each replica loads the models before Ray sends it
    requests."""
    from ray import serve

    settings = settings or ServerSettings()

    def build():
        logging.getLogger("transformer_zoo").setLevel(log_level.upper())
        return create_app(directories, settings, load_in_background=False)

    class TransformerZoo:
        """One replica: the FastAPI app built on the replica by `build`."""

    ingress = serve.ingress(build)(TransformerZoo)
    return serve.deployment(
        name="transformer-zoo",
        num_replicas=replicas,
        # The models' onnxruntime threads are the work; Ray need not reserve cores for
        # them, which lets several replicas share a small machine.
        ray_actor_options={"num_cpus": 0},
        # The app's own queue, batching, 429 and timeout decide: Ray's default of 5
        # requests at a time per replica would cap every batch at 5 and hold the rest in
        # Ray's unbounded queue, outside the app's limits.
        max_ongoing_requests=settings.max_queue
        + max(settings.max_batch_size, settings.encoder_batch_size),
        # Stopping: a replica finishes the requests it holds before it goes.
        graceful_shutdown_timeout_s=settings.request_timeout,
        graceful_shutdown_wait_loop_s=0.5,
        # As the one-process server: no access log, `--log-level` for the rest.
        logging_config={"log_level": log_level.upper(), "enable_access_log": False},
    )(ingress).bind()


# `build_app`'s arguments besides `models` and `replicas`: ServerSettings fields and how
# each is read from text.
BUILD_SETTINGS = {
    "api_key": str,
    "max_tokens": int,
    "max_queue": int,
    "max_batch_size": int,
    "encoder_batch_size": int,
    "timeout": float,
    "max_body_bytes": int,
    "threads": int,
}


def build_app(args: dict):
    """`serve run` builder: `models=NAME=DIR,NAME=DIR` (or `models=DIR,DIR`), `replicas=N`,
    and the server's limits: `api_key=KEY` (else `TRANSFORMER_ZOO_API_KEY`, as the CLI),
    `max_tokens`, `max_queue`, `max_batch_size`, `encoder_batch_size`, `timeout` (seconds),
    `max_body_bytes`, `threads`, `log_level`. Any other argument is refused."""
    return deployment(*build_arguments(args))


def build_arguments(args: dict) -> tuple[dict[str, str], ServerSettings, int, str]:
    """`build_app`'s `key=value` arguments read: `(directories, settings, replicas,
    log_level)`, as `deployment` takes them."""
    from transformer_zoo.serving.http.models import model_names

    known = {"models", "replicas", "log_level", *BUILD_SETTINGS}
    unknown = sorted(set(args) - known)
    if unknown:
        raise ValueError(
            f"unknown argument(s) {', '.join(unknown)}: build_app takes {', '.join(sorted(known))}"
        )
    items = [item for item in str(args.get("models", "")).split(",") if item]
    if not items:
        raise ValueError("Give the models: models=NAME=DIR,NAME=DIR (or models=DIR,DIR).")
    named = [item.split("=", 1) for item in items]
    if all(len(pair) == 2 for pair in named):
        directories = {name: os.path.abspath(path) for name, path in named}
    else:
        directories = model_names([os.path.abspath(item) for item in items])
    try:
        given = {key: kind(args[key]) for key, kind in BUILD_SETTINGS.items() if key in args}
        replicas = int(args.get("replicas", 1))
    except ValueError as error:
        raise ValueError(f"build_app: {error}") from None
    if replicas < 1:
        raise ValueError(f"replicas must be at least 1, got {replicas}")
    given.setdefault("api_key", os.environ.get("TRANSFORMER_ZOO_API_KEY"))
    if "timeout" in given:
        given["request_timeout"] = given.pop("timeout")
    settings = dataclasses.replace(ServerSettings(), **given)
    return directories, settings, replicas, str(args.get("log_level", "warning"))


def run(
    directories,
    host: str,
    port: int,
    settings: ServerSettings,
    replicas: int,
    log_level: str = "warning",
) -> int:
    """Starts a Ray of its own on this machine (never one already running: its shutdown
    would take other applications with it), serves `deployment(...)` on `host:port` until
    SIGTERM or Ctrl-C, then stops taking requests, lets the replicas finish the ones they
    hold (up to the request timeout) and shuts Ray down. Returns 1 when a model fails to
    load. Past the drain, shutting Ray down may take `SHUTDOWN_SECONDS`; then the process
    exits without waiting (`os._exit`), for this is the command's last act."""
    import signal

    import ray
    from ray import serve

    from transformer_zoo.errors import first_line
    from transformer_zoo.serving.loading import load_onnx

    # A model that cannot load is named here, in one line, rather than deep in a replica's
    # log behind Ray's "Deploying application failed".
    for name, directory in directories.items():
        try:
            load_onnx(directory, 1)
        except Exception as error:
            print(
                f"transformer-zoo serve: could not load {name} from {directory}: "
                f"{first_line(error)}",
                file=sys.stderr,
            )
            return 1
    ray.init(address="local", include_dashboard=False, log_to_driver=True)
    ray_processes = _children()
    stop, started = threading.Event(), threading.Event()

    def on_sigterm(signum, frame):
        stop.set()
        if not started.is_set():  # out of serve.start / serve.run, which wait on Ray: a
            raise KeyboardInterrupt  # SIGTERM to the group stops Ray, and they would hang

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        serve.start(
            http_options={"host": host, "port": port},
            logging_config={"log_level": log_level.upper(), "enable_access_log": False},
        )
        serve.run(
            deployment(directories, settings, replicas, log_level),
            name=APP_NAME,
            route_prefix="/",
            blocking=False,
        )
        started.set()
        print(
            f"transformer-zoo serve: {replicas} Ray Serve replica{'s' if replicas > 1 else ''} "
            "ready",
            flush=True,
        )
        stop.wait()
    except BaseException:  # noqa: BLE001  (what Ray makes of the interruption, too)
        if not stop.is_set():
            raise  # Ctrl-C or a failure: the command's own "interrupted" or error
        # SIGTERM while starting: whatever serve.run raised on its way out is that
    finally:
        if not _shut_down(serve, ray, ray_processes, settings.request_timeout):
            log.warning(
                "Ray did not shut down in time (were its processes stopped already?); "
                "exiting without it"
            )
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0 if stop.is_set() else 1)
    return 0


def _children() -> list:
    """Ray's long-lived processes started for this one: its GCS server and raylet (its
    workers come and go)."""
    import psutil  # Ray's own dependency

    found = psutil.Process().children(recursive=True)
    return [p for p in found if p.name() in ("gcs_server", "raylet")]


def _alive(process) -> bool:
    import psutil

    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _shut_down(serve, ray, ray_processes: list, drain_seconds: float) -> bool:
    """On a thread: `serve.delete` of the application (the proxy stops routing to it and
    each replica finishes its requests), then `serve.shutdown()` and `ray.shutdown()`.
    True if done in time: the drain may take `drain_seconds`, the rest
    `SHUTDOWN_SECONDS`. SIGTERM sent to the whole process group (as a terminal's Ctrl-C,
    systemd and `docker stop` send it) stops Ray's own processes too: nothing is left to
    drain, and Serve's calls would wait about 40 s for them, so once any of them has
    exited only `SHUTDOWN_SECONDS` more are given."""

    def shut_down():
        try:
            if all(_alive(p) for p in ray_processes):
                serve.delete(APP_NAME)
            serve.shutdown()
        finally:
            ray.shutdown()

    thread = threading.Thread(target=shut_down, name="ray-shutdown", daemon=True)
    thread.start()
    deadline = time.monotonic() + drain_seconds + SHUTDOWN_SECONDS
    while thread.is_alive() and time.monotonic() < deadline:
        thread.join(0.5)
        if not all(_alive(p) for p in ray_processes):
            deadline = min(deadline, time.monotonic() + SHUTDOWN_SECONDS)
    return not thread.is_alive()
