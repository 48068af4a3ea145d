"""`TrainConfig`'s checks: numpy's numbers are numbers, a bool is not one, a flag is a
bool, a path may be a `Path`; what passes is kept as a plain Python value."""

import dataclasses
import json
import pathlib

import numpy as np
import pytest

from transformer_zoo.cli import build_parser
from transformer_zoo.cli.train_arguments import config_from_args
from transformer_zoo.train.config import TrainConfig

# One of every numeric setting, as Python values; each takes numpy's as well.
INTEGERS = dict(
    batch_size=32,
    seed=3,
    warmup_steps=10,
    steps=200,
    eval_every=50,
    steps_per_execution=5,
    max_examples=64,
    backup_every=20,
    early_stopping_patience=2,
    vocabulary_size=300,
)
NUMBERS = dict(
    learning_rate=1e-3,
    time_budget=60.0,
    clip_norm=1.0,
    weight_decay=0.01,
    min_learning_rate=1e-5,
    label_smoothing=0.1,
    ema_momentum=0.999,
    dropout=0.1,
)


def _config(**settings):
    return TrainConfig("encoder-decoder", data="pairs.tsv", out="runs/x", **settings)


def test_numpy_numbers_are_accepted_and_kept_as_python_numbers():
    """`batch_size=np.int64(32)` and `learning_rate=np.float32(1e-3)` were refused ("must
    be a positive number. Received: np.float32(0.001)") while `dropout=np.float64(0.1)`
    passed; the project takes numpy's numbers wherever Python's (errors.is_integer)."""
    python = _config(**INTEGERS, **NUMBERS)
    as_numpy = _config(
        **{name: np.int64(value) for name, value in INTEGERS.items()},
        **{name: np.float32(value) for name, value in NUMBERS.items()},
    )
    for name in INTEGERS:
        assert type(getattr(as_numpy, name)) is int
        assert getattr(as_numpy, name) == getattr(python, name)
    for name in NUMBERS:
        assert type(getattr(as_numpy, name)) is float
        assert getattr(as_numpy, name) == pytest.approx(getattr(python, name), rel=1e-6)
    json.dumps(as_numpy.identity())  # config.json holds no numpy scalar
    # A numpy float64 is a float: kept exactly, so a rerun with it resumes the same run.
    exact = _config(**INTEGERS, **{name: np.float64(v) for name, v in NUMBERS.items()})
    assert exact.identity() == python.identity() and type(exact.dropout) is float


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("batch_size", True, "`batch_size` must be a positive integer. Received: batch_size=True"),
        ("seed", np.float64(1.0), "`seed` must be a non-negative integer"),
        ("warmup_steps", -1, "`warmup_steps` must be a non-negative integer"),
        ("pretrain_steps", True, "`pretrain_steps` must be a non-negative integer"),
        ("learning_rate", True, "`learning_rate` must be a positive number"),
        ("learning_rate", "1e-3", "`learning_rate` must be a positive number"),
        ("clip_norm", np.float32("inf"), "`clip_norm` must be a positive number"),
        ("label_smoothing", False, "`label_smoothing` must be in [0, 1). Received"),
        ("dropout", False, "`dropout` must be in [0, 1). Received: dropout=False"),
        ("ema_momentum", np.float32(1.0), "`ema_momentum` must be in (0, 1)"),
        ("weight_decay", float("nan"), "`weight_decay` must be a number ≥ 0"),
        ("jit_compile", "no", "`jit_compile` must be True or False. Received: jit_compile='no'"),
        ("evaluate", "no", "`evaluate` must be True or False. Received: evaluate='no'"),
        ("evaluate", 0, "`evaluate` must be True or False. Received: evaluate=0"),
        ("data", None, "`data` must be a file path or a built-in task"),
        ("valid", 3, "`valid` must be a file path. Received: valid=3"),
    ],
)
def test_a_wrong_kind_of_value_is_refused_in_one_line_naming_it(name, value, message):
    """A bool is not a number: `pretrain_steps=True` ran 1 masked-LM step, and
    `label_smoothing=False` and `dropout=False` passed as 0. Any non-empty string is
    truthy: `evaluate="no"` evaluated and `jit_compile="no"` compiled."""
    settings = {"family": "encoder-only"} if name == "pretrain_steps" else {}
    with pytest.raises(ValueError) as error:
        TrainConfig(**{"family": "encoder-decoder", "data": "pairs.tsv", name: value, **settings})
    assert message in str(error.value) and "\n" not in str(error.value)


def test_flags_take_numpy_bools_and_paths_take_path_objects(tmp_path):
    """`out` took a `Path` but `data`, `valid` and `init` refused one."""
    config = TrainConfig(
        "decoder-only",
        data=pathlib.Path("corpus.txt"),
        valid=pathlib.Path("valid.txt"),
        out=tmp_path / "run",
        jit_compile=np.bool_(True),
        evaluate=np.bool_(False),
    )
    assert (config.jit_compile, config.evaluate) == (True, False)
    assert type(config.jit_compile) is bool and type(config.evaluate) is bool
    assert config.data == str(pathlib.Path("corpus.txt").absolute())
    assert config.out == str(tmp_path / "run") and isinstance(config.valid, str)


def test_replace_and_the_command_line_give_the_same_config():
    """`dataclasses.replace` runs the checks again on a checked config, and the CLI's
    argparse values (ints, floats, bools) pass as they are."""
    config = _config(**INTEGERS, **NUMBERS, jit_compile=True)
    assert dataclasses.replace(config) == config
    assert dataclasses.replace(config, batch_size=np.int64(16)).batch_size == 16
    argv = ["train", "--family", "encoder-decoder", "--data", "pairs.tsv", "--out", "runs/x"]
    argv += ["--batch-size", "32", "--seed", "3", "--learning-rate", "0.001", "--jit"]
    argv += ["--warmup-steps", "10", "--label-smoothing", "0.1", "--no-evaluate"]
    from_cli = config_from_args(build_parser().parse_args(argv))
    expected = _config(
        batch_size=32,
        seed=3,
        learning_rate=1e-3,
        jit_compile=True,
        warmup_steps=10,
        label_smoothing=0.1,
        evaluate=False,
    )
    assert from_cli == expected


@pytest.mark.parametrize(
    "settings",
    [{"steps": 20}, {"steps": 20, "eval_every": 5}, {"epochs": 2}, {}],
    ids=["steps", "steps-eval-every", "epochs", "defaults"],
)
def test_the_recorded_settings_make_the_same_config_again(settings):
    """config.json's `extra.train` (`identity()`) of a `--steps` run on built-in data held
    the default `epochs: 4` beside `steps: 20`, which `TrainConfig` refuses."""
    config = TrainConfig(family="encoder-decoder", **settings)
    recorded = json.loads(json.dumps(config.identity()))  # as config.json holds it
    assert TrainConfig(**recorded).identity() == config.identity()
    if "steps" in settings:
        assert recorded["epochs"] is None


def test_a_floor_above_the_peak_rate_is_refused_naming_both():
    """It was clamped to the peak: a constant rate, said nowhere. The built-in data's
    default peak is 2e-3."""
    with pytest.raises(
        ValueError, match=r"\(0\.005\) is above the peak `learning_rate` \(0\.002\)"
    ):
        TrainConfig(family="encoder-decoder", min_learning_rate=5e-3)
    assert TrainConfig(family="encoder-decoder", min_learning_rate=2e-3).min_learning_rate == 2e-3


def test_an_init_run_on_built_in_data_takes_the_settings_given_then_inits_then_the_datas():
    """On `builtin:` data the data's defaults (1,500 masked-LM steps, 3e-4, dropout 0)
    replaced `init`'s (README: AdamW at 1e-4, the encoder's own dropout, no pretraining):
    the run pretrained an encoder pretrained already, and its recorded settings, holding
    `pretrain_steps` beside `init`, made no config again."""
    config = TrainConfig("encoder-only", init="runs/minilm")
    assert (config.optimizer, config.learning_rate) == ("adamw-cosine", 1e-4)
    assert config.dropout is None and config.pretrain_steps is None  # the model's own; none
    assert (config.epochs, config.warmup_steps) == (4, 100)  # the data's, as README says
    recorded = json.loads(json.dumps(config.identity()))  # as config.json holds it
    assert TrainConfig(**recorded).identity() == config.identity()
    given = TrainConfig(
        "encoder-only", init="runs/minilm", learning_rate=5e-4, dropout=0.2, epochs=1
    )
    assert (given.learning_rate, given.dropout, given.epochs) == (5e-4, 0.2, 1)
    on_files = TrainConfig("encoder-only", data="pairs.tsv", init="runs/minilm")
    assert (on_files.learning_rate, on_files.dropout, on_files.epochs) == (1e-4, None, None)
