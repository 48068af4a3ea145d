"""The same server on Ray Serve, for users who outgrow one process: N replicas of the app,
each with its own models and batching, behind Ray's HTTP proxy (`pip install
'transformer_zoo[ray]'`).

From the command line: `transformer-zoo serve EXPORT_DIR ... --ray --replicas N`; or with
Ray's own command, whose builder takes `key=value` arguments:

    serve run transformer_zoo.serving.http.ray_serve:build_app models=gpt=exports/gpt,minilm=exports/minilm replicas=2
"""

from __future__ import annotations

import logging
import os
import sys
import threading

from transformer_zoo.serving.http.app import create_app
from transformer_zoo.serving.http.models import ServerSettings

log = logging.getLogger(__name__)
SHUTDOWN_SECONDS = 10.0  # the most that shutting Ray down may take


def deployment(
    directories: dict[str, str], settings: ServerSettings | None = None, replicas: int = 1
):
    """A bound Ray Serve application of `replicas` copies of the server's app for
    `{model name: export directory}`. Each replica loads the models before Ray sends it
    requests."""
    from ray import serve

    def build():
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
    )(ingress).bind()


def build_app(args: dict):
    """`serve run` builder: `models=NAME=DIR,NAME=DIR` (or `models=DIR,DIR`), `replicas=N`."""
    from transformer_zoo.serving.http.models import model_names

    items = [item for item in str(args.get("models", "")).split(",") if item]
    if not items:
        raise ValueError("Give the models: models=NAME=DIR,NAME=DIR (or models=DIR,DIR).")
    named = [item.split("=", 1) for item in items]
    if all(len(pair) == 2 for pair in named):
        directories = {name: os.path.abspath(path) for name, path in named}
    else:
        directories = model_names([os.path.abspath(item) for item in items])
    return deployment(directories, ServerSettings(), int(args.get("replicas", 1)))


def run(directories, host: str, port: int, settings: ServerSettings, replicas: int) -> int:
    """Starts a local Ray, serves `deployment(...)` on `host:port` until SIGTERM or Ctrl-C,
    then shuts Ray down, for at most `SHUTDOWN_SECONDS`: past them the process exits
    without waiting (`os._exit`), for this is the command's last act."""
    import signal

    import ray
    from ray import serve

    ray.init(include_dashboard=False, log_to_driver=False)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    try:
        serve.start(http_options={"host": host, "port": port})
        serve.run(deployment(directories, settings, replicas), blocking=False)
        print(f"transformer-zoo serve: {replicas} Ray Serve replicas ready", flush=True)
        stop.wait()
    finally:
        if not _shut_down(serve, ray):
            log.warning(
                "Ray did not shut down within %g s (were its processes stopped already?); "
                "exiting without it", SHUTDOWN_SECONDS,
            )  # fmt: skip
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0 if stop.is_set() else 1)
    return 0


def _shut_down(serve, ray) -> bool:
    """`serve.shutdown()`, then `ray.shutdown()`, on a thread: True if done within
    `SHUTDOWN_SECONDS`. SIGTERM sent to the whole process group (as a terminal's Ctrl-C,
    systemd and `docker stop` send it) stops Ray's own processes too, and then
    `serve.shutdown()` waited about 40 s for them before it gave up."""

    def shut_down():
        try:
            serve.shutdown()
        finally:
            ray.shutdown()

    thread = threading.Thread(target=shut_down, name="ray-shutdown", daemon=True)
    thread.start()
    thread.join(SHUTDOWN_SECONDS)
    return not thread.is_alive()
