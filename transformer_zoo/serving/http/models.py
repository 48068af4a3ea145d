"""The served models of one server: loaded in the background (the server answers
`/health` with 503 meanwhile), each with the worker that batches its requests."""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field

from transformer_zoo.generation.onnx_runner import DEFAULT_THREADS
from transformer_zoo.serving.http.encoder_batcher import EncoderBatcher
from transformer_zoo.serving.http.generation_scheduler import GenerationScheduler
from transformer_zoo.serving.loading import load_onnx
from transformer_zoo.serving.served_model import ServedModel

log = logging.getLogger(__name__)


@dataclass
class ServerSettings:
    """What a server may take on, checked before any work.

    Attributes:
        max_batch_size: the most sequences a generative model decodes together.
        encoder_batch_size: the most texts an encoder-only model runs together.
        max_wait_ms: how long an encoder request waits for others to share its batch,
            while another batch is running (an idle model runs it at once).
        encoder_workers: threads forming and running an encoder-only model's batches
            (`EncoderBatcher`): under load, one batch runs while the next forms and runs.
            A batch that starts while another runs uses a second onnxruntime session of
            `threads // encoder_workers` threads (a second copy of the weights), so the
            two share the cores instead of contending for one session's thread pool.
        max_queue: the most sequences (texts) waiting per model; past it, 429. A request
            of more (up to `scheduler.MAX_REQUEST`) is taken when none are waiting.
        request_timeout: seconds a request may take; past it, 504 (or an error event).
        max_body_bytes: the largest request body; past it, 413.
        max_tokens: the most tokens a request may ask for (None: what the context allows).
        api_key: when set, `/v1` and `/v2` requests need `Authorization: Bearer KEY`.
        cors_origins: origins allowed by CORS (none: CORS off).
        threads: onnxruntime threads per session.
    """

    max_batch_size: int = 16
    encoder_batch_size: int = 32
    max_wait_ms: float = 2.0
    encoder_workers: int = 2
    max_queue: int = 256
    request_timeout: float = 120.0
    max_body_bytes: int = 1 << 20
    max_tokens: int | None = None
    api_key: str | None = None
    cors_origins: list[str] = field(default_factory=list)
    threads: int = DEFAULT_THREADS
    allow_spinning: bool = False  # spinning threads would take the cores from the server's

    def __post_init__(self):
        if self.api_key is not None and not self.api_key.strip():
            # An unset variable passed as the key would otherwise serve without one.
            raise ValueError(f"api_key must be a key or None. Received: {self.api_key!r}")


@dataclass
class ModelEntry:
    name: str
    directory: str
    served: ServedModel
    worker: GenerationScheduler | EncoderBatcher

    @property
    def family(self) -> str:
        return self.served.family

    @property
    def task(self) -> str:
        return self.served.config.task

    @property
    def reads_pairs(self) -> bool | None:
        """`ServedModel.reads_pairs` (worked out when the model loaded): True for a
        classifier trained on text pairs (`label<TAB>text<TAB>text2`), None where nothing
        says (an imported checkpoint, an older run whose data is gone: it takes both),
        False otherwise."""
        return self.served.reads_pairs


ROUTE_WORDS = ("versions", "ready", "infer")  # what follows a model's name in a /v2 path


def model_names(directories: list[str], names: list[str] | None = None) -> dict[str, str]:
    """`{name: directory}`: each directory's name unless `names` gives them (one each).
    A name may have slashes (`org/model`), between parts that do not read as the /v2
    routes' own (`ROUTE_WORDS`).

    Raises:
        ValueError: a count of names other than one per directory, a name twice, or a
            name whose /v2 routes would read as another's.
    """
    if names and len(names) != len(directories):
        raise ValueError(
            f"Give one --name per directory: {len(names)} names for {len(directories)} directories."
        )
    # abspath: `serve .` is named after the directory, not "." (whose /v2 routes clients
    # such as curl normalise away).
    chosen = names or [os.path.basename(os.path.abspath(d)) for d in directories]
    for name in chosen:
        parts = name.split("/")
        if (
            not name
            or set(parts) & {".", ".."}
            or (len(parts) > 1 and set(parts) & {"", *ROUTE_WORDS})
        ):
            raise ValueError(
                f"The model name {name!r} would not have its own /v2 routes: a name is "
                "not empty, none of its parts is '.' or '..', and the parts of one with '/' "
                f"are neither empty nor {', '.join(map(repr, ROUTE_WORDS))}."
            )
    twice = sorted({n for n in chosen if chosen.count(n) > 1})
    if twice:
        raise ValueError(f"Two models would be called {twice[0]!r}: name them with --name.")
    return dict(zip(chosen, (os.fspath(d) for d in directories), strict=True))


class ModelRegistry:
    """Loads the models on a thread of its own and holds them once loaded."""

    def __init__(self, directories: dict[str, str], settings: ServerSettings, metrics):
        self.directories = directories
        self.settings = settings
        self.metrics = metrics
        self.entries: dict[str, ModelEntry] = {}
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()  # `close`: load no further model

    def start(self, on_error=None) -> None:
        def load():
            name = None
            try:
                for name, directory in self.directories.items():
                    if self._stop.is_set():
                        return
                    self.entries[name] = self._load(name, directory)
                    log.info("loaded %s from %s", name, directory)
                self.ready.set()
            except Exception as error:
                log.error(
                    "could not load %s from %s", name, self.directories.get(name), exc_info=True
                )
                self.error = error
                if on_error is not None:
                    on_error(error)

        self._thread = threading.Thread(target=load, name="loading", daemon=True)
        self._thread.start()

    def wait(self) -> None:
        """Returns once the models are loaded; raises the error if loading failed."""
        while not self.ready.wait(0.1):
            if self.error is not None:
                raise self.error

    def _load(self, name: str, directory: str) -> ModelEntry:
        s = self.settings
        served = load_onnx(directory, s.threads, s.allow_spinning)
        observe = self.metrics.observer(name)
        if served.family == "encoder-only":
            concurrent = None
            threads = max(1, s.threads // s.encoder_workers)
            if s.encoder_workers > 1 and threads < s.threads:
                # Batches that run beside another share the cores: each on fewer threads.
                concurrent = load_onnx(directory, threads, s.allow_spinning)
                log.info(
                    "%s: a second session of %d thread(s) for concurrent batches "
                    "(--encoder-workers 1 for one copy of the weights)", name, threads,
                )  # fmt: skip
            worker = EncoderBatcher(
                served, s.encoder_batch_size, s.max_wait_ms, s.max_queue, observe,
                s.encoder_workers, concurrent,
            )  # fmt: skip
        else:
            worker = GenerationScheduler(served, s.max_batch_size, s.max_queue, observe)
        return ModelEntry(name, directory, served, worker)

    def close(self, timeout: float | None = 30.0) -> None:
        """Stops loading (once the model being loaded is in) and each worker once its
        queued and running requests are done. The loading thread is joined: a process
        that exited while it was inside onnxruntime aborted (`terminate called without an
        active exception`)."""
        self._stop.set()
        deadline = None if timeout is None else time.monotonic() + timeout

        def left():
            return None if deadline is None else max(0.0, deadline - time.monotonic())

        if self._thread is not None:
            self._thread.join(left())
        for entry in list(self.entries.values()):
            entry.worker.close(left())
