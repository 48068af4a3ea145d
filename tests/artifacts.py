"""Tiny models of each family, their run directories and their exports, built once per
session (a tf2onnx conversion takes a few seconds per graph) and shared by the tests:
across pytest-xdist's workers too, where the first worker to need one builds it and the
others load what it wrote (`built_once`)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pickle
import shutil
import types

import keras
import numpy as np
import pytest

from transformer_zoo.export import export_onnx, export_saved_model
from transformer_zoo.models import EncoderOnlyClassifier, from_preset
from transformer_zoo.run_directory import RunConfig, load_run_config, save_run_config
from transformer_zoo.text import WordPieceTokenizer, train_tokenizer

SENTENCES = [
    "March 5, 2021",
    "the cat sat on the mat",
    "a quick brown fox jumps over the lazy dog",
    "2021年3月5日",
    "on the fifth of March",
    "dogs and cats",
] * 3
SMALL = dict(num_layers=2, num_heads=2, hidden_dim=32, intermediate_dim=64, dropout=0.0)
LABELS = ["negative", "positive"]
WORDPIECE_VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [
    "the", "cat", "sat", "on", "mat", "dog", "##s", "a", "quick", "fox", ",", ".", "march",
]  # fmt: skip


def spread_embeddings(model, seed: int = 0, scale: float = 0.5) -> None:
    """Wider random embeddings than the initializer's, so that greedy, beam and sampled
    continuations of an untrained model are varied rather than one repeated token."""
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        if weight.path.endswith("token_embedding/embeddings"):
            weight.assign(rng.normal(0.0, scale, weight.shape).astype("float32"))


def _build(family: str, tokenizer, target_tokenizer=None):
    keras.utils.set_random_seed(0)
    vocabulary = tokenizer.vocabulary_size
    if family == "decoder-only":
        model = from_preset(
            "tiny", family=family, vocabulary_size=vocabulary, max_length=48, **SMALL
        )
        task = "language-model"
    elif family == "encoder-decoder":
        model = from_preset(
            "tiny",
            family=family,
            vocabulary_size=vocabulary,
            target_vocabulary_size=target_tokenizer.vocabulary_size,
            max_length=32,
            **SMALL,
        )
        task = "translation"
    else:
        backbone = from_preset(
            "tiny", family=family, vocabulary_size=vocabulary, max_length=32, **SMALL
        )
        model = EncoderOnlyClassifier(backbone, num_classes=len(LABELS), dropout=0.0)
        task = "classification"
    spread_embeddings(model)
    separate = target_tokenizer is not None
    config = RunConfig(
        family=family,
        preset="tiny",
        task=task,
        target_tokenizer="target_tokenizer.model" if separate else None,
        label_names=LABELS if task == "classification" else None,
        max_length=None,
        seed=0,
    )
    return model, config


@pytest.fixture(scope="session")
def tokenizer():
    return train_tokenizer(SENTENCES, 60)


@pytest.fixture(scope="session")
def target_tokenizer():
    return train_tokenizer(SENTENCES[::-1], 50, model_type="char")


@contextlib.contextmanager
def built_once(tmp_path_factory, name: str):
    """`(directory, build)`: a directory that all xdist workers of the session share, and
    whether this worker must build into it (the first to ask, holding a lock meanwhile;
    the others wait, then find it built). What is built must not depend on the worker."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the session's directory, above each worker's own
    directory = root / f"shared-{name}"
    with open(root / f"shared-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            build = not (directory / ".built").exists()
            if build:
                if directory.exists():  # a worker that failed half-way
                    shutil.rmtree(directory)
                directory.mkdir()
            yield directory, build
            if build:
                (directory / ".built").touch()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def family_artifacts(tmp_path_factory, tokenizer, target_tokenizer):
    """`get(family)`: the model, its run directory and its ONNX + SavedModel export.
    `get(family, saved_model=False)`: the same with an export of the ONNX graphs alone
    (`saved_model_report` None), for tests that read nothing else: the SavedModel takes
    ten times as long as the ONNX graphs to write, and a worker that asked for it while
    the other was writing it waited that long."""
    built = {}

    def base(family: str):
        """The model, its run directory and the ONNX export (`root/onnx`)."""
        if family not in built:
            target = target_tokenizer if family == "encoder-decoder" else None
            with built_once(tmp_path_factory, family) as (root, build):
                run_dir, onnx_dir = root / "run", root / "onnx"
                if build:
                    model, config = _build(family, tokenizer, target)
                    run_dir.mkdir()
                    model.save(run_dir / "model.keras")
                    save_run_config(run_dir, config)
                    tokenizer.save(run_dir / "tokenizer.model")
                    if target is not None:
                        target.save(run_dir / "target_tokenizer.model")
                    onnx_report = export_onnx(model, onnx_dir, tokenizer, target, config=config)
                    (root / "onnx_report.json").write_text(json.dumps(onnx_report))
                else:
                    model = keras.models.load_model(run_dir / "model.keras")
                    config = load_run_config(run_dir)
                    onnx_report = json.loads((root / "onnx_report.json").read_text())
            built[family] = types.SimpleNamespace(
                model=model,
                config=config,
                run_dir=run_dir,
                export_dir=onnx_dir,
                onnx_report=onnx_report,
                saved_model_report=None,
                tokenizer=tokenizer,
                target_tokenizer=target or tokenizer,
            )
        return built[family]

    def get(family: str, saved_model: bool = True):
        art = base(family)
        if not saved_model:
            return art
        if (family, "saved_model") not in built:
            target = target_tokenizer if family == "encoder-decoder" else None
            with built_once(tmp_path_factory, f"{family}-saved_model") as (root, build):
                export_dir = root / "export"
                if build:  # the ONNX export's copy, the SavedModel written beside it
                    shutil.copytree(art.export_dir, export_dir)
                    report = export_saved_model(
                        art.model, export_dir, tokenizer, target, config=art.config
                    )
                    (root / "report.json").write_text(json.dumps(report))
                report = json.loads((root / "report.json").read_text())
            built[family, "saved_model"] = types.SimpleNamespace(
                **{**vars(art), "export_dir": export_dir, "saved_model_report": report}
            )
        return built[family, "saved_model"]

    return get


@pytest.fixture(scope="session")
def plain_export(tmp_path_factory, family_artifacts):
    """`get(family)`: the family artifacts' model exported with `graphs="plain"` (tf2onnx,
    standard operators only): `(export directory, report)`."""

    def get(family: str):
        art = family_artifacts(family, saved_model=False)  # the model is what it exports
        with built_once(tmp_path_factory, f"plain-{family}") as (root, build):
            if build:
                target = art.target_tokenizer if family == "encoder-decoder" else None
                report = export_onnx(
                    art.model, root / "export", art.tokenizer, target,
                    config=art.config, graphs="plain",
                )  # fmt: skip
                (root / "report.json").write_text(json.dumps(report))
            report = json.loads((root / "report.json").read_text())
        return root / "export", report

    return get


@pytest.fixture(scope="session")
def wordpiece_artifacts(tmp_path_factory):
    """An encoder-only embedding model with a WordPiece `vocab.txt` (as MiniLM has):
    its run directory and ONNX export."""
    tokenizer = WordPieceTokenizer(WORDPIECE_VOCABULARY, max_length=16)
    with built_once(tmp_path_factory, "wordpiece") as (root, build):
        run_dir, export_dir = root / "run", root / "export"
        if build:
            keras.utils.set_random_seed(1)
            model = from_preset(
                "tiny",
                family="encoder-only",
                vocabulary_size=len(WORDPIECE_VOCABULARY),
                max_length=16,
                **SMALL,
            )
            config = RunConfig(
                family="encoder-only",
                preset="tiny",
                task="embedding",
                special_ids=tokenizer.special_ids,
                tokenizer="vocab.txt",
                max_length=16,
            )
            run_dir.mkdir()
            model.save(run_dir / "model.keras")
            save_run_config(run_dir, config)
            tokenizer.save(run_dir)
            export_onnx(model, export_dir, tokenizer, config=config)
        else:
            model = keras.models.load_model(run_dir / "model.keras")
    return types.SimpleNamespace(
        model=model, tokenizer=tokenizer, run_dir=run_dir, export_dir=export_dir
    )


@pytest.fixture(scope="session")
def hf_imports(tmp_path_factory):
    """`get(name)`: the tests/data checkpoint `hf_{name}` ("gpt2", "marian") imported
    with `import_hf_run` and exported to ONNX: `(run directory, export directory)`, for
    the checkpoint tests and the serving tests alike (each built its own, 2-3 s)."""
    from tests.helpers import DATA_DIR
    from transformer_zoo.export.run_export import export_run
    from transformer_zoo.models.hf.run import import_hf_run

    def get(name: str):
        with built_once(tmp_path_factory, f"hf-{name}") as (root, build):
            run_dir, export_dir = root / "run", root / "export"
            if build:
                import_hf_run(DATA_DIR / f"hf_{name}", run_dir)
                export_run(run_dir, export_dir, formats=("onnx",))
        return run_dir, export_dir

    return get


SMALL_RUN = dict(max_examples=96, epochs=2, batch_size=32, steps_per_execution=2)
# The runs of `trained_runs`: one block of d 64 (the tiny presets' 2 blocks of d 128 took
# twice as long to trace and train; what their users read does not depend on the size).
TRAINED_RUN = dict(
    SMALL_RUN, overrides=dict(num_layers=1, hidden_dim=64, intermediate_dim=128, num_heads=2)
)
# decoder-only trains in test_distribution.py; its evaluation is tested in test_fit.py.
TRAINED_TASKS = {"encoder-decoder": "translation", "encoder-only": "classification"}


def trained_run_flags() -> list[str]:
    """`transformer-zoo train`'s flags for the settings of `TRAINED_RUN`."""
    flags = []
    for name, value in TRAINED_RUN.items():
        if name == "overrides":
            flags += ["--set", *(f"{key}={json.dumps(v)}" for key, v in value.items())]
        else:
            flags += [f"--{name.replace('_', '-')}", str(value)]
    return flags


@pytest.fixture(scope="session")
def trained_runs(tmp_path_factory):
    """One small `train()` run per family of `TRAINED_TASKS` (about 10 s each)."""
    from transformer_zoo.train.config import TrainConfig
    from transformer_zoo.train.trainer import train

    with built_once(tmp_path_factory, "runs") as (root, build):
        if build:
            results = {}
            for family in TRAINED_TASKS:
                # A few masked-LM steps stand in for the 1,500 of the built-in default.
                extra = {"pretrain_steps": 3} if family == "encoder-only" else {}
                config = TrainConfig(family, out=str(root / family), **TRAINED_RUN, **extra)
                results[family] = train(config, verbose=0)
            keras.config.set_dtype_policy("float32")
            (root / "results.pkl").write_bytes(pickle.dumps(results))
        else:
            results = pickle.loads((root / "results.pkl").read_bytes())
    return results
