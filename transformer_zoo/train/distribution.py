"""`tf.distribute` strategies for `--strategy default|mirrored|multiworker`.

Keras 3 on TensorFlow trains under a strategy when the model is built and compiled in
`strategy.scope()`; `fit` then splits every batch across the replicas and sums the
gradients. The batch size is the global one.

- `default`: one device, no replication.
- `mirrored`: `MirroredStrategy` over every local GPU, or over the logical CPU devices
  (`tf.config.set_logical_device_configuration`) when there is no GPU.
- `multiworker`: `MultiWorkerMirroredStrategy`; each process reads its role from the
  `TF_CONFIG` environment variable (`{"cluster": {"worker": [...]}, "task": {"type":
  "worker", "index": i}}`). Worker 0 is the chief: it alone writes the run directory.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os

import tensorflow as tf

from transformer_zoo.train.config import STRATEGIES

log = logging.getLogger(__name__)  # warnings; the command line shows them


def cluster_spec() -> dict | None:
    """The parsed `TF_CONFIG`, or None when it is unset.

    Raises:
        ValueError: `TF_CONFIG` is not JSON or lacks its cluster or task.
    """
    text = os.environ.get("TF_CONFIG")
    if not text:
        return None
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"TF_CONFIG is not valid JSON: {error}") from None
    if not isinstance(spec, dict) or "cluster" not in spec or "task" not in spec:
        raise ValueError('TF_CONFIG needs "cluster" and "task" entries.')
    return spec


def worker_index() -> int:
    """This process's worker index in `TF_CONFIG` (0 without one)."""
    spec = cluster_spec()
    return int(spec["task"].get("index", 0)) if spec else 0


def is_chief(strategy_name: str) -> bool:
    """Whether this process writes the run directory: always, except for the workers of a
    multi-worker run other than worker 0."""
    return strategy_name != "multiworker" or worker_index() == 0


def check_strategy(name: str) -> None:
    """Raises `ValueError` for an unknown name, or `multiworker` without `TF_CONFIG`;
    call it before TensorFlow starts its runtime, so errors come before any work."""
    if name not in STRATEGIES:
        raise ValueError(f"`strategy` must be one of {STRATEGIES}. Received: strategy={name!r}")
    if name == "multiworker":
        spec = cluster_spec()
        if spec is None:
            raise ValueError(
                "--strategy multiworker needs TF_CONFIG: "
                '{"cluster": {"worker": ["host:port", ...]}, "task": {"type": "worker", '
                '"index": i}}'
            )
        workers = spec["cluster"].get("worker", [])
        if not workers or not 0 <= worker_index() < len(workers):
            raise ValueError(f"TF_CONFIG's task index is not one of its {len(workers)} workers.")


def make_strategy(name: str) -> tf.distribute.Strategy:
    """The strategy called `name` (see the module docstring)."""
    check_strategy(name)
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        gpus = tf.config.list_logical_devices("GPU")
        devices = gpus or tf.config.list_logical_devices("CPU")
        return tf.distribute.MirroredStrategy([d.name for d in devices])
    return tf.distribute.MultiWorkerMirroredStrategy()


def steps_per_execution(strategy_name: str, requested: int, replicas: int = 1) -> int:
    """The train steps per `tf.function` call: as requested, but 1 under `multiworker` or
    over more than one replica, where Keras 3.15's multi-step loop fails ("You must feed
    a value for placeholder tensor" in `multi_step_on_iterator`; a plain Keras model under
    `MirroredStrategy` over two logical CPU devices fails the same way). One warning says
    so when more were requested."""
    if requested <= 1 or (strategy_name != "multiworker" and replicas <= 1):
        return requested
    log.warning(
        "--steps-per-execution %d becomes 1 under --strategy %s over %d replicas: Keras "
        "3.15 fails to run several steps per call under a multi-replica strategy",
        requested,
        strategy_name,
        replicas,
    )
    return 1


@contextlib.contextmanager
def fit_scope(model, strategy: tf.distribute.Strategy):
    """Where `model.fit` runs: as is, except under `MultiWorkerMirroredStrategy`, where two
    bugs of Keras 3.15's TensorFlow trainer are worked around for the call (each in its
    own function below; these two are the project's only uses of private Keras API)."""
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        yield
        return
    with _build_lazily(model, strategy), _scalar_mean_reduction():
        yield


@contextlib.contextmanager
def _build_lazily(model, strategy):
    """Keras 3.15 bug: `fit` and `evaluate` begin by reducing the first batch across
    replicas (`TensorFlowTrainer._maybe_symbolic_build`, keras/src/backend/tensorflow/
    trainer.py) to build the model symbolically; `MultiWorkerMirroredStrategy.reduce`
    takes one tensor, not a batch's nest of them, and fails. (No upstream issue found as
    of Keras 3.15.1.)

    Workaround: Keras skips that step for a model without a strategy of its own and builds
    lazily, as it does without distribution. The model's private `_distribute_strategy`
    is unset for the call and the strategy entered as a scope instead, where `fit` finds
    it (`Model.distribute_strategy` falls back on the current one).
    """
    own = model._distribute_strategy
    model._distribute_strategy = None
    try:
        with strategy.scope():
            yield
    finally:
        model._distribute_strategy = own


@contextlib.contextmanager
def _scalar_mean_reduction():
    """Keras 3.15 bug: the logged metrics are averaged over replicas with
    `strategy.reduce("MEAN", value, axis=0)` (`reduce_per_replica` in keras/src/backend/
    tensorflow/trainer.py), which fails on the scalars every metric logs under
    `MultiWorkerMirroredStrategy`. (No upstream issue found as of Keras 3.15.1.)

    Workaround: `reduce_per_replica` is replaced for the call by one that reduces with
    `axis=None`: the same mean over the replicas.
    """
    from keras.src.backend.tensorflow import trainer as keras_trainer

    original = keras_trainer.reduce_per_replica

    def reduce(values, strategy, reduction):
        if reduction not in ("auto", "mean"):
            return original(values, strategy, reduction)

        def mean(value):
            if isinstance(value, tf.distribute.DistributedValues):
                return strategy.reduce("MEAN", value, axis=None)
            return value

        return tf.nest.map_structure(mean, values)

    keras_trainer.reduce_per_replica = reduce
    try:
        yield
    finally:
        keras_trainer.reduce_per_replica = original
